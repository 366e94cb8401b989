"""The history gate cannot be fooled (issue 37): a short clean step is
called, dates are checked when filed, `--since` counts back from now,
`--min-change` needs its unit, a `--series` that matches nothing is exit 2,
the folder is not trusted (symlinks, names, bytes), and nothing a file says
reaches the terminal live."""
import datetime as dt
import os
import re
import shutil

import numpy as np
import pytest
import xarray as xr

from history_nights import make_nights
from test_history import BASE, in_process, one_error, tree_digest

import ccbench_kit.history as H
from ccbench_kit.errors import ConfigError
from ccbench_kit.history import changepoints as C

STEP = 4096


def test_the_issues_short_history_is_called():
    """8 nights, then 6 nights 1.3x slower, 0.8 % noise: a clean step of
    ~30 noise units, called at its first run (the permutation test alone
    gave p ~ 0.04 here and called nothing)."""
    rng = np.random.default_rng(37)
    times = np.exp(np.r_[rng.normal(0, 0.008, 8), np.log(1.3) + rng.normal(0, 0.008, 6)])
    (change,) = C.detect(1 / times).changes
    assert change.index == 8 and change.clean and change.margin > C.CLEAN_MARGIN
    assert change.change == pytest.approx(1 / 1.3 - 1, abs=0.02)
    assert change.evidence().startswith("clean step, ")


def test_a_2x_step_with_six_runs_is_called_and_noise_alone_is_not():
    rng = np.random.default_rng(5)
    y = np.exp(np.r_[rng.normal(0, 0.01, 20), np.log(2) + rng.normal(0, 0.01, 6)])
    assert [c.index for c in C.detect(y).changes] == [20]
    # the sides of a clean step are separated but for one outlier each
    assert C.step_margin(np.log([1, 1.01, 0.99, 1.5]), np.log([2, 2.02, 1.98]), 0.01)[1]
    assert not C.step_margin(np.log([1, 2.01, 0.99, 2.02]), np.log([2, 2.02, 1.0]), 0.01)[1]
    # no step, or one outlier night: never a clean step (the permutation
    # test keeps its own 1 % false alarms; bench/history_power.py counts both)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        plain = rng.normal(0, 0.01, 14)
        outlier = plain.copy()
        outlier[7] += np.log(1.5)
        for y in (plain, outlier):
            assert not [c for c in C.detect(np.exp(y)).changes if c.clean]


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    """14 nights ending yesterday: 4 KiB 1.3x slower from night 9 (a new
    library that night), 0.8 % noise."""
    out = tmp_path_factory.mktemp("short")
    start = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=14)).replace(microsecond=0)
    nights = make_nights(BASE, out, nights=14, scenarios={("all_reduce", STEP): ("slower", 9)},
                         library_at=9, sigma=0.008, start=start.isoformat())
    d = out / "h"
    H.add(nights, d)
    return d, nights


def test_the_short_history_fails_the_cron_gate(short, capsys):
    d, _ = short
    rc, out, _ = in_process(capsys, "history", "check", "--history", d, "--since", "7d")
    lines = out.splitlines()
    assert rc == 1 and len(lines) == 2, out      # out of place and in place
    for line in lines:
        assert f"/{STEP}/fp32/3r1n/mpi from run 9/14 " in line
        assert re.search(r"busbw -2[0-9]\.\d% \(clean step, \d+x noise\)", line), line
        assert "library Open MPI v4.1.4 → Open MPI v4.1.5" in line
    # the same through the API, with the window as text
    with H.open(d) as h:
        assert [r.position for r in h.regressions(since="7d")] == [9, 9]
        assert h.regressions(since="3d") == []          # the step began 6 nights ago
        with pytest.raises(ConfigError, match="min_change: '5%' is not a relative change"):
            h.regressions(min_change="5%")
        with pytest.raises(ConfigError, match="--since: 7 is not a duration"):
            h.regressions(since=7)


@pytest.mark.parametrize("argv, message", [
    (["--min-change", "5"], "--min-change: '5' needs its unit: write 5% (or the fraction 0.05)"),
    (["--min-change", "1"], "--min-change: '1' needs its unit"),
    (["--series", "all_redcue/*"], "--series: 'all_redcue/*' matches no series of"),
])
def test_every_wrong_spelling_of_the_gate_fails(short, capsys, argv, message):
    try:
        rc, out, err = in_process(capsys, "history", "check", "--history", short[0], *argv)
    except SystemExit as e:  # argparse refuses a flag's value itself
        (out, err), rc = capsys.readouterr(), e.code
    assert rc == 2 and out == "" and message in one_error(err)


def test_min_change_with_its_unit(short, capsys):
    d = short[0]
    for value in ("5%", "0.05", "22%"):
        assert in_process(capsys, "history", "check", "--history", d, "--min-change", value)[0] == 1
    for value in ("31%", "0.31"):     # busbw -23 %, latencies +30 %
        assert in_process(capsys, "history", "check", "--history", d,
                          "--min-change", value)[:2] == (0, "")


@pytest.mark.parametrize("created, message", [
    ("2999-01-01T02:00:00", "it is dated 2999-01-01T02:00:00+00:00, in the future"),
    ("last tuesday", "its date (created 'last tuesday') is not an ISO date"),
])
def test_a_wrong_date_is_refused_when_filed(short, tmp_path, capsys, created, message):
    d = tmp_path / "h"
    shutil.copytree(short[0], d)
    ds = xr.open_dataset(short[1][0]).load()
    ds.attrs["created"] = created
    bad = tmp_path / "bad.nc"
    ds.to_netcdf(bad, engine="h5netcdf")
    before = tree_digest(d)
    rc, _, err = in_process(capsys, "history", "add", "--history", d, short[1][0], bad)
    line = one_error(err)
    assert rc == 2 and f"{bad}: {message}" in line and line.endswith("; nothing was filed")
    assert tree_digest(d) == before


def test_show_of_a_night_whose_sizes_all_failed(short, tmp_path, capsys):
    d = tmp_path / "h"
    shutil.copytree(short[0], d)
    ds = xr.open_dataset(short[1][-1]).load()
    ds["latency"] = ds["latency"] * np.nan
    ds.attrs["created"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    nan_night = tmp_path / "failed.nc"
    ds.to_netcdf(nan_night, engine="h5netcdf")
    H.add(nan_night, d)
    rc, out, _ = in_process(capsys, "history", "show", "--history", d,
                            f"all_reduce/mpi/out_of_place/{STEP}/*")
    row = [ln for ln in out.splitlines() if ln.strip().startswith("15 ")]
    assert rc == 0 and len(row) == 1 and row[0].split()[2:5] == ["-", "-", "-"]


def test_text_from_a_file_is_escaped_in_list_show_and_check(short, tmp_path, capsys):
    d = tmp_path / "h"
    shutil.copytree(short[0], d)
    hostile = tmp_path / "hostile.nc"
    ds = xr.open_dataset(short[1][-1]).load()
    ds.attrs["library"] = "Open MPI v9\x1b]0;pwned\x07\x1b[2J"
    ds.attrs["created"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    ds.to_netcdf(hostile, engine="h5netcdf")
    H.add(hostile, d)
    rc, out, _ = in_process(capsys, "history", "show", "--history", d,
                            f"all_reduce/mpi/out_of_place/{STEP}/*")
    assert rc == 0 and "\x1b" not in out and "\x07" not in out
    assert "Open MPI v9\\x1b]0;pwned\\x07\\x1b[2J / hostile.nc" in out


# -- the folder is not trusted --------------------------------------------------

def test_index_that_is_a_folder_or_a_dangling_symlink(short, tmp_path, capsys):
    d = tmp_path / "h"
    shutil.copytree(short[0], d)
    (d / "index.sqlite").unlink()
    (d / "index.sqlite").mkdir()
    rc, _, err = in_process(capsys, "history", "list", "--history", d)
    assert rc == 2 and "index.sqlite is not a regular file" in one_error(err)
    (d / "index.sqlite").rmdir()
    outside = tmp_path / "elsewhere.sqlite"
    (d / "index.sqlite").symlink_to(outside)
    for argv in (["list"], ["add", short[1][0]], ["rebuild"]):
        rc, _, err = in_process(capsys, "history", argv[0], "--history", d, *argv[1:])
        assert rc == 2 and "index.sqlite is a symbolic link" in one_error(err)
    assert not outside.exists()


def test_filed_files_are_checked(short, tmp_path, capsys):
    d = tmp_path / "h"
    shutil.copytree(short[0], d)
    stored = sorted((d / "runs").glob("*/*.nc"))
    # a symlink among the filed runs
    link = stored[0].parent / ("f" * 64 + ".nc")
    link.symlink_to(short[1][0])
    rc, _, err = in_process(capsys, "history", "rebuild", "--history", d)
    assert rc == 2 and "is a symbolic link" in one_error(err)
    link.unlink()
    # a file under a name that is no digest
    odd = stored[0].parent / "notes.nc"
    shutil.copy(short[1][0], odd)
    rc, _, err = in_process(capsys, "history", "list", "--history", d)
    assert rc == 2 and "notes.nc: not a filed run's name" in one_error(err)
    odd.unlink()
    # a filed file whose bytes changed
    os.chmod(stored[1], 0o644)
    with open(stored[1], "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    rc, _, err = in_process(capsys, "history", "rebuild", "--history", d)
    assert rc == 2 and f"{stored[1].name}: its bytes do not match its name" in one_error(err)


def test_a_filed_run_whose_bytes_changed_is_refused_on_read(short, tmp_path, capsys):
    """Not only a rebuild: every read of a filed run (show, ccb.load, the
    report of a run the history explorer opens) checks its bytes against
    its name, and refuses in one line naming the file."""
    import ccbench_kit as ccb
    d = tmp_path / "h"
    shutil.copytree(short[0], d)
    intact, changed = sorted((d / "runs").glob("*/*.nc"))[:2]
    assert ccb.load(intact).attrs["collective"] == "all_reduce"
    os.chmod(changed, 0o644)
    with open(changed, "r+b") as f:   # one attribute's text, the file still readable
        data = f.read()
        at = data.index(b"all_reduce")
        f.seek(at)
        f.write(b"all_reducf")
    message = (f"{changed}: its bytes do not match its name (changed after it was filed); "
               "move it out, then `ccbench history rebuild`")
    rc, out, err = in_process(capsys, "show", changed)
    assert rc == 2 and one_error(err) == f"ccbench: error: {message}" and out == ""
    with pytest.raises(ConfigError) as e:
        ccb.load(changed)
    assert str(e.value) == message
    outside = tmp_path / "copy.nc"   # the same bytes under a name of its own: no claim to check
    shutil.copy(changed, outside)
    ccb.load(outside)


def test_run_with_a_corrupt_history_refuses_before_measuring(short, tmp_path, capsys):
    d = tmp_path / "h"
    shutil.copytree(short[0], d)
    (d / "index.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    before = tree_digest(d)
    out = tmp_path / "r.nc"
    try:
        rc, stdout, err = in_process(capsys, "run", "all_reduce", "-r", "2", "-b", "8",
                                     "--out", out, "--history", d)
    except SystemExit as e:  # argparse refuses the flag's value itself
        (stdout, err), rc = capsys.readouterr(), e.code
    assert rc == 2 and stdout == "" and not out.exists()
    assert "argument --history: " in one_error(err) and "the index is corrupt" in err
    assert tree_digest(d) == before
