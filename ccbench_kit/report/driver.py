"""``ccbench report``: execute the shipped report.ipynb with papermill, then
write HTML with nbconvert (code hidden, plots inline as PNG, nothing fetched
from the network: the file opens offline)."""
import logging
import os
from contextlib import contextmanager
from pathlib import Path

from .._optional import require
from .._files import atomic_write_text
from ..dataset.memory import needs_dask
from ..errors import CCBenchError, ConfigError
from ..output_path import check_output
from .compare_page import prepare_compare_parameters
from .parameters import check_parameters

KERNEL = "ccbench"
# Starts of a kernel that dies before its first reply, before giving up: its
# five TCP ports are picked free by jupyter_client and bound by the kernel a
# moment later, so a process started in between can take one (the kernel dies
# with "Address already in use"); a fresh start picks fresh ports.
KERNEL_STARTS = 3
# jupyter_client's words for a kernel process that exited before any reply
# (nbclient raises them as a RuntimeError while starting, before any cell)
_DIED_AT_START = "Kernel died before replying to kernel_info"
TEMPLATES = Path(__file__).resolve().parent / "templates"
# package data, written by notebooks/build.py (the same files as the
# checkout's notebooks/), so an installed kit needs no checkout
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def notebook_path(name="report.ipynb"):
    """The shipped notebook `name` (package data: ``ccbench_kit/notebooks/``)."""
    path = NOTEBOOKS / name
    if not path.exists():
        raise CCBenchError(f"notebook {name} not found in {NOTEBOOKS}: the package was "
                           "installed without its data (reinstall it)")
    return path


def kernel_name():
    """Our registered kernel if present, else the running Python's."""
    # lazy: optional dependency (report extra)
    from jupyter_client.kernelspec import KernelSpecManager
    specs = KernelSpecManager().find_kernel_specs()
    return KERNEL if KERNEL in specs else "python3"


def render(results, output, *, baseline=None, theory="auto", stats=("avg", "p50", "p99"),
           title="", notebook="report.ipynb", timeout=600):
    """Execute the report notebook for `results` and write `output` (.html).

    The parameters are checked before papermill starts (the notebook checks
    them again in its first cell), so a wrong one costs no kernel start.
    The executed notebook is kept beside the HTML (same name, .ipynb).
    Returns the HTML path.
    """
    results = [results] if isinstance(results, (str, os.PathLike)) else list(results)
    output = Path(output)
    _check_outputs(output)
    if output.suffix != ".html":
        raise ConfigError(f"{output}: the report is HTML; name it NAME.html", "-o/--output")
    p = check_parameters(results, baseline or "", theory, stats, title)
    params = dict(results=[str(Path(r).resolve()) for r in p.results],
                  baseline=str(Path(p.baseline).resolve()) if p.baseline else "",
                  theory=p.theory, stats=list(p.stats), title=p.title)
    execute(notebook, output, params, timeout=timeout,
            dask=needs_dask([*p.results, p.baseline]))
    write_html(output.with_suffix(".ipynb"), output, title=p.title or "ccbench report")
    return str(output)


def render_compare(results, output, *, baseline=None, stats=("avg",), title="", timeout=600):
    """compare.ipynb for several results files (and an optional baseline)."""
    output = Path(output)
    _check_outputs(output)
    if output.suffix != ".html":
        raise ConfigError(f"{output}: the report is HTML; name it NAME.html", "-o/--output")
    p = prepare_compare_parameters(results, baseline or "", stats, title)
    params = dict(results=[str(Path(r).resolve()) for r in p.results],
                  baseline=str(Path(p.baseline).resolve()) if p.baseline else "",
                  stats=list(p.stats), title=p.title)
    execute("compare.ipynb", output, params, timeout=timeout)
    write_html(output.with_suffix(".ipynb"), output, title=p.title or "ccbench comparison")
    return str(output)


def _check_outputs(output):
    """The HTML and the executed notebook beside it can be written."""
    check_output(output, "-o/--output")
    check_output(output.with_suffix(".ipynb"), "-o/--output")


# what the kernel runs before the first cell when the notebook holds no dask
# array: xarray would import dask.array wherever dask is installed (1.4 s of
# CPU a kernel); our own code, never a parameter's
_WITHOUT_DASK = ("from ccbench_kit._optional import DASK, without; without(DASK); "
                 "del DASK, without")


def execute(notebook, output, params, timeout=600, dask=False):
    """papermill `notebook` with `params` into OUTPUT.ipynb.

    The kernel starts without dask (`_optional.without`) unless `dask`: a
    report of a run too large for memory (`dataset.memory.needs_dask`).

    `notebook` is a shipped notebook's name (or a path).  A failing cell
    becomes one CCBenchError line naming the cell and the error (never run
    again: the failure is the notebook's own).  A kernel that dies before its
    first reply, when no cell has run, is started again, `KERNEL_STARTS`
    times in all, then one CCBenchError line names it.
    """
    pm = require("papermill", "report")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    executed = output.with_suffix(".ipynb")
    kernel = kernel_name()
    for _ in range(KERNEL_STARTS):
        try:
            with _start_failures_unlogged():
                pm.execute_notebook(str(notebook_path(notebook)), str(executed), parameters=params,
                                    kernel_name=kernel, cwd=str(output.parent.resolve()),
                                    progress_bar=False, execution_timeout=timeout,
                                    # the kernel's start-up warnings are not the report's business
                                    extra_arguments=["--IPKernelApp.log_level=CRITICAL",
                                                     *([] if dask else [
                                                         f"--IPKernelApp.exec_lines={_WITHOUT_DASK}"
                                                     ])])
            return executed
        except pm.PapermillExecutionError as e:
            raise CCBenchError(f"report failed in cell {e.exec_count}: {e.ename}: {e.evalue} "
                               f"(executed notebook: {executed})") from None
        except RuntimeError as e:
            # only the death at start, when nothing of the notebook ran, is safe
            # to run again; DeadKernelError (a kernel dying in a cell) is not it
            if str(e) != _DIED_AT_START:
                raise
    raise CCBenchError(f"the Jupyter kernel '{kernel}' died before its first reply, "
                       f"{KERNEL_STARTS} starts in a row (no cell ran); "
                       f"its kernelspec: {_kernelspec_dir(kernel)}")


@contextmanager
def _start_failures_unlogged():
    """Drop nbclient's ERROR record of a kernel that died at start (logged
    on papermill's logger just before it raises): `execute` reports that
    itself, by a fresh start or one error line, and a stray line on stderr
    would say "Error" for a report that then succeeds."""
    log = logging.getLogger("papermill")
    drop = _DropDiedAtStart()
    log.addFilter(drop)
    try:
        yield
    finally:
        log.removeFilter(drop)


class _DropDiedAtStart(logging.Filter):
    def filter(self, record):
        return not record.getMessage().endswith(_DIED_AT_START)


def _kernelspec_dir(name):
    """Where kernel `name`'s kernel.json lives (for an error message)."""
    # lazy: optional dependency (report extra)
    from jupyter_client.kernelspec import KernelSpecManager
    return KernelSpecManager().find_kernel_specs().get(name, "not found")


def write_html(executed, output, title=""):
    """nbconvert `executed` to one self-contained HTML file, code hidden."""
    require("nbconvert", "report")
    import nbformat  # lazy: optional dependency (report extra)
    from nbconvert import HTMLExporter  # lazy: optional dependency (report extra)
    # lazy: optional dependency (report extra)
    from nbconvert.preprocessors import TagRemovePreprocessor
    from traitlets.config import Config  # lazy: optional dependency (report extra)

    nb = nbformat.read(str(executed), as_version=4)
    if title:
        nb.metadata["title"] = title
    cfg = Config()
    cfg.TagRemovePreprocessor.remove_cell_tags = {"remove-cell", "parameters", "injected-parameters"}
    cfg.TagRemovePreprocessor.enabled = True
    exporter = HTMLExporter(config=cfg, template_name="ccbench",
                            extra_template_basedirs=[str(TEMPLATES)], exclude_input=True,
                            exclude_input_prompt=True, exclude_output_prompt=True)
    exporter.register_preprocessor(TagRemovePreprocessor(config=cfg), enabled=True)
    body, _ = exporter.from_notebook_node(nb)
    return atomic_write_text(output, body)
