"""``ccbench report``: execute notebooks/report.ipynb with papermill, then
write HTML with nbconvert (code hidden, plots inline as PNG)."""
import os
from pathlib import Path

from .._optional import require
from ..errors import CCBenchError, ConfigError

KERNEL = "ccbench"


def notebook_path(name="report.ipynb"):
    """The shipped notebook: the repo's notebooks/ (or one beside the package)."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent.parent / "notebooks" / name, here / "notebooks" / name):
        if cand.exists():
            return cand
    raise CCBenchError(f"notebook {name} not found next to the package")


def kernel_name():
    """Our registered kernel if present, else the running Python's."""
    from jupyter_client.kernelspec import KernelSpecManager
    specs = KernelSpecManager().find_kernel_specs()
    return KERNEL if KERNEL in specs else "python3"


def render(results, output, *, baseline=None, theory="", stats=("avg", "p50", "p99"),
           title="", notebook="report.ipynb", timeout=600):
    """Execute the report notebook for `results` and write `output` (.html).

    The executed notebook is kept beside the HTML (same name, .ipynb).
    Returns the HTML path.
    """
    results = [results] if isinstance(results, (str, os.PathLike)) else list(results)
    for r in results:
        if not os.path.exists(r):
            raise ConfigError(f"{r}: no such results file", "RESULTS")
    pm = require("papermill", "report")
    require("nbconvert", "report")
    output = Path(output)
    if output.suffix != ".html":
        raise ConfigError(f"{output}: the report is HTML; name it NAME.html", "-o/--output")
    output.parent.mkdir(parents=True, exist_ok=True)
    executed = output.with_suffix(".ipynb")
    params = dict(results=[str(Path(r).resolve()) for r in results],
                  baseline=str(Path(baseline).resolve()) if baseline else "",
                  theory=theory or "", stats=list(stats), title=title or "")
    try:
        pm.execute_notebook(str(notebook_path(notebook)), str(executed), parameters=params,
                            kernel_name=kernel_name(), cwd=str(output.parent.resolve()),
                            progress_bar=False, execution_timeout=timeout)
    except pm.PapermillExecutionError as e:
        raise CCBenchError(f"report failed in cell {e.exec_count}: {e.ename}: {e.evalue} "
                           f"(executed notebook: {executed})") from e
    write_html(executed, output)
    return str(output)


def write_html(executed, output):
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(executed), as_version=4)
    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb)
    tmp = Path(str(output) + ".tmp")
    tmp.write_text(body, encoding="utf-8")
    os.replace(tmp, output)
