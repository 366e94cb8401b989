"""The report notebooks: parameter checks that fail first and in one line,
the tidy shipped notebooks, the compare notebook run by papermill."""
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from ccbench_kit.cli import main
from ccbench_kit.dataset import save
from ccbench_kit.errors import ConfigError
from ccbench_kit.report import notebook as rn
from ccbench_kit.report.driver import execute, kernel_name
from ccbench_kit.theory.synthetic import synthetic_dataset

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("results")
    a = synthetic_dataset("all_reduce", ["ring", "recursive_doubling"], nranks=3, iters=6,
                          sizes=[8 << i for i in range(0, 21, 2)], seed=1)
    b = synthetic_dataset("all_gather", ["ring", "bruck"], nranks=3, iters=6,
                          sizes=[24 << i for i in range(0, 21, 2)], seed=2)
    one = save({"all_reduce": a, "all_gather": b}, d / "one.nc")
    a2 = synthetic_dataset("all_reduce", ["ring"], nranks=3, iters=6, beta=2e-10,
                           sizes=[8 << i for i in range(0, 21, 2)], seed=3)
    two = save(a2, d / "two.nc")
    return str(one), str(two)


def test_shipped_notebooks_are_tidy_and_current():
    proc = subprocess.run([sys.executable, str(ROOT / "notebooks" / "build.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name in ("report", "compare", "explore"):
        path = ROOT / "notebooks" / f"{name}.ipynb"
        nb = nbformat.read(str(path), as_version=4)
        nbformat.validate(nb)
        assert nb.metadata.kernelspec.name == "ccbench"
        assert all(not c.get("outputs") and c.get("execution_count") is None
                   for c in nb.cells if c.cell_type == "code")
        assert path.read_text() == json.dumps(json.loads(path.read_text()), indent=1,
                                              sort_keys=True, ensure_ascii=False) + "\n"
    tags = [c.metadata.get("tags", []) for c in nbformat.read(str(ROOT / "notebooks/report.ipynb"), 4).cells]
    assert ["parameters"] in tags


@pytest.mark.parametrize("kwargs,message", [
    (dict(results=[]), "results: no results files given"),
    (dict(results=["/nonexistent/x.nc"]), "results: /nonexistent/x.nc: no such results file"),
    (dict(baseline="/nonexistent/b.log"), "baseline: /nonexistent/b.log: no such baseline file"),
    (dict(theory="h900"), "theory: unknown theory preset 'h900'; choose one of h100-nvlink4"),
    (dict(stats=["avg", "p1000"]), "stats: unknown statistic 'p1000'"),
    (dict(stats=["avg", 99]), "stats: entry 99 is not a statistic name"),
    (dict(stats=[]), "stats: give at least one statistic"),
    (dict(title=5), "title: 5 is not text"),
])
def test_check_parameters_names_the_wrong_one(results, kwargs, message):
    args = dict(results=[results[0]], baseline="", theory="auto", stats=["avg"], title="")
    args.update(kwargs)
    with pytest.raises(ConfigError) as e:
        rn.check_parameters(**args)
    assert str(e.value).startswith(message)


def test_check_parameters_accepts_strings_and_presets(results):
    p = rn.check_parameters(results[0], "", "ib-ndr", "avg,p99", "t")
    assert p.results == [results[0]] and p.stats == ["avg", "p99"] and p.theory == "ib-ndr"
    ctx = rn.prepare([results[0]], theory="none")
    assert list(ctx.parts) == ["all_reduce", "all_gather"] and ctx.presets == {
        "all_reduce": None, "all_gather": None}


def test_bad_parameter_fails_in_the_first_cell_in_one_line(results, tmp_path):
    # papermill directly (as cron would run it): the check cell right after the
    # parameters fails, with the kit's one-line message as the whole traceback
    import papermill as pm
    out = tmp_path / "bad.ipynb"
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(ROOT / "notebooks" / "report.ipynb"), str(out),
                            parameters=dict(results=[results[0]], stats=["avg", "p1000"]),
                            kernel_name=kernel_name(), progress_bar=False, cwd=str(tmp_path))
    assert e.value.ename == "ConfigError"
    assert e.value.evalue.startswith("stats: unknown statistic 'p1000'")
    nb = nbformat.read(str(out), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    failed = [i for i, c in enumerate(code) if any(o.output_type == "error" for o in c.outputs)]
    # cells: parameters, injected-parameters, then the check
    assert failed == [2] and "injected-parameters" in code[1].metadata.tags
    tb = [o for o in code[2].outputs if o.output_type == "error"][0].traceback
    assert len(tb) == 1 and "stats: unknown statistic 'p1000'" in tb[0]
    assert all(c.execution_count is None for c in code[3:])


def cli_in_process(capsys, *argv):
    """(exit status, stderr) of `ccbench ARGV` run in this process: these
    refusals come before papermill or any rank starts, so a subprocess would
    only add a second of imports each (tests/test_spine_run.py runs the
    report's refusal as a real subprocess)."""
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("args,message", [
    (["/nonexistent.nc"], "ccbench: error: results: /nonexistent.nc: no such results file"),
    (["{one}", "--theory", "h900"], "ccbench: error: theory: unknown theory preset 'h900'"),
    (["{one}", "-t", "avg", "pfoo"], "ccbench: error: stats: unknown statistic 'pfoo'"),
    (["{one}", "--baseline", "/nope.log"], "ccbench: error: baseline: /nope.log: no such baseline"),
])
def test_cli_prints_one_line_and_exits_nonzero(capsys, results, tmp_path, args, message):
    args = [a.format(one=results[0]) for a in args]
    rc, err = cli_in_process(capsys, "report", *args, "-o", tmp_path / "r.html")
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), err
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "r.ipynb").exists()


def test_cli_rejects_non_html_output(capsys, results, tmp_path):
    rc, err = cli_in_process(capsys, "report", results[0], "-o", tmp_path / "r.pdf")
    assert rc == 2
    assert err.strip() == f"ccbench: error: -o/--output: {tmp_path / 'r.pdf'}: the report " \
                                  "is HTML; name it NAME.html"


def test_compare_notebook_runs(results, tmp_path):
    executed = execute("compare.ipynb", tmp_path / "cmp.html",
                       dict(results=list(results), baseline="", stats=["avg"], title="A vs B"))
    nb = nbformat.read(str(executed), as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    texts = " ".join(str(o.get("data", {}).get("text/markdown", "")) +
                     str(o.get("data", {}).get("text/html", "")) for o in outputs)
    assert "# A vs B" in texts and "**one** (reference)" in texts and "## all_reduce" in texts
    assert "## all_gather" not in texts  # only in one run
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 2  # busbw of both runs, and two's ratio to one
    assert "geometric mean ratio" in texts


def test_compare_needs_two_runs(results):
    with pytest.raises(ConfigError, match="results: give two or more results files"):
        rn.prepare_compare([results[0]])


def test_cli_compare_needs_two_runs(capsys, results, tmp_path):
    rc, err = cli_in_process(capsys, "report", results[0], "--compare", "-o", tmp_path / "c.html")
    assert rc == 2
    assert err.strip() == ("ccbench: error: results: give two or more results files, "
                                   "or one and a baseline")
