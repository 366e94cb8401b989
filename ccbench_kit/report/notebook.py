"""What the report notebook's cells call: parameter checks, tables, plots.

Kept here, not in the notebook, so it is tested like the rest of the code
and the notebook stays a thin, readable page.
"""
import os
from dataclasses import dataclass, field

from ..dataset import open_parts
from ..dataset.stats import check_stat
from ..errors import ConfigError


@dataclass
class ReportContext:
    parts: dict                      # "file:collective" -> Dataset
    stats: list
    title: str
    theory: str = ""
    peak: float = None
    baseline: dict = field(default_factory=dict)


def prepare(results, baseline="", theory="", stats=("avg",), title=""):
    """Validate the parameters and load the data; raise ConfigError naming the
    parameter that is wrong."""
    if isinstance(results, str):
        results = [results]
    if not results:
        raise ConfigError("no results files given", "results")
    for r in results:
        if not os.path.exists(r):
            raise ConfigError(f"{r}: no such results file", "results")
    if isinstance(stats, str):
        stats = [stats]
    stats = [check_stat(s, "stats") for s in stats]
    parts = {}
    for r in results:
        for name, ds in open_parts(r).items():
            parts[f"{os.path.basename(r)}:{name}" if len(results) > 1 else name] = ds.load()
    base = {}
    if baseline:
        if not os.path.exists(baseline):
            raise ConfigError(f"{baseline}: no such baseline file", "baseline")
        base = {name: ds.load() for name, ds in open_parts(baseline).items()}
    peak = None
    if theory:
        peak = _preset_peak(theory)
    return ReportContext(parts, stats, title or "ccbench report", theory, peak, base)


def _preset_peak(name):
    try:
        from ..theory import presets
    except ImportError as e:
        raise ConfigError(f"unknown theory preset {name!r}: no presets installed", "theory") from e
    return presets.get(name).peak_gbps


def show_header(ctx):
    from IPython.display import Markdown, display
    lines = [f"## {ctx.title}", ""]
    for name, ds in ctx.parts.items():
        a = ds.attrs
        lines.append(f"- **{name}**: {a.get('nranks')} ranks on {a.get('hosts')}, {a.get('dtype')}, "
                     f"op {a.get('op')}, backend {a.get('backend')} ({a.get('library')}), timing "
                     f"{a.get('timing')}, {a.get('warmup')} warm-up + {a.get('iters')} iterations, "
                     f"check {a.get('check')}, created {a.get('created')}"
                     + ("" if a.get("complete", "true") == "true" else " — **incomplete**"))
    lines.append("")
    lines.append("Time = statistic over iterations of the max over ranks of each iteration; "
                 "GB = 1e9 B; busbw = algbw × the collective's bus factor (nccl-tests).")
    display(Markdown("\n".join(lines)))


def show_tables(ctx):
    from IPython.display import Markdown, display

    from ..table import format_table
    for name, ds in ctx.parts.items():
        display(Markdown(f"### {name}\n```\n" + "\n".join(format_table(ds, stats=ctx.stats)) + "\n```"))


def show_plots(ctx):
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    from . import plots
    for name, ds in ctx.parts.items():
        display(Markdown(f"### {name}"))
        for fig in (plots.busbw_vs_size(ds, stat=ctx.stats[0], peak=ctx.peak),
                    plots.latency_percentiles(ds),
                    plots.rank_heatmap(ds)):
            display(fig)
            plt.close(fig)
