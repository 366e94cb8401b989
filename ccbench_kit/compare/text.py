"""A comparison as the lines ``ccbench compare`` prints, or a flat table."""
import json

import numpy as np

from ..units import format_size


def _bw(v):
    return "N/A" if not np.isfinite(v) else (f"{v:.2f}" if v < 1e4 else f"{v:.4g}")


def format_comparison(res, title=None):
    """Lines: a heading saying what is compared and how, then one row per size."""
    a = res.attrs
    lines = [f"# {title or a['collective'] + ' ' + a['dtype']}: run {a['run']}",
             f"#   vs baseline {a['against']}",
             f"#   busbw ratio = run / baseline (> 1: the run is faster); time = {a['time']}",
             f"#   {a['method']}"]
    for note in json.loads(a.get("notes") or "[]"):
        lines.append(f"#   note: {note}")
    level = f"{float(a['confidence']):.0%} CI"
    for alg in res["algorithm"].values:
        for pl in res["placement"].values:
            r = res.sel(algorithm=alg, placement=pl)
            lines.append(f"# {alg} ({r['run_algorithm'].item()} vs "
                         f"{r['baseline_algorithm'].item()}), {pl}")
            lines.append(f"#{'size':>10} {'run GB/s':>10} {'base GB/s':>10} {'ratio':>7} "
                         f"{level:>17} {'n':>9}  verdict")
            for si, size in enumerate(r["size"].values):
                ratio = float(r["ratio"].values[si])
                lo, hi = float(r["ratio_lo"].values[si]), float(r["ratio_hi"].values[si])
                ci = f"[{lo:.3f}, {hi:.3f}]" if np.isfinite(lo) else "(plain ratio)"
                n = f"{int(r['n_run'].values[si])}/{int(r['n_baseline'].values[si])}"
                lines.append(f" {format_size(int(size)):>10} {_bw(float(r['busbw'].values[si])):>10} "
                             f"{_bw(float(r['busbw_baseline'].values[si])):>10} "
                             f"{(f'{ratio:.3f}' if np.isfinite(ratio) else 'N/A'):>7} {ci:>17} "
                             f"{n:>9}  {r['verdict'].values[si]}")
    return lines


def to_frame(res, run_name="", baseline_name=""):
    """One row per (algorithm, placement, size), for CSV."""
    df = res[["busbw", "busbw_baseline", "ratio", "ratio_lo", "ratio_hi", "n_run",
              "n_baseline", "method", "verdict"]].to_dataframe().reset_index()
    df.insert(0, "dtype", res.attrs.get("dtype", ""))
    df.insert(0, "collective", res.attrs.get("collective", ""))
    df["run"] = run_name or res.attrs.get("run", "")
    df["baseline"] = baseline_name or res.attrs.get("against", "")
    return df
