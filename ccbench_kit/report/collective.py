"""One collective's sections of the report (busbw with theory, fit,
winners, latency, ranks, iterations, baseline), and nccl-tests' tables."""
import warnings

import numpy as np
import pandas as pd

from .. import markup
from ..errors import CCBenchError
from ..formats.nccl_tests.write_table import format_table
from ..units import format_size
from . import analysis, overhead, page, plots
from .cells import _html, _md, _png, _table, show_figure
from .fits import fit_notes, fit_table_html, fits_of, models_of
from .header import _sections
from .page import heading, slug
from .style import approx_size


def show_collective(ctx, name):
    """Every section for one collective: busbw with theory, fit, winners,
    latency, ranks, iterations, baseline."""
    # why long: the sections of the page in reading order, each a few lines that
    # share the collective's Dataset, fits and anchors; the drawing is in plots.
    import matplotlib.pyplot as plt  # lazy: optional dependency (report extra)

    ds = ctx.parts[name]
    preset = ctx.presets.get(name)
    if preset is not None and not preset.has_peak:
        preset = None
    keys = _sections(ctx, name)
    titles = dict(page.SECTIONS)

    def section(key):
        _html(page.heading(3, titles[key], page.anchor(name, key)))

    per_iteration = analysis.per_iteration_data(ds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fits = fits_of(ctx, name)
        models = models_of(ctx, name)
        drawn = {a: (m["pieces"] if m["kind"] == "piecewise" else
                     m["pieces"][0] if m["pieces"] else None) for a, m in models.items()}
        _html(page.heading(2, name, page.anchor(name)))
        note = analysis.timing_note(ds)
        if note:
            _md(f"> {note}")
        section("busbw")
        band = (10, 90) if per_iteration else None
        _md(("Solid: measured busbw " + (f"({ctx.stat} over iterations), shaded p10–p90 of the "
             "iterations. " if band else f"({ctx.stat} per iteration of the batch). "))
            + "Dashed: each algorithm's α-β model with α and β fitted to this sweep "
            "(weighted least squares on relative error, median time per size), drawn only "
            "where the fit holds (piecewise where the protocol changes; \"no fit\" otherwise)"
            + (f". Dotted: the lower bound at the `{preset.name}` preset's α and peak; dash-dot: "
               "the peak, with the right axis in % of it." if preset else "."))
        placements = [str(p) for p in ds["placement"].values]
        first = "out_of_place" if "out_of_place" in placements else placements[0]
        measured = _measured_algorithms(ds)
        show_figure(plots.busbw_vs_size(ds, stat=ctx.stat, placement=first, preset=preset,
                                        fits=drawn, band=band, algorithms=measured), plt)
        refused = analysis.not_available(ds)
        missing = [a for a in map(str, ds["algorithm"].values) if a not in measured]
        if missing:
            _md("Not in the plot (no size measured): " + "; ".join(
                f"`{a}`" + (f" — refused by the backend: {refused[a]}" if a in refused else "")
                for a in missing) + ".")
        for other in (p for p in placements if p != first):
            _html(page.details_png(_png(plots.busbw_vs_size(
                ds, stat=ctx.stat, placement=other, preset=preset, band=band,
                algorithms=measured), plt),
                f"{other.replace('_', '-')} (click to show)"))
        section("fit")
        _md("α: latency per message step; 1/β: link bandwidth; A: latency of the whole "
            "collective at the smallest size; busbw →: the asymptote; S½: size at half of it; "
            "in brackets, sizes the robust fit down-weighted as disturbed; rms resid.: of the "
            "relative residuals of the sizes kept; R² (log): of log time. A fit is drawn when "
            "rms ≤ 20 %, R² (log) ≥ 0.98 and at most a fifth of the sizes are down-weighted.")
        _html(fit_table_html(fits, preset, models))
        notes = fit_notes(fits, models)
        if notes:
            _md(notes)
        if "winner" in keys:
            section("winner")
            show_figure(plots.winner_per_size(ds, stat="median", placement=first), plt)
            ch = analysis.winner_changes(ds, "median", "max", first)
            lines = []
            if ch["crossovers"]:
                how = ch["winners"]["decided_by"].iloc[0]
                lines.append(f"Crossovers (decided by {how}, the winner clearly ahead on "
                             "both sides): " + "; ".join(
                    f"**{c['from']} → {c['to']}** at ≈ {approx_size(c['at'])} (between "
                    f"{format_size(c['size_lo'])} and {format_size(c['size_hi'])})"
                    for c in ch["crossovers"]) + ".")
            else:
                lines.append(f"No crossover where the winner is clearly ahead on both sides "
                             f"({ch['winners']['decided_by'].iloc[0]}).")
            if ch["noisy"]:
                lines.append(f"{ch['noisy']} more change{'s' if ch['noisy'] != 1 else ''} of the "
                             "best-by-median algorithm fall within the noise: not crossovers.")
            if ch["ties"]:
                lines.append(f"Ties (no algorithm clearly ahead) at {ch['ties']} of "
                             f"{len(ch['winners'])} sizes.")
            _md(" ".join(lines))
        if "phases" in keys:
            section("phases")
            _show_phases(*ctx.phases[name], first)
        if "latency" in keys:
            section("latency")
            floor = analysis.latency_floor(analysis.robust_time(ds, "median", "max", first))
            if floor:
                _md(f"Measured latency floor (the least median time of any algorithm at any "
                    f"size, 95 % bootstrap interval): {analysis.floor_text(floor)}: what a call "
                    "costs however little it moves; the grey line.")
            show_figure(plots.latency_percentiles(ds, placement=first,
                                                  floor=floor["us"] if floor else None), plt)
        section("ranks")
        alg, table = _straggler_summary(ds)
        show_figure(plots.rank_heatmap(ds, algorithm=alg, placement=first), plt)
        _md(table)
        if "trace" in keys:
            section("trace")
            _md("y: log when the times span more than 10×, else cut at 1.5 × p95 (the points "
                "above are counted in the corner).")
            show_figure(plots.iteration_trace(ds, placement=first), plt)
        if "baseline" in keys:
            section("baseline")
            base = ctx.baseline.get(ds.attrs.get("collective"))
            if base is None:
                _md(f"The baseline has no {ds.attrs.get('collective')} results.")
            else:
                show_figure(plots.compare_baseline(ds, base, stat=ctx.stat), plt)
        if "overhead" in keys:
            section("overhead")
            _show_time_ratios(ds, ctx.baseline.get(ds.attrs.get("collective")))


def _show_phases(ds, phases, placement):
    """The own kernels' phases timed alone (``NAME:launch``, ``NAME:barrier``),
    as the share of the whole kernel's time each takes."""
    rows = analysis.phase_breakdown(ds, phases, "median", "max", placement)
    _md("Each kernel was also timed doing one phase alone: `NAME:launch` (its launch "
        "and the call's bookkeeping), `NAME:barrier` (those and its barriers, no data). "
        "Barrier = `NAME:barrier` − `NAME:launch`, data (copies and sums) = `NAME` − "
        "`NAME:barrier`: medians over iterations of the slowest rank, in µs; a difference "
        f"of two measurements, so a small negative one is noise ({placement.replace('_', '-')}). "
        "Read it from a CUDA-graph run (`-G N`): with an event pair around each call, or a "
        "host loop of launches, the host paces every call and the differences drown in it.")

    def us(x):  # + 0.0: a difference that rounds to zero reads 0.0, not -0.0
        return "–" if not np.isfinite(x) else f"{round(x, 1) + 0.0:.1f}"

    def share(x, whole):
        return "" if not (np.isfinite(x) and np.isfinite(whole) and whole > 0) else \
            f" ({round(100 * x / whole) + 0:d} %)"
    _html(_table(["algorithm", "size", "whole", "launch", "barrier", "data"],
                 [[r["algorithm"], format_size(r["size"]), us(r["whole"])]
                  + [us(r[k]) + share(r[k], r["whole"]) for k in ("launch", "barrier", "data")]
                  for r in rows]))


def _show_time_ratios(ds, base):
    """Each algorithm against the first, and the run against the baseline:
    time ratios per size with their intervals (a framework's overhead)."""
    try:
        df = overhead.time_ratios(ds)
    except CCBenchError as e:  # a bus factor of 0 (all_reduce of one rank): no busbw
        _md(f"No time ratios: {e}.")
        return
    if base is not None:
        try:
            df = pd.concat([df, overhead.time_ratios(ds, base)], ignore_index=True)
        except CCBenchError as e:  # different collectives, no common size: say so
            _md(f"Against the baseline: not comparable ({e}).")
    if not len(df):
        _md("No size has a time on both sides.")
        return
    _md("Median time over iterations (of the max over ranks) of each side and their ratio, "
        "first / second: above 1 the first takes longer (at small sizes, the host's work per "
        "call: a framework's overhead); 95 % bootstrap interval of the ratio, and the verdict "
        "on busbw (`ccbench compare`'s).")
    _html(_table(["pair", "placement", "size", "time (µs)", "reference (µs)", "time ratio",
                  "95 % CI", "verdict"], overhead.table_rows(df)))


def _measured_algorithms(ds):
    """Algorithms with at least one finite time (a refused one has none)."""
    t = ds["latency"].notnull().any([d for d in ds["latency"].dims if d != "algorithm"])
    return [str(a) for a, ok in zip(ds["algorithm"].values, t.values) if ok]


def _straggler_summary(ds):
    """(algorithm to show in the heat map, Markdown about stragglers)."""
    metric = "start skew" if "start" in ds else "median latency"
    if ds.sizes.get("rank", 1) < 3:
        return str(ds["algorithm"].values[0]), (
            f"{ds.sizes.get('rank', 1)} ranks of data: a robust z-score needs 3 or more, so no "
            "rank is called a straggler.")
    found = {}
    for a in [str(x) for x in ds["algorithm"].values]:
        s = analysis.stragglers(ds, a)
        if len(s):
            found[a] = s
    if not found:
        return str(ds["algorithm"].values[0]), (
            f"No straggler: no rank's {metric} stands out (robust z-score > 3.5 at a quarter "
            "of the sizes or more) in any algorithm.")
    worst = max(found, key=lambda a: int(found[a]["flagged"].sum()))
    lines = [f"Stragglers by {metric} (robust z-score > 3.5 at ≥ ¼ of the sizes):"]
    for a, s in found.items():
        lines.append(f"- {a}: " + ", ".join(
            f"rank {r.rank}" + (f" on {r.host}" if r.host else "") + f" ({r.flagged} sizes, "
            f"median z {r.median_z:.1f})" for r in s.itertuples()))
    return worst, "\n".join(lines)


def show_collectives(ctx):
    for name in ctx.parts:
        show_collective(ctx, name)


def show_tables(ctx):
    """nccl-tests' table per collective, with every statistic asked for
    (the average alone where there is no per-iteration data: percentiles of
    copies of one average would only look like data)."""
    _html(heading(2, "Tables", "tables"))
    for name, ds in ctx.parts.items():
        stats = ctx.stats if analysis.per_iteration_data(ds) else ["avg"]
        _html(heading(3, name, f"tables-{slug(name)}"))
        _html('<pre class="ccb-table-text">' + markup.html_text(
            "\n".join(format_table(ds, stats=stats))) + "</pre>")


# kept for notebooks written against the first version
def show_plots(ctx):
    show_collectives(ctx)
