"""The history (issue 25): filing, the index, change points, `ccbench history`.

The nightly histories are derived from a REAL run of the kit
(tests/data/history/base-allreduce-3r.nc: the all_reduce part of
``ccbench run all_reduce,broadcast -r 3 -b 1K -e 4K -f 2 -n 10 -w 2``)
by tests/history_nights.py, which says exactly what it changes.
"""
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from conftest import BIN, run_cli
from history_nights import make_nights

import ccbench_kit.history as H
from ccbench_kit.history import changepoints as C
from ccbench_kit.history import facts as F
from ccbench_kit.cli import main

# more than ~20 s in all: the module starts first under `make test` (conftest)
pytestmark = pytest.mark.slow

BASE = Path(__file__).parent / "data" / "history" / "base-allreduce-3r.nc"
DROP, NOISIER, OUTLIER = 4096, 2048, 1024
SCENARIOS = {("all_reduce", DROP): ("drop", 41), ("all_reduce", NOISIER): ("noisier", 31),
             ("all_reduce", OUTLIER): ("outlier", 25)}


def tree_digest(directory):
    """{relative path: sha256} of every file under `directory`."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(directory).rglob("*")) if p.is_file()}


def index_rows(directory):
    con = sqlite3.connect(Path(directory) / "index.sqlite")
    try:
        return (con.execute("SELECT * FROM runs ORDER BY run_id").fetchall(),
                con.execute("SELECT s.key, p.run_id, p.busbw, p.lat_p50, p.lat_p99 FROM points p "
                            "JOIN series s USING (series_id) ORDER BY 1, 2").fetchall())
    finally:
        con.close()


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    out = tmp_path_factory.mktemp("nights")
    return make_nights(BASE, out, nights=60, scenarios=SCENARIOS)


@pytest.fixture(scope="module")
def hist(nights, tmp_path_factory):
    """Sixty nights filed by two `ccbench history add` processes at once."""
    d = tmp_path_factory.mktemp("hist") / "h"
    procs = [subprocess.Popen([str(BIN / "ccbench"), "history", "add", "--history", str(d),
                               *map(str, part)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for part in (nights[0::2], nights[1::2])]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.count("filed: ") == 30
    return d


def test_two_writers_lose_nothing(hist, nights):
    runs, points = index_rows(hist)
    assert len(runs) == 60 and len(list((hist / "runs").glob("*/*.nc"))) == 60
    assert sorted(r[2] for r in runs) == sorted(p.name for p in nights)
    # 3 sizes x 2 placements of one algorithm, every night
    assert len(points) == 60 * 6
    stored = next((hist / "runs").glob("*/*.nc"))
    assert stored.stat().st_mode & 0o222 == 0  # filed read-only


def test_check_names_the_drop_at_41_with_the_version_change(hist):
    proc = run_cli("history", "check", "--history", hist)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2  # the dropped size, out of place and in place
    for line in lines:
        m = re.match(rf"REGRESSION all_reduce/mpi/(out_of|in)_place/{DROP}/fp32/3r1n/mpi "
                     r"from run (\d+)/60 .*busbw (-[\d.]+)%.*: (.*)$", line)
        assert m, line
        assert abs(int(m.group(2)) - 41) <= 1
        assert 6.0 < -float(m.group(3)) < 10.0
        assert "library Open MPI v4.1.4 → Open MPI v4.1.5" in m.group(4)
    assert f"/{NOISIER}/" not in proc.stdout and f"/{OUTLIER}/" not in proc.stdout


def in_process(capsys, *argv):
    """(exit status, stdout, stderr) of `ccbench ARGV` run in this process."""
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_show_explains_the_change_and_keeps_the_noisy_series_quiet(hist, capsys):
    rc, out, _ = in_process(capsys, "history", "show", "--history", hist,
                            f"all_reduce/mpi/out_of_place/{DROP}/*")
    assert rc == 0
    assert re.search(r"busbw: ok.*\n#     change at run 4[012] .*-[6-9]\.\d%.*library", out)
    rows = [ln for ln in out.splitlines() if re.match(r"\s+\d+\s+2026", ln)]
    assert len(rows) == 60 and rows[-1].rstrip().endswith("night-060.nc")
    for size in (NOISIER, OUTLIER):
        rc, out, _ = in_process(capsys, "history", "show", "--history", hist,
                                f"all_reduce/mpi/out_of_place/{size}/*")
        assert rc == 0 and "change at run" not in out and "60 runs" in out


def test_since_and_min_change_limit_check(hist, capsys):
    # night 41 is 2026-10-11: a window that starts after it finds nothing
    assert in_process(capsys, "history", "check", "--history", hist,
                      "--since", "2026-10-20")[:2] == (0, "")
    assert in_process(capsys, "history", "check", "--history", hist, "--since",
                      "2026-10-05")[0] == 1
    assert in_process(capsys, "history", "check", "--history", hist,
                      "--min-change", "12%")[:2] == (0, "")
    # a duration counts back from now, not from the newest run (night 60, 2026-10-30):
    # three weeks back from today hold no run of this history, so no change
    assert in_process(capsys, "history", "check", "--history", hist, "--since", "3w")[:2] == (0, "")


def searched_everything(h, since, min_change):
    """`regressions` as it was before the shortcuts: every series, every
    metric, ruptures' own search, every candidate tested, filtered after."""
    lines = []
    for key, _ in h.series():
        pts, verdicts = h.analyse(key)
        at = {}
        for metric, verdict in verdicts.items():
            for ch in verdict.changes:
                worse = ch.change < 0 if F.METRICS[metric] == "lower" else ch.change > 0
                if worse and abs(ch.change) >= min_change:
                    at.setdefault(ch.index, []).append((metric, ch.change, ch.evidence()))
        for index, changes in sorted(at.items()):
            start = H.api._created(pts[index][0]["created"])
            if since is None or start >= since:
                lines.append(H.api.Regression(key, tuple(changes), index + 1, len(pts),
                                              pts[index][0],
                                              tuple(H.api.facts_near(pts, index))).line())
    return lines


def test_check_shortcuts_decide_what_the_full_search_decides(hist, monkeypatch):
    """The window, the vectorised first split and the untested candidates
    change no verdict: on the acceptance history every series and metric
    gets the same `detect` result, and `check` the same lines, as a full
    ruptures search testing every candidate."""
    import ruptures
    with H.open(hist) as h:
        series = [[v[m] for _, v in h.points(key)] for key, _ in h.series() for m in F.METRICS]
        windows = [(None, 0.0), (None, 0.12), (H.parse_since("2026-10-05"), 0.0),
                   (H.parse_since("2026-10-20"), 0.0), (H.parse_since("2026-10-11"), 0.05),
                   (None, 0.05), (H.parse_since("2026-10-05"), 0.03)]
        fast = [[r.line() for r in h.regressions(since, change)] for since, change in windows]
        for values in series:  # the vectorised gain is ruptures' own, to rounding
            y = np.log(np.asarray(values, dtype=float))
            gain = ruptures.Binseg(model="l1", min_size=3, jump=1).fit(y).single_bkp(0, len(y))[1]
            assert C._best_first_gain(y) == pytest.approx(gain, rel=1e-9)
        quick = [C.detect(values) for values in series]
        for values, verdict in zip(series, quick):  # the pre-screen's bounds hold
            for first in range(len(values)):
                least, most = C.change_bounds(values, first)
                for ch in verdict.changes:
                    assert ch.index < first or least - 1e-9 <= ch.change <= most + 1e-9
        monkeypatch.setattr(C, "_binseg", lambda y, penalty: None)
        assert quick == [C.detect(values) for values in series]
        full = [searched_everything(h, since, change) for since, change in windows]
    assert fast == full
    assert [len(lines) for lines in fast] == [2, 0, 2, 0, 2, 2, 2]


def test_vectorised_binary_segmentation_is_ruptures():
    """On series with 1 to 4 levels (some rounded, to make exact ties) the
    vectorised search gives ruptures' change points whenever it decides."""
    import ruptures
    rng = np.random.default_rng(7)
    decided = 0
    for _ in range(120):
        n = int(rng.choice([8, 9, 12, 30, 60, 120]))
        y = rng.normal(0, rng.choice([0.005, 0.01, 0.03]), n)
        for _ in range(rng.integers(0, 4)):
            y[rng.integers(1, n):] += rng.normal(0, 0.06)
        if rng.random() < 0.1:
            y = np.round(y, 2)
        penalty = 3 * max(C.night_noise(y), 1e-4) * np.log(n)
        ends = C._binseg(y, penalty)
        if ends is not None:
            decided += 1
            assert ends == ruptures.Binseg(model="l1", min_size=3, jump=1).fit(y).predict(pen=penalty)
    assert decided > 80


def test_deleted_index_is_rebuilt_with_the_same_rows(hist, tmp_path, capsys):
    copy = tmp_path / "h"
    shutil.copytree(hist, copy)
    before = index_rows(copy)
    listed = in_process(capsys, "history", "list", "--history", copy)
    (copy / "index.sqlite").unlink()
    assert in_process(capsys, "history", "list", "--history", copy) == listed
    assert listed[1].startswith("# 60 runs, 2026-09-01T02:00:00+00:00 .. 2026-10-30")
    assert index_rows(copy) == before


def test_a_run_with_history_files_itself(tmp_path):
    d = tmp_path / "h"
    out = tmp_path / "r.nc"
    run_cli("run", "all_reduce", "-r", "3", "-b", "8", "-e", "16", "-f", "2", "-n", "3", "-w", "1",
            "--out", out, "--history", d, check=True, timeout=300)
    with H.open(d) as h:
        (run,) = h.runs()
        assert run["name"] == "r.nc" and run["nranks"] == 3 and run["kind"] == "run"
        assert (d / run["file"]).read_bytes() == out.read_bytes()
        assert {k for k, _ in h.series()} == {f"all_reduce/mpi/{p}/{s}/fp32/3r1n/mpi"
                                               for p in ("out_of_place", "in_place")
                                               for s in (8, 16)}


# -- bad input: one line, a non-zero exit, the history untouched ----------------

@pytest.fixture(scope="module")
def small_filed(nights, tmp_path_factory):
    """Three nights filed once for the module (`small` hands out copies)."""
    d = tmp_path_factory.mktemp("small") / "small"
    H.add(nights[:3], d)
    return d


@pytest.fixture
def small(small_filed, tmp_path):
    """A history of three nights, this test's own to break: a copy of
    `small_filed` (copying is cheaper than filing again)."""
    d = tmp_path / "small"
    shutil.copytree(small_filed, d)
    return d


def one_error(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ccbench: error: "), err
    return lines[0]


def test_not_a_results_file_files_nothing(small, tmp_path, capsys):
    bad = tmp_path / "notes.nc"
    bad.write_text("not netCDF\n")
    before = tree_digest(small)
    rc, _, err = in_process(capsys, "history", "add", "--history", small, str(bad))
    assert rc == 2 and str(bad) in one_error(err)
    assert tree_digest(small) == before


def test_future_schema_files_nothing(small, nights, tmp_path, capsys):
    ds = xr.open_dataset(nights[0]).load()
    ds.attrs["schema"] = "ccbench/99"
    future = tmp_path / "future.nc"
    ds.to_netcdf(future, engine="h5netcdf")
    before = tree_digest(small)
    rc, _, err = in_process(capsys, "history", "add", "--history", small, str(future))
    assert rc == 2 and "schema ccbench/99 is newer than this kit reads" in one_error(err)
    assert tree_digest(small) == before


def test_corrupt_index_is_reported_not_rewritten(small, capsys):
    index = small / "index.sqlite"
    index.write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    before = tree_digest(small)
    rc, _, err = in_process(capsys, "history", "list", "--history", small)
    assert rc == 2 and "the index is corrupt" in one_error(err)
    assert "ccbench history rebuild" in err
    assert tree_digest(small) == before
    rc, out, _ = in_process(capsys, "history", "rebuild", "--history", small)
    assert rc == 0 and out.startswith("# 3 runs")


def test_unknown_series_and_future_since(small, capsys):
    rc, _, err = in_process(capsys, "history", "show", "--history", small, "no/such/series")
    assert rc == 2 and "no series 'no/such/series'" in one_error(err)
    rc, _, err = in_process(capsys, "history", "check", "--history", small, "--since", "2999-01-01")
    assert rc == 2 and "--since: '2999-01-01' is in the future" in one_error(err)
    rc, _, err = in_process(capsys, "history", "list", "--history", small / "missing")
    assert rc == 2 and "no such history directory" in one_error(err)


def test_last_healthy_doctor_of_each_node(nights, tmp_path):
    """Doctor-shaped files (a night with the attrs `ccbench doctor` writes:
    doctor_verdict, hosts): the newest healthy one of each node."""
    import json
    made = []
    for k, (hosts, line) in enumerate([(["n1", "n2"], "verdict: none"),
                                       (["n1", "n3"], "verdict: none"),
                                       (["n1", "n2"], "verdict: n2")]):
        ds = xr.open_dataset(nights[k]).load()
        ds.attrs.update(doctor_verdict=json.dumps({"line": line}), hosts=json.dumps(hosts))
        made.append(tmp_path / f"doctor-{k}.nc")
        ds.to_netcdf(made[-1], engine="h5netcdf")
    H.add(made, tmp_path / "h")
    with H.open(tmp_path / "h") as h:
        best = {node: run["name"] for node, run in h.last_healthy_doctor().items()}
    assert best == {"n1": "doctor-1.nc", "n2": "doctor-0.nc", "n3": "doctor-1.nc"}


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only tmpfs needs root")
def test_read_only_mount(small, nights, tmp_path, capsys):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        shutil.copytree(small, mnt / "h")
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        before = tree_digest(mnt / "h")
        rc, _, err = in_process(capsys, "history", "add", "--history", mnt / "h", nights[5])
        assert rc == 2 and "is not writable" in one_error(err) and "--history" in err
        rc, out, _ = in_process(capsys, "history", "list", "--history", mnt / "h")
        assert rc == 0 and out.startswith("# 3 runs")
        with pytest.raises(SystemExit) as stop:  # checked before anything runs
            main(["run", "all_reduce", "-r", "2", "--history", str(mnt / "h")])
        assert stop.value.code == 2 and "is not writable" in one_error(capsys.readouterr().err)
        (mnt / "h" / "index.sqlite").exists()
        assert tree_digest(mnt / "h") == before
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


WORDS = ["", " ", "-1", "7d", "99999999999w", "1e308d", "0d", "1.5w", "12h", "2026-10-01", "2999-01-01", "nan", "1e308",
         "5%", "-5%", "500%", "abc", "*", "all_reduce/*", "../..", "\x00", "%", "--", "'; DROP"]


def test_history_cli_inputs_property(small, capsys):
    """Whatever a user types to list/show/check: exit 0, 1 or 2 with one
    error line, and the history is never changed."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    before = tree_digest(small)
    word = st.one_of(st.sampled_from(WORDS), st.text(max_size=12))

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(action=st.sampled_from(["list", "show", "check"]), since=word, change=word,
           series=word, use=st.tuples(st.booleans(), st.booleans()))
    def prop(action, since, change, series, use):
        argv = ["history", action, "--history", str(small)]
        if action == "show":
            argv.append(series)
        if action == "check" and use[0]:
            argv += ["--since", since]
        if action == "check" and use[1]:
            argv += ["--min-change", change]
        capsys.readouterr()
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
        out, err = capsys.readouterr()
        assert rc in (0, 1, 2), (argv, rc, err)
        if rc == 2:
            one_error(err)
        assert "Traceback" not in err
        assert tree_digest(small) == before

    prop()


def test_report_marks_and_explains_the_change(hist, tmp_path):
    out = tmp_path / "trend.html"
    run_cli("history", "report", "--history", hist, "-o", out, check=True, timeout=300)
    page = out.read_text()
    assert "library Open MPI v4.1.4 → Open MPI v4.1.5" in page
    assert re.search(r"all_reduce/mpi/out_of_place/4096/fp32/3r1n/mpi</td>\s*<td>41</td>", page)
    assert page.count("data:image/png;base64") == 1  # one collective, one figure


def test_history_explorer_widget(hist, tmp_path):
    pytest.importorskip("ipywidgets")
    from ccbench_kit.widgets import HistoryExplorer
    ex = HistoryExplorer(hist, reports=tmp_path)
    assert len(ex.series.options) == 6
    ex.series.value = f"all_reduce/mpi/out_of_place/{DROP}/fp32/3r1n/mpi"
    assert ex.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert re.search(r"change at run 4[012] .*-[6-9]\.\d%.*library Open MPI v4\.1\.4 → ",
                     ex.notes.value)
    ex.metric.value = "lat_p99"
    assert re.search(r"change at run 4[012] .*\+[7-9]\.\d%", ex.notes.value)
    ex.series.value = f"all_reduce/mpi/out_of_place/{NOISIER}/fp32/3r1n/mpi"
    assert "change at run" not in ex.notes.value
    assert ex.run.options[0][0].startswith("60: 2026-10-30")
