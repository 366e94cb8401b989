"""Plots of a ``ccbench/1`` Dataset.  Each takes a Dataset and returns a
matplotlib Figure, so notebooks and reports share them."""
import numpy as np

from .._optional import require


def _plt():
    require("matplotlib", "report")
    import matplotlib
    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline",
                                                 "module://ipympl.backend_nbagg", "widget", "ipympl"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _log2_sizes(ax):
    from matplotlib.ticker import FuncFormatter

    from ..units import format_size
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(int(v)) if v >= 1 else ""))
    ax.tick_params(axis="x", labelrotation=45)


def _title(ds, what):
    a = ds.attrs
    return f"{a.get('collective')} {what} — {a.get('nranks')} ranks, {a.get('dtype')}, {a.get('backend')}"


def busbw_vs_size(ds, stat="avg", rank_stat="max", placement=None, peak=None, ax=None):
    """busbw per algorithm vs size (log2 x), with a peak line when given (GB/s)."""
    plt = _plt()
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(8, 4.5))
    bw = ds.ccb.busbw(stat, rank_stat)
    placements = [placement] if placement else list(bw["placement"].values)
    for alg in bw["algorithm"].values:
        for p in placements:
            y = bw.sel(algorithm=alg, placement=p)
            label = str(alg) if len(placements) == 1 else f"{alg} ({p.replace('_', '-')})"
            ax.plot(ds["size"].values, y.values, marker="o", ms=3, label=label,
                    ls="-" if p == "out_of_place" else "--")
    if peak:
        ax.axhline(peak, color="k", lw=1, ls=":", label=f"peak {peak:g} GB/s")
    _log2_sizes(ax)
    ax.set_xlabel("size")
    ax.set_ylabel(f"busbw (GB/s, {stat} over iterations)")
    ax.set_title(_title(ds, "bus bandwidth"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def latency_percentiles(ds, percentiles=("p50", "p99"), rank_stat="max", placement="out_of_place"):
    """Latency percentiles (µs, log y) vs size, per algorithm."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if placement not in ds["placement"].values:
        placement = str(ds["placement"].values[0])
    styles = ["-", "--", ":", "-."]
    for alg_i, alg in enumerate(ds["algorithm"].values):
        color = f"C{alg_i % 10}"
        for j, q in enumerate(percentiles):
            t = ds.ccb.time(q, rank_stat).sel(algorithm=alg, placement=placement)
            ax.plot(ds["size"].values, t.values, color=color, ls=styles[j % 4], marker=".",
                    label=f"{alg} {q}")
    _log2_sizes(ax)
    ax.set_yscale("log")
    ax.set_xlabel("size")
    ax.set_ylabel(f"time (µs, {rank_stat} over ranks)")
    ax.set_title(_title(ds, f"latency {', '.join(percentiles)} ({placement.replace('_', '-')})"))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def rank_heatmap(ds, algorithm=None, placement="out_of_place"):
    """Median latency per (rank, size), normalised per size: stragglers show hot."""
    plt = _plt()
    algorithm = algorithm or str(ds["algorithm"].values[0])
    if placement not in ds["placement"].values:
        placement = str(ds["placement"].values[0])
    med = ds["latency"].sel(algorithm=algorithm, placement=placement).median("iteration")
    rel = med / med.median("rank")
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.35 * ds.sizes["rank"] + 1.5))
    im = ax.imshow(np.asarray(rel.transpose("rank", "size").values, dtype=float), aspect="auto",
                   cmap="magma", interpolation="nearest")
    from ..units import format_size
    ax.set_xticks(range(ds.sizes["size"]))
    ax.set_xticklabels([format_size(int(s)) for s in ds["size"].values], rotation=60, fontsize=7)
    ax.set_yticks(range(ds.sizes["rank"]))
    ax.set_yticklabels([str(r) for r in ds["rank"].values], fontsize=7)
    ax.set_xlabel("size")
    ax.set_ylabel("rank")
    fig.colorbar(im, ax=ax, label="median latency / median over ranks")
    ax.set_title(_title(ds, f"per-rank median latency — {algorithm}"))
    fig.tight_layout()
    return fig
