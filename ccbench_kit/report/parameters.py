"""The report's parameters, checked before anything is read or run, and
the data they name (`prepare`: the `ReportContext` every section reads).

`check_parameters` runs first (in the notebook's first cell after the
parameters, and in ``ccbench report`` before papermill starts), so a wrong
parameter fails there with one clear line, never deep in a plot.
"""
import os
from dataclasses import dataclass, field

from ..backends import default_preset, phases_of
from ..dataset import SchemaError, open_parts
from ..dataset.io import analysis_ready
from ..dataset.stats import check_stat
from ..errors import CCBenchError, ConfigError
from ..importers import is_netcdf, open_any
from ..theory import presets

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
    # part name -> (its Dataset with the algorithms that time a phase alone,
    # {such algorithm: (whole, phase)}); `parts` holds the whole ones only
    phases: dict = field(default_factory=dict)

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
    parts, phases = {}, {}
    for r in p.results:
        for name, ds in _open(r).items():
            label = f"{os.path.basename(r)}:{name}" if len(p.results) > 1 else name
            parts[label] = analysis_ready(ds)
            alone = phases_of(ds)
            if alone:  # not the collective's output: never a winner, never a fit
                phases[label] = (parts[label], alone)
                parts[label] = parts[label].drop_sel(algorithm=list(alone))
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
                         p.baseline, phases=phases)
