"""The top of the report: the title, the verdict, the contents, what was
run, and the summary table (one line per collective)."""
import warnings

import numpy as np

from ..dataset.schema import attr_json, library_name
from ..units import format_size
from . import analysis, page
from .cells import _html, _md, _table
from .fits import models_of
from .page import heading, shown_path
from .parameters import NO_THEORY


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
    return page.sections_of(base, analysis.per_iteration_data(ds), ds.sizes["algorithm"],
                            name in ctx.phases)


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


def summary_rows(ctx):
    """The summary table's rows (text): one per collective, robust numbers."""
    rows = []
    for name, ds in ctx.parts.items():
        ds = analysis.sized(ds)
        place = "out_of_place" if "out_of_place" in ds["placement"].values \
            else str(ds["placement"].values[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            times = analysis.robust_time(ds, "median", "max", place)
            r, floor = analysis.busbw_of(ds, times), analysis.latency_floor(times)
        bw = np.where(np.isfinite(r["busbw"]), r["busbw"], -np.inf)
        a, j = np.unravel_index(int(np.argmax(bw)), bw.shape)
        best = float(bw[a, j])
        ci = (f"{r['lo'][a, j]:.3g}–{r['hi'][a, j]:.3g}" if np.isfinite(r["lo"][a, j]) else "n/a")
        p = ctx.presets.get(name)
        rows.append([name, ds.ccb.nranks, str(ds.attrs.get("timing", "")),
                     f"{best:.3g}", ci,
                     f"{r['algorithms'][a]}, {format_size(int(r['sizes'][j]))}",
                     (f"{100 * best / p.peak_gbps:.0f} % of {p.name}" if p is not None and p.has_peak
                      else "peak not recorded" if p is not None else "—"),
                     analysis.floor_text(floor) if floor else "—"])
    return rows


def show_summary(ctx):
    """One line per collective: the best busbw (median), its interval, where."""
    head = ["collective", "ranks", "timing", "best busbw (GB/s)", "95 % CI", "where",
            "efficiency", "latency floor (median, 95 % CI; where)"]
    _html(heading(2, "Summary", "summary"))
    _html(_table(head, summary_rows(ctx)))
