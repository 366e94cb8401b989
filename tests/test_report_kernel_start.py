"""A report's kernel that dies at start (before its first reply, no cell
run: the lost-port race of jupyter_client's free ports) is started again;
one that never starts becomes one error line, not a traceback.

The kernels are real processes: a kernelspec named ``ccbench`` on a
temporary JUPYTER_PATH (searched before every other kernel directory, so
`driver.kernel_name` picks it) runs a script that exits with status 1 at
its first DIE starts, counted in a file, and then execs the real ipykernel.
"""
import json
import logging
import os
import sys

import nbformat
import pytest
from nbclient.exceptions import DeadKernelError

from ccbench_kit.dataset import save
from ccbench_kit.errors import CCBenchError
from ccbench_kit.report.driver import execute
from ccbench_kit.theory.synthetic import synthetic_dataset

KERNEL = '''\
import os
import sys

starts_file, die = sys.argv[1], int(sys.argv[2])
with open(starts_file, "a") as f:
    f.write("start\\n")
with open(starts_file) as f:
    starts = len(f.readlines())
if starts <= die:
    sys.exit(1)   # dead before any reply, as a kernel that lost a port
os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *sys.argv[3:]])
'''


def kernelspec(tmp_path, die):
    """A JUPYTER_PATH whose ``ccbench`` kernel dies at its first `die`
    starts; returns (that path, the file that counts the starts)."""
    jupyter = tmp_path / "jupyter"
    spec = jupyter / "kernels" / "ccbench"
    spec.mkdir(parents=True)
    script, starts = tmp_path / "kernel.py", tmp_path / "starts"
    script.write_text(KERNEL)
    argv = [sys.executable, str(script), str(starts), str(die), "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "ccbench (dies at start)", "language": "python"}))
    return jupyter, starts


def starts_of(starts):
    return len(starts.read_text().splitlines())


def tiny_notebook(path, code="print(answer * 7)"):
    """A parameter cell and one that runs `code` (prints from it)."""
    nb = nbformat.v4.new_notebook(metadata={
        "kernelspec": {"name": "ccbench", "language": "python", "display_name": "ccbench"},
        "language_info": {"name": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("answer = 0", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(code)]
    nbformat.write(nb, str(path))
    return path


def test_a_kernel_dead_at_start_is_started_again(tmp_path, monkeypatch, caplog):
    jupyter, starts = kernelspec(tmp_path, die=1)
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter))
    with caplog.at_level(logging.WARNING):
        executed = execute(tiny_notebook(tmp_path / "tiny.ipynb"), tmp_path / "out" / "tiny.html",
                           {"answer": 6})
    assert starts_of(starts) == 2   # the dead one, then the one that ran the cells
    nb = nbformat.read(str(executed), as_version=4)
    last = nb.cells[-1]
    assert last.source == "print(answer * 7)" and last.execution_count is not None
    assert [(o.output_type, o.name, o.text) for o in last.outputs] == [("stream", "stdout", "42\n")]
    # nbclient's "Error occurred while starting ..." record is the driver's to report
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("code,error,message", [
    ("answer / 0", CCBenchError, "report failed in cell 3: ZeroDivisionError: division by zero "
                                 "(executed notebook: {executed})"),
    ("import os; os._exit(1)", DeadKernelError, "Kernel died"),   # the kernel dies in a cell
])
def test_a_failure_in_a_cell_is_not_run_again(tmp_path, monkeypatch, code, error, message):
    jupyter, starts = kernelspec(tmp_path, die=0)
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter))
    with pytest.raises(error) as e:
        execute(tiny_notebook(tmp_path / "tiny.ipynb", code), tmp_path / "out" / "tiny.html",
                {"answer": 6})
    assert str(e.value) == message.format(executed=tmp_path / "out" / "tiny.ipynb")
    assert starts_of(starts) == 1


def test_a_kernel_that_never_starts_is_one_error_line(tmp_path, cli):
    # through `ccbench report` (a real subprocess: its stderr is what a user
    # sees); the line is the CCBenchError's, exit 2 is its exit status
    jupyter, starts = kernelspec(tmp_path, die=99)
    ds = synthetic_dataset("all_reduce", ["ring"], nranks=3, iters=2, sizes=[8, 64], seed=1)
    results = save(ds, tmp_path / "r.nc")
    r = cli("report", results, "-o", tmp_path / "out" / "r.html", timeout=120,
            env={**os.environ, "JUPYTER_PATH": str(jupyter)})
    assert r.returncode == 2
    assert r.stderr == (
        "ccbench: error: the Jupyter kernel 'ccbench' died before its first reply, 3 starts in "
        f"a row (no cell ran); its kernelspec: {jupyter / 'kernels' / 'ccbench'}\n")
    assert starts_of(starts) == 3 and not (tmp_path / "out" / "r.html").exists()
