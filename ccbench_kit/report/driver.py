"""``ccbench report``: execute the shipped report.ipynb with papermill, then
write HTML with nbconvert (code hidden, plots inline as PNG, nothing fetched
from the network: the file opens offline)."""
import os
from pathlib import Path

from .._optional import require
from .._files import atomic_write_text
from ..errors import CCBenchError, ConfigError
from ..output_path import check_output
from .compare_page import prepare_compare_parameters
from .parameters import check_parameters

KERNEL = "ccbench"
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
    execute(notebook, output, params, timeout=timeout)
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


def execute(notebook, output, params, timeout=600):
    """papermill `notebook` with `params` into OUTPUT.ipynb; a failing cell
    becomes one CCBenchError line naming the cell and the error."""
    pm = require("papermill", "report")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    executed = output.with_suffix(".ipynb")
    try:
        pm.execute_notebook(str(notebook_path(notebook)), str(executed), parameters=params,
                            kernel_name=kernel_name(), cwd=str(output.parent.resolve()),
                            progress_bar=False, execution_timeout=timeout,
                            # the kernel's start-up warnings are not the report's business
                            extra_arguments=["--IPKernelApp.log_level=CRITICAL"])
    except pm.PapermillExecutionError as e:
        raise CCBenchError(f"report failed in cell {e.exec_count}: {e.ename}: {e.evalue} "
                           f"(executed notebook: {executed})") from None
    return executed


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
