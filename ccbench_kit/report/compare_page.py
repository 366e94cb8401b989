"""compare.ipynb's cells: two runs or more (or one and a baseline), their
busbw side by side and each run's ratio to the reference."""
import os
import warnings
from dataclasses import dataclass

import numpy as np

from ..compare.core import require_common
from ..dataset.schema import library_name
from ..errors import ConfigError
from ..units import format_size
from . import analysis, plots
from .cells import _html, _md, show_figure, _table
from .parameters import _open, check_parameters


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
            show_figure(plots.busbw_runs(have, stat=ctx.stats[0]), plt)
            ref = have.get(ctx.reference) or next(iter(have.values()))
            rows = []
            for label, ds in have.items():
                if ds is ref:
                    continue
                show_figure(plots.compare_baseline(ds, ref, stat=ctx.stats[0]), plt)
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
