"""The α-β fits a report shows: computed once per part, their table and
the notes on fits that do not hold or whose cross-checks disagree."""
import warnings

import numpy as np

from ..theory import fit
from ..units import format_size
from . import analysis
from .cells import _table
from .style import approx_size


def fits_of(ctx, name):
    """The α-β fit of one part (computed once per report)."""
    if name not in ctx.fits:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ctx.fits[name] = fit(ctx.parts[name], stat="median")
    return ctx.fits[name]


def models_of(ctx, name):
    """`analysis.fit_models` of one part (computed once per report)."""
    if name not in ctx.models:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ctx.models[name] = analysis.fit_models(analysis.sized(ctx.parts[name]),
                                                   fits_of(ctx, name))
    return ctx.models[name]


def fit_table_html(fits, preset=None, models=None):
    """The fitted α, β, γ per algorithm as an HTML table, units in the
    headers, with each fit's quality; piecewise fits (`models`) add a row
    per piece."""
    if preset is not None and not preset.has_peak:
        preset = None
    rows_of = []
    for alg, f in fits.items():
        m = (models or {}).get(alg)
        rows_of.append((f.algorithm, f, "" if m is None else m["kind"]))
        if m is not None and m["kind"] == "piecewise":
            for x in m["pieces"]:
                rows_of.append((f"  {alg} {format_size(x.size_range[0])}–"
                                f"{format_size(x.size_range[1])}", x, "piece"))
    with_gamma = any(f.gamma > 0 for _, f, _ in rows_of)
    head = ["algorithm", "α (µs/step)", "1/β (GB/s)"] + (["γ (ns/B)"] if with_gamma else [])
    head += ["A (µs)", "busbw → (GB/s)"]
    head += [f"% of {preset.name}"] if preset is not None else []
    head += ["S½", "sizes fitted (down-weighted)", "rms resid.", "R² (log)", "drawn"]
    rows = []
    for label, f, kind in rows_of:
        generic = f.model.startswith("generic")
        cells = [f"{label} (A + F·S/B)" if generic and kind != "piece" else label,
                 "—" if generic else f"{f.alpha * 1e6:.3g}",
                 "—" if generic or f.beta <= 0 else f"{1 / f.beta / 1e9:.3g}"]
        if with_gamma:
            cells.append(f"{f.gamma * 1e9:.3g}" if f.gamma > 0 else "—")
        cells += [f"{f.latency * 1e6:.3g}", f"{f.peak_busbw:.3g}"]
        if preset is not None:
            cells.append(f"{100 * f.peak_busbw / preset.peak_gbps:.0f} %")
        verdict = {"holds": "yes", "piecewise": "in pieces", "none": "no fit",
                   "piece": "yes" if f.holds else "no fit", "": "yes" if f.holds else "no fit"}[kind]
        cells += [approx_size(f.half_size) if f.half_size < 1e18 else "∞",
                  f"{format_size(f.size_range[0])} – {format_size(f.size_range[1])} "
                  f"({f.outliers})", f"{100 * f.rms_inliers:.1f} %", f"{f.r2_log:.3f}", verdict]
        rows.append(cells)
    return _table(head, rows)


def fit_notes(fits, models=None):
    """Markdown: why a fit is not drawn, and where the fit's cross-checks
    (docs/theory.md) disagree with it by more than 15 % (the sweep is not one
    α-β line: a protocol change)."""
    notes = []
    for alg, m in (models or {}).items():
        if m["kind"] != "holds":
            notes.append(f"- **{alg}**: {m['text']}.")
    for f in fits.values():
        top = f.checks.get("busbw_top")
        if top and np.isfinite(f.peak_busbw) and abs(top / f.peak_busbw - 1) > 0.15:
            notes.append(f"- **{f.algorithm}**: the slope over the top decade of sizes gives "
                         f"{top:.3g} GB/s, the fit {f.peak_busbw:.3g} GB/s: the curve bends "
                         "(a protocol change); for the large-size bandwidth fit that range alone "
                         "(`theory.fit(ds, min_size=...)`).")
        small = f.checks.get("A_small")
        if small and abs(small / f.latency - 1) > 0.15:
            notes.append(f"- **{f.algorithm}**: the median time of the small sizes is "
                         f"{small * 1e6:.3g} µs, the fitted A {f.latency * 1e6:.3g} µs.")
    if any(f.gamma_source.startswith("not separable") for f in fits.values()):
        notes.append("- γ (reduction time) cannot be told from β with these algorithms; 1/β "
                     "includes it.")
    return ("Notes on the fits (cross-checks: docs/theory.md):\n" + "\n".join(notes)) if notes else ""
