"""What the report notebooks' cells call: parameter checks, text, tables, plots.

Kept here, not in the notebooks, so it is tested like the rest of the code
and the notebooks stay thin, readable pages.  `check_parameters` runs first
(in the notebook's first cell after the parameters, and in ``ccbench
report`` before papermill starts), so a wrong parameter fails there with
one clear line, never deep in a plot.
"""
import html
import io
import os
import warnings

import numpy as np
from dataclasses import dataclass, field

from .. import markup
from ..dataset.schema import attr_json, library_name
from ..dataset.stats import check_stat
from ..errors import ConfigError, CCBenchError
from ..backends import default_preset
from ..compare.core import require_common
from ..dataset import SchemaError, open_parts
from ..dataset.io import analysis_ready
from ..formats.nccl_tests.write_table import format_table
from ..importers import is_netcdf, open_any
from ..theory import fit, presets
from ..units import format_size
from . import analysis, page, plots
from .page import heading, shown_path, slug
from .style import approx_size

NO_THEORY = ("", "none", "off", "no")


@dataclass
class ReportContext:
    parts: dict                      # "collective" (or "file:collective") -> Dataset
    stats: list
    title: str
    theory: str = ""                 # the preset name as asked ("auto", "", a name)
    presets: dict = field(default_factory=dict)   # part name -> Preset or None
    baseline: dict = field(default_factory=dict)  # collective -> Dataset
    baseline_path: str = ""
    fits: dict = field(default_factory=dict)      # part name -> FitResult (filled lazily)
    models: dict = field(default_factory=dict)    # part name -> analysis.fit_models (lazily)

    @property
    def stat(self):
        return self.stats[0]


@dataclass(frozen=True)
class Parameters:
    results: list
    baseline: str
    theory: str
    stats: list
    title: str


def check_parameters(results, baseline="", theory="auto", stats=("avg",), title=""):
    """Validate the report's parameters without reading the data.

    Raises
    ------
    ConfigError
        Naming the parameter: a missing results or baseline file, an unknown
        theory preset, a malformed ``stats`` entry, a title that is not text.
    """
    if isinstance(results, (str, os.PathLike)):
        results = [results]
    if not isinstance(results, (list, tuple)) or not results:
        raise ConfigError("no results files given; pass results=['RESULTS.nc', ...]", "results")
    for r in results:
        if not isinstance(r, (str, os.PathLike)):
            raise ConfigError(f"{r!r} is not a file name", "results")
        if not os.path.isfile(r):
            raise ConfigError(f"{r}: no such results file", "results")
        _check_schema_version(r, "results")
    if baseline is None:
        baseline = ""
    if not isinstance(baseline, (str, os.PathLike)):
        raise ConfigError(f"{baseline!r} is not a file name", "baseline")
    if baseline and not os.path.isfile(baseline):
        raise ConfigError(f"{baseline}: no such baseline file", "baseline")
    if baseline:
        _check_schema_version(baseline, "baseline")
    if isinstance(stats, str):
        stats = [s for s in stats.replace(",", " ").split()]
    if not isinstance(stats, (list, tuple)) or not stats:
        raise ConfigError("give at least one statistic, e.g. stats=['avg', 'p50', 'p99']", "stats")
    for s in stats:
        if not isinstance(s, str):
            raise ConfigError(f"entry {s!r} is not a statistic name; use avg, min, max, std, "
                              "median or a percentile such as p50, p99", "stats")
    stats = [check_stat(s, "stats") for s in stats]
    theory = "" if theory is None else str(theory).strip()
    if theory.lower() not in NO_THEORY + ("auto",):
        presets.lookup(theory, flag="theory")
    if not isinstance(title, str):
        raise ConfigError(f"{title!r} is not text", "title")
    return Parameters([os.fspath(r) for r in results], os.fspath(baseline), theory, stats, title)


def _check_schema_version(path, flag):
    """A results file of a newer or foreign schema stops the report before
    papermill starts (reading only the file's attrs)."""
    if not is_netcdf(path):
        return
    try:
        for ds in open_parts(path).values():
            ds.close()
    except SchemaError as e:
        raise ConfigError(str(e), flag) from None


class one_line_errors:
    """``with rn.one_line_errors(): ...``: a kit error raised inside shows
    as one line (``ConfigError: theory: unknown preset ...``), not a
    traceback through the kit; other errors keep their full traceback."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None and isinstance(exc, CCBenchError):
            try:
                from IPython import get_ipython  # lazy: optional dependency (report extra)
                shell = get_ipython()
                if shell is not None:
                    shell.InteractiveTB.set_mode(mode="Minimal")
            except ImportError:
                pass
        return False


def _open(path):
    """{name: Dataset} of a results file or any baseline the importers read."""
    return open_any(path)


def prepare(results, baseline="", theory="auto", stats=("avg",), title=""):
    """Check the parameters, then load the data: a `ReportContext`.

    Large runs stay on disk as dask arrays (`dataset.io.analysis_ready`).
    """
    p = check_parameters(results, baseline, theory, stats, title)
    parts = {}
    for r in p.results:
        for name, ds in _open(r).items():
            parts[f"{os.path.basename(r)}:{name}" if len(p.results) > 1 else name] = \
                analysis_ready(ds)
    base = {}
    if p.baseline:
        base = {ds.attrs.get("collective", name): analysis_ready(ds)
                for name, ds in _open(p.baseline).items()}
    chosen, measured = {}, {}
    for name, ds in parts.items():
        preset_name = default_preset(ds) if p.theory.lower() == "auto" else \
            (None if p.theory.lower() in NO_THEORY else p.theory)
        if not preset_name:
            chosen[name] = None
            continue
        # one measurement per preset and recorded rate, so parts agree
        key = (preset_name, ds.attrs.get("memcpy_gbps"))
        if key not in measured:
            measured[key] = presets.get(preset_name, ds=ds)
        chosen[name] = measured[key]
    return ReportContext(parts, p.stats, p.title or "ccbench report", p.theory, chosen, base,
                         p.baseline)


# -- text ----------------------------------------------------------------------

def _md(text):
    """Display the kit's Markdown; every value in it is shown as text
    (`markup.markdown`), whatever a results file or a flag holds."""
    from IPython.display import Markdown, display  # lazy: optional dependency (report extra)
    display(Markdown(markup.markdown(text)))


def _html(text):
    from IPython.display import HTML, display  # lazy: optional dependency (report extra)
    display(HTML(text))


def show_header(ctx):
    """The title, the verdict, the contents, what was run and the
    statistics every number uses."""
    _md(f"# {ctx.title}")
    show_verdict(ctx)
    _html(page.toc([(name, _sections(ctx, name)) for name in ctx.parts]))
    lines = []
    for name, ds in ctx.parts.items():
        a = ds.ccb.attrs
        lines.append(f"- **{name}**: {a.get('nranks')} ranks on {_hosts(ds)}, {a.get('dtype')}"
                     + (f", op {a.get('op')}" if a.get("op") else "")
                     + f", backend {a.get('backend')} ({library_name(ds.attrs)}), timing "
                     f"{a.get('timing')}, {a.get('warmup')} warm-up + {a.get('iters')} measured "
                     f"iterations, algorithms {', '.join(str(x) for x in ds['algorithm'].values)}"
                     + (f", check {a.get('check')}" if a.get("check") else "")
                     + (f", created {a.get('created')}" if a.get("created") else "")
                     + _cores(a)
                     + ("" if a.get("complete", True) is not False else " — **incomplete run**"))
    lines += ["", f"Plots and tables: time = **{ctx.stat}** over iterations of the **max over "
              "ranks** of each iteration (the collective is done when its slowest rank is). "
              "The verdict, winners and crossovers use the **median** over iterations (one slow "
              "iteration does not move it) with 95 % bootstrap intervals (seeded: every render "
              "gives the same numbers). GB = 10⁹ B. busbw = algbw × the collective's bus factor "
              "(nccl-tests)."]
    theory = {str(p.name) if p else "none" for p in ctx.presets.values()}
    if ctx.presets and any(ctx.presets.values()):
        lines.append("")
        uses = {}
        for name, p in ctx.presets.items():
            if p:
                uses.setdefault(id(p), (p, []))[1].append(name)
        for p, names in uses.values():
            which = "" if len(names) == len(ctx.parts) else f" for {', '.join(names)}"
            if not p.has_peak:
                lines.append(f"- Theory preset{which}: `{p.name}`: {p.measured}, so no peak "
                             "and no efficiency (the report never measures this machine).")
                continue
            extra = f"; {p.measured}" if p.measured else ""
            lines.append(f"- Theory preset{which}: `{p.name}`, peak **{p.peak_gbps:.4g} GB/s** "
                         f"({p.scope}{extra}), α {p.alpha_us:g} µs. Source: {p.source}.")
    elif ctx.theory.lower() not in NO_THEORY:
        lines.append(f"\nNo theory preset matches this hardware ({', '.join(theory)}); pass "
                     "`--theory NAME` for a peak line.")
    if ctx.baseline_path:
        lines.append(f"\nBaseline: `{shown_path(ctx.baseline_path)}`.")
    _html(heading(2, "The run", "run"))
    _md("\n".join(lines))


def _cores(a):
    cpus, per = a.get("cpus_available"), a.get("ranks_per_host")
    if not isinstance(cpus, dict) or not isinstance(per, dict):
        return ""
    over = " — **oversubscribed**" if a.get("oversubscribed") is True else ""
    return ", " + "; ".join(f"{per[h]} ranks on {cpus.get(h, '?')} CPUs" for h in per) + over


def _sections(ctx, name):
    ds = ctx.parts[name]
    base = bool(ctx.baseline_path)
    return page.sections_of(base, analysis.per_iteration_data(ds), ds.sizes["algorithm"])


def models_of(ctx, name):
    """`analysis.fit_models` of one part (computed once per report)."""
    if name not in ctx.models:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ctx.models[name] = analysis.fit_models(analysis.sized(ctx.parts[name]),
                                                   fits_of(ctx, name))
    return ctx.models[name]


def verdicts(ctx):
    """[(part, findings, cautions)] and the alerts for the top of the page."""
    out, alerts = [], []
    for name, ds in ctx.parts.items():
        base = ctx.baseline.get(ds.attrs.get("collective"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            findings, cautions = analysis.verdict(ds, ctx.presets.get(name), models_of(ctx, name),
                                                  base)
        out.append((name, findings, cautions))
        if ds.ccb.attrs.get("oversubscribed") is True:
            alerts.append(f"**{name}** ran oversubscribed (more ranks than CPUs on a host): "
                          "its times are noise from sharing cores.")
    return out, alerts


def show_verdict(ctx):
    found, alerts = verdicts(ctx)
    _html(page.verdict_block(found, alerts))


def _hosts(ds):
    hosts = attr_json(ds, "hosts", [])
    if isinstance(hosts, (list, tuple)) and hosts:
        uniq = list(dict.fromkeys(str(h) for h in hosts))
        return ", ".join(uniq[:4]) + (f" (+{len(uniq) - 4})" if len(uniq) > 4 else "")
    return str(hosts or "?")


def fits_of(ctx, name):
    """The α-β fit of one part (computed once per report)."""
    if name not in ctx.fits:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ctx.fits[name] = fit(ctx.parts[name], stat="median")
    return ctx.fits[name]


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


def _table(head, rows, cls="ccb-table"):
    out = [f'<div class="ccb-scroll"><table class="{cls}"><thead><tr>']
    out += [f"<th>{html.escape(str(h))}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def summary_rows(ctx):
    """The summary table's rows (text): one per collective, robust numbers."""
    rows = []
    for name, ds in ctx.parts.items():
        ds = analysis.sized(ds)
        place = "out_of_place" if "out_of_place" in ds["placement"].values \
            else str(ds["placement"].values[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            r = analysis.robust_busbw(ds, "median", "max", place)
            t0 = ds.ccb.time("median").sel(placement=place).isel(size=0)
        bw = np.where(np.isfinite(r["busbw"]), r["busbw"], -np.inf)
        a, j = np.unravel_index(int(np.argmax(bw)), bw.shape)
        best = float(bw[a, j])
        ci = (f"{r['lo'][a, j]:.3g}–{r['hi'][a, j]:.3g}" if np.isfinite(r["lo"][a, j]) else "n/a")
        fastest = str(t0["algorithm"].values[int(t0.argmin("algorithm"))])
        p = ctx.presets.get(name)
        rows.append([name, ds.ccb.nranks, str(ds.attrs.get("timing", "")),
                     f"{best:.3g}", ci,
                     f"{r['algorithms'][a]}, {format_size(int(r['sizes'][j]))}",
                     (f"{100 * best / p.peak_gbps:.0f} % of {p.name}" if p is not None and p.has_peak
                      else "peak not recorded" if p is not None else "—"),
                     f"{float(t0.min()):.3g} µs ({fastest}, {format_size(int(ds['size'].values[0]))})"])
    return rows


def show_summary(ctx):
    """One line per collective: the best busbw (median), its interval, where."""
    head = ["collective", "ranks", "timing", "best busbw (GB/s)", "95 % CI", "where",
            "efficiency", "smallest size: latency (median)"]
    _html(heading(2, "Summary", "summary"))
    _html(_table(head, summary_rows(ctx)))


# -- one collective ------------------------------------------------------------

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
        _show(plots.busbw_vs_size(ds, stat=ctx.stat, placement=first, preset=preset,
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
            _show(plots.winner_per_size(ds, stat="median", placement=first), plt)
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
        if "latency" in keys:
            section("latency")
            _show(plots.latency_percentiles(ds, placement=first), plt)
        section("ranks")
        alg, table = _straggler_summary(ds)
        _show(plots.rank_heatmap(ds, algorithm=alg, placement=first), plt)
        _md(table)
        if "trace" in keys:
            section("trace")
            _md("y: log when the times span more than 10×, else cut at 1.5 × p95 (the points "
                "above are counted in the corner).")
            _show(plots.iteration_trace(ds, placement=first), plt)
        if "baseline" in keys:
            section("baseline")
            base = ctx.baseline.get(ds.attrs.get("collective"))
            if base is None:
                _md(f"The baseline has no {ds.attrs.get('collective')} results.")
            else:
                _show(plots.compare_baseline(ds, base, stat=ctx.stat), plt)


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


def _png(fig, plt):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _show(fig, plt):
    """Display `fig` as a PNG whatever matplotlib's backend (MPLBACKEND=Agg
    in a cron job would otherwise print "<Figure ...>")."""
    from IPython.display import Image, display  # lazy: optional dependency (report extra)
    display(Image(data=_png(fig, plt), format="png"))


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



# -- compare.ipynb -------------------------------------------------------------

@dataclass
class CompareContext:
    runs: dict          # label -> {collective: Dataset}
    reference: str      # the label the others are divided by
    stats: list
    title: str


def _labels(paths):
    names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    return [n if names.count(n) == 1 else f"{n} ({i + 1})" for i, n in enumerate(names)]


def prepare_compare_parameters(results, baseline="", stats=("avg",), title=""):
    """`check_parameters` for compare.ipynb: two runs or more, or one and a baseline."""
    p = check_parameters(results, baseline, "", stats, title)
    if len(p.results) < 2 and not p.baseline:
        raise ConfigError("give two or more results files, or one and a baseline", "results")
    # as `ccbench compare`: each run must share a collective with the reference
    paths = ([p.baseline] if p.baseline else []) + list(p.results)
    reference = _open(paths[0])
    for path in paths[1:]:
        require_common(_open(path), reference)
    return p


def prepare_compare(results, baseline="", stats=("avg",), title=""):
    """Check the parameters of compare.ipynb, then load every run.

    Raises
    ------
    ConfigError
        Naming the parameter (fewer than two runs to compare, a missing
        file, a malformed statistic).
    """
    p = prepare_compare_parameters(results, baseline, stats, title)
    paths = ([p.baseline] if p.baseline else []) + p.results
    labels = _labels(paths)
    if p.baseline:
        labels[0] = f"baseline: {labels[0]}"
    runs = {}
    for label, path in zip(labels, paths):
        runs[label] = {ds.attrs.get("collective", name): ds.load() for name, ds in _open(path).items()}
    return CompareContext(runs, labels[0], p.stats, p.title or "ccbench comparison")


def show_compare(ctx):
    """For every collective in two runs or more: busbw of all runs, then each
    run's ratio to the reference with a table of the typical ratios."""
    import matplotlib.pyplot as plt  # lazy: optional dependency (report extra)

    lines = [f"# {ctx.title}", ""]
    for label, parts in ctx.runs.items():
        ds = next(iter(parts.values()))
        lines.append(f"- **{label}**{' (reference)' if label == ctx.reference else ''}: "
                     f"{', '.join(parts)}; {ds.attrs.get('nranks')} ranks, backend "
                     f"{ds.attrs.get('backend')} ({library_name(ds.attrs)}), "
                     f"{ds.attrs.get('created') or os.path.basename(str(ds.attrs.get('source') or ''))}")
    lines += ["", f"Ratios are busbw / the reference's busbw ({ctx.stats[0]} over iterations "
              "of the max over ranks), at the sizes both have; > 1 is faster."]
    _md("\n".join(lines))
    collectives = list(dict.fromkeys(c for parts in ctx.runs.values() for c in parts))
    for coll in collectives:
        have = {label: parts[coll] for label, parts in ctx.runs.items() if coll in parts}
        if len(have) < 2:
            continue
        _md(f"## {coll}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            _show(plots.busbw_runs(have, stat=ctx.stats[0]), plt)
            ref = have.get(ctx.reference) or next(iter(have.values()))
            rows = []
            for label, ds in have.items():
                if ds is ref:
                    continue
                _show(plots.compare_baseline(ds, ref, stat=ctx.stats[0]), plt)
                for alg, d in analysis.compare(ds, ref, ctx.stats[0]).items():
                    r = d["ratio"][np.isfinite(d["ratio"])]
                    if not r.size:
                        continue
                    rows.append([label, alg, d["against"], f"{np.exp(np.mean(np.log(r))):.3f}",
                                 f"{r.min():.3f}", f"{r.max():.3f}",
                                 f"{r[-1]:.3f} at {format_size(int(d['size'][np.isfinite(d['ratio'])][-1]))}"])
            if rows:
                _html(_table(["run", "algorithm", "against", "geometric mean ratio", "min", "max",
                              "at the largest size"], rows))
