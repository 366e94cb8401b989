"""Time ratios per size: what a framework (torch.distributed) costs over the
library it calls (the kit's own NCCL loop), eager against CUDA graph, or
any algorithm against another, with bootstrap intervals.

The ratios and intervals are `ccbench_kit.compare.compare`'s (one
bootstrap, seeded); here they are turned from busbw ratios into time
ratios (the run's time over the reference's: 4.0 = four times as long),
which is how an overhead reads.
"""
import warnings

import numpy as np
import pandas as pd

from ..compare import compare as _compare
from ..errors import CCBenchError
from ..units import format_size

SMALL = 4096   # bytes: the sizes where the host's work per call is the time
COLUMNS = ["pair", "placement", "size", "time", "time_ref", "ratio", "lo", "hi", "verdict"]


def time_ratios(ds, reference=None, stat="median"):
    """Per (pair, placement, size): median times and their ratio with a
    bootstrap 95 % interval, as a DataFrame (`COLUMNS`; lo/hi NaN where a
    side has no per-iteration data).

    `reference` None: every algorithm of `ds` after the first against the
    first (``torch:graph`` against ``torch``); a Dataset (a baseline of the
    same collective): each algorithm of `ds` against the baseline's
    (`compare`'s pairing: same names, else its only one).
    """
    frames = []
    if reference is None:
        algs = [str(a) for a in ds["algorithm"].values]
        pairs = [(a, algs[0]) for a in algs[1:]]
        if pairs:
            frames.append(_frame(ds, ds, pairs, stat, "{run} / {ref}"))
    else:
        frames.append(_frame(ds, reference, None, stat, "{run} / baseline {ref}"))
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def _frame(run, ref, pairs, stat, label):
    with warnings.catch_warnings():  # the differences are said by the verdict
        warnings.simplefilter("ignore")
        res = _compare(run, ref, stat=stat, algorithms=pairs)
    fr, fb = run.ccb.bus_factor, ref.ccb.bus_factor
    sizes = res["size"].values.astype(float)
    rows = []
    for ai, _ in enumerate(res["algorithm"].values):
        a = res.isel(algorithm=ai)
        name = label.format(run=a["run_algorithm"].item(), ref=a["baseline_algorithm"].item())
        for pi, placement in enumerate(res["placement"].values):
            p = a.isel(placement=pi)
            bw, bw_ref = p["busbw"].values, p["busbw_baseline"].values
            r, lo, hi = p["ratio"].values, p["ratio_lo"].values, p["ratio_hi"].values
            with np.errstate(all="ignore"):
                t, t_ref = sizes / 1e3 * fr / bw, sizes / 1e3 * fb / bw_ref
                # busbw ratio run/ref -> time ratio run/ref; the interval turns over
                k = fr / fb
                ratio, t_lo, t_hi = k / r, k / hi, k / lo
            for si, size in enumerate(sizes):
                if np.isfinite(ratio[si]):
                    rows.append([name, str(placement), int(size), t[si], t_ref[si], ratio[si],
                                 t_lo[si], t_hi[si], str(p["verdict"].values[si])])
    return pd.DataFrame(rows, columns=COLUMNS)


def small_size_sentence(ds, baseline, stat="median"):
    """One verdict line: the time ratio to the baseline at <= 4 KiB (the
    framework's overhead), its range over those sizes and the span of their
    intervals; "" where no such size was compared."""
    try:
        df = time_ratios(ds, baseline, stat)
    except CCBenchError:
        return ""
    df = df[(df["size"] <= SMALL)]
    if not len(df):
        return ""
    out = []
    for (pair, placement), g in df.groupby(["pair", "placement"], sort=False):
        ci = (f" (95 % CIs within {np.nanmin(g['lo']):.2f}–{np.nanmax(g['hi']):.2f}×)"
              if np.isfinite(g["lo"]).any() else " (plain ratios: no per-iteration data)")
        lo, hi = g["ratio"].min(), g["ratio"].max()
        span = (f"**{lo:.2f}×**" if np.isclose(lo, hi, rtol=0.005)
                else f"**{lo:.2f}×** to **{hi:.2f}×**")
        out.append(f"`{pair}` {placement.replace('_', '-')}: {span}{ci} over {len(g)} size"
                   f"{'s' if len(g) != 1 else ''}")
    return (f"Time ratio to the baseline at ≤ {format_size(SMALL)} ({stat} over iterations, "
            "run / baseline; above 1 the run takes longer): " + "; ".join(out) + ".")


def table_rows(df):
    """The section's table as text rows."""
    rows = []
    for r in df.itertuples():
        ci = f"{r.lo:.3f}–{r.hi:.3f}" if np.isfinite(r.lo) else "n/a (no per-iteration data)"
        rows.append([r.pair, r.placement.replace("_", "-"), format_size(r.size),
                     f"{r.time:.4g}", f"{r.time_ref:.4g}", f"{r.ratio:.3f}", ci, r.verdict])
    return rows
