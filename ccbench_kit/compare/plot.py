"""A comparison as a matplotlib Figure: busbw of both sides over size, and
the ratio with its confidence band, the line at 1 and the acceptance line."""
import numpy as np

from .._optional import require
from ..units import format_size


def plot_comparison(res, placement=None, min_ratio=None, figsize=(9.0, 6.4)):
    """Figure with two panels (busbw; ratio) for one comparison result.

    Parameters
    ----------
    res : xarray.Dataset
        From `compare` (or ``ds.ccb.compare``).
    placement : str, optional
        Default: out_of_place when present.
    min_ratio : float, optional
        Draws the acceptance line (``ccbench compare --min-ratio``).
    """
    require("matplotlib", "report")
    from matplotlib.figure import Figure  # lazy: optional dependency (report extra)
    from matplotlib.ticker import FuncFormatter  # lazy: optional dependency (report extra)


    pls = [str(p) for p in res["placement"].values]
    pl = placement if placement in pls else ("out_of_place" if "out_of_place" in pls else pls[0])
    r = res.sel(placement=pl)
    a = res.attrs
    fig = Figure(figsize=figsize, layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    x = r["size"].values.astype(float)
    ci_label = f"{float(a['confidence']):.0%} bootstrap CI"
    for k, alg in enumerate(r["algorithm"].values):
        d = r.sel(algorithm=alg)
        color = f"C{k % 10}"
        top.plot(x, d["busbw"].values, "o-", ms=3.5, lw=1.5, color=color,
                 label=f"run: {d['run_algorithm'].item()}")
        top.plot(x, d["busbw_baseline"].values, "s--", ms=3, lw=1.2, color=color, alpha=0.7,
                 label=f"baseline: {d['baseline_algorithm'].item()}")
        ratio = d["ratio"].values
        bottom.plot(x, ratio, "o-", ms=3.5, lw=1.5, color=color, label=str(alg))
        lo, hi = d["ratio_lo"].values, d["ratio_hi"].values
        ok = np.isfinite(lo) & np.isfinite(hi)
        if ok.any():
            bottom.fill_between(x, np.where(ok, lo, np.nan), np.where(ok, hi, np.nan),
                                color=color, alpha=0.2, lw=0, label=ci_label)
            ci_label = None                      # one legend entry for the bands
    bottom.axhline(1.0, color="0.2", lw=1)
    if min_ratio is not None:
        bottom.axhline(min_ratio, color="C3", lw=1, ls=":", label=f"min ratio {min_ratio:g}")
    for ax in (top, bottom):
        ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, frameon=False, ncol=2)
    bottom.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(int(v)) if v >= 1 else ""))
    top.set_yscale("log")
    vals = np.concatenate([r[v].values.ravel() for v in ("ratio", "ratio_lo", "ratio_hi")])
    vals = vals[np.isfinite(vals) & (vals > 0)]
    if len(vals) and vals.max() / vals.min() > 4:    # a wide spread reads better in log
        bottom.set_yscale("log", base=2)
        bottom.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    top.set_ylabel("busbw (GB/s, 1 GB = 1e9 B)")
    bottom.set_ylabel("ratio run / baseline")
    bottom.set_xlabel("size")
    top.set_title(f"{a['collective']} {a['dtype']} ({pl}): {a['run']} vs {a['against']}",
                  loc="left", fontsize=10)
    bottom.set_title(f"time = {a['time']}; > 1: the run is faster", loc="left", fontsize=8.5,
                     color="0.35")
    return fig
