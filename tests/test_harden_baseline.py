"""The doctor's files are checked before anything is measured (issue 37):
a baseline's schema and every sample (finite, positive, shaped as its
labels say), its size (64 MiB, refused before reading) and nesting, a
UTF-8 BOM accepted; outputs that would overwrite an input or each other,
and a --report that cannot be made, refused before the check runs."""
import json
import sys

import pytest

from test_doctor_verdict import fake_raw

from ccbench_kit.cli import main
from ccbench_kit.errors import ConfigError
from ccbench_kit.health import baseline, results


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "b.json"
    baseline.save(results.figures(fake_raw(seed=7)), path)
    return path


def _rewrite(path, change):
    data = json.loads(path.read_text())
    change(next(iter(data["figures"].values())))
    path.write_text(json.dumps(data))


def _first_repeats(figure):
    node = figure["samples"]
    while isinstance(node[0], list):
        node = node[0]
    return node


@pytest.mark.parametrize("value, message", [
    (-0.82, "is -0.82: figures are finite and positive"),
    (0, "is 0: figures are finite and positive"),
    (float("nan"), "is nan: figures are finite and positive"),
    (float("inf"), "is inf: figures are finite and positive"),
    ("fast", 'is "fast", not a number'),
    (True, "is true, not a number"),
])
def test_a_sample_that_is_no_figure_is_refused(saved, value, message):
    _rewrite(saved, lambda f: _first_repeats(f).__setitem__(0, value))
    with pytest.raises(ConfigError, match=r"--baseline: .*b\.json: figure '\w+': a sample at "
                                          r"\[0, 0\] " + message.replace("(", r"\(")) as e:
        baseline.load(saved)
    assert e.value.flag == "--baseline"


def test_ragged_or_misshapen_samples_are_refused(saved):
    _rewrite(saved, lambda f: f["samples"].pop())
    with pytest.raises(ConfigError, match=r"samples at \[\] have 3 entries, the labels of "
                                          r"'node' 4"):
        baseline.load(saved)


def test_size_nesting_and_bom(saved, tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:           # sparse: 65 MiB that are never read
        f.truncate(65 << 20)
    with pytest.raises(ConfigError, match=r"big\.json: larger than 64 MiB; not a baseline file"):
        baseline.load(big)
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema": "ccbench-baseline/1", "x": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(ConfigError, match=r"not readable JSON: nested deeper than 64 levels"):
        baseline.load(deep)
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + saved.read_bytes())
    assert baseline.load(bom).figures == baseline.load(saved).figures


def run(capsys, *argv):
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_doctor_outputs_that_collide_are_refused_before_measuring(saved, tmp_path, capsys):
    same = tmp_path / "x.json"
    rc, out, err = run(capsys, "doctor", "--save-baseline", same, "--out", same)
    assert rc == 2 and out == "" and not same.exists()
    assert err.strip() == (f"ccbench: error: --save-baseline: {same} is also --out; one file "
                           "cannot be both: name another")
    rc, _, err = run(capsys, "doctor", "--baseline", saved, "--save-baseline",
                     tmp_path / "." / "b.json")
    assert rc == 2 and f"is also --baseline; one file cannot be both" in err
    assert json.loads(saved.read_text())["schema"] == "ccbench-baseline/1"


def test_doctor_report_without_papermill_refuses_before_measuring(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "papermill", None)  # as if not installed
    out = tmp_path / "d.nc"
    rc, stdout, err = run(capsys, "doctor", "--out", out, "--report", tmp_path / "d.html")
    assert rc == 2 and stdout == "" and not out.exists()
    assert err.strip() == ("ccbench: error: papermill is required for this; install it with "
                           "`pip install ccbench_kit[report]`")
