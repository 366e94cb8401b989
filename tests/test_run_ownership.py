"""A results file belongs to one run: real runs, killed with SIGKILL, and a
second run to the same --out (issue 28)."""
import os
import signal
import subprocess
import time
import uuid

import pytest
import xarray as xr

from conftest import BIN, run_cli, wait_until_gone
from ccbench_kit.dataset.checkpoint import pending_files, pending_runs
from ccbench_kit.dataset.io import open_parts

# more than ~20 s in all: the module starts first under `make test` (conftest)
pytestmark = pytest.mark.slow

# the results file is rewritten only at the end (a rewrite clears the sidecars,
# and on a crowded machine 10 s, the default, can pass before the kill)
LONG = ["run", "all_reduce", "-r", "3", "-b", "8", "-e", "64M", "-f", "2", "-n", "20",
        "--checkpoint-every", "100000", "--non-interactive"]


def _start(out, tag):
    return subprocess.Popen([str(BIN / "ccbench"), *LONG, "--out", str(out)],
                            env={**os.environ, "CCB_TEST_TAG": tag},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for_sidecars(proc, out, n=2):
    deadline = time.monotonic() + 120
    while len(pending_files(out)) < n:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.1)


def test_second_writer_is_refused_and_a_killed_runs_sidecars_stay_its_own(tmp_path):
    out = tmp_path / "r.nc"
    tag = uuid.uuid4().hex
    first = _start(out, tag)
    try:
        _wait_for_sidecars(first, out)
        # a second run to the file in use: refused in one line, the first untouched
        second = run_cli("run", "all_reduce", "-r", "2", "-b", "1K", "-e", "2K", "-f", "2", "-n", "2",
                         "--out", out, timeout=120)
        assert second.returncode == 2, second.stderr
        assert second.stderr.startswith(f"ccbench: error: --out: {out} is being written by "
                                        f"another run (pid {first.pid})"), second.stderr
        assert len(second.stderr.splitlines()) == 1
        assert first.poll() is None
    finally:
        os.killpg(first.pid, signal.SIGKILL)     # the launcher and its whole session
        first.wait()
    wait_until_gone(tag)  # the killed run's sidecars are counted once it is gone
    killed = pending_runs(out)
    left = pending_files(out)
    assert len(killed) == 1 and len(left) >= 2
    # the next run to the same --out, other sizes: its file holds its sizes only,
    # the killed run's sidecars are neither folded in nor removed
    again = run_cli("run", "all_reduce", "-r", "2", "-b", "1K", "-e", "2K", "-f", "2", "-n", "2",
                    "--out", out, timeout=120)
    assert again.returncode == 0, again.stderr
    ds = xr.open_dataset(out)
    assert list(ds["size"].values) == [1024, 2048] and ds.attrs["run_id"] not in killed
    ds.close()
    assert pending_files(out) == left and not (tmp_path / "r.nc.ccb-lock").exists()
    # recover will not give this file the killed run's sizes
    rec = run_cli("recover", out, timeout=60)
    assert rec.returncode == 2 and "holds another run's results" in rec.stderr, rec.stderr
    assert pending_files(out) == left
    # ... but into a file of its own, with -o
    mine = tmp_path / "killed.nc"
    rec = run_cli("recover", out, "-o", mine, timeout=60)
    assert rec.returncode == 0, rec.stderr
    ds = xr.open_dataset(mine)
    assert list(ds["size"].values[:2]) == [8, 16] and ds.attrs["run_id"] == killed[0]
    assert ds.sizes["size"] == len(left) and ds.attrs["complete"] == "false"
    assert pending_files(out) == []
    assert list(xr.open_dataset(out)["size"].values) == [1024, 2048]


def test_a_run_to_a_folder_that_does_not_exist_yet_makes_it(tmp_path):
    """`make demo`'s first run writes results/demo.nc where results/ is not
    there yet: the lock beside the file must not stop it (it did: a
    FileNotFoundError traceback, caught by a fresh clone's `make demo`)."""
    out = tmp_path / "new" / "deeper" / "r.nc"
    r = run_cli("run", "all_reduce,all_gather", "-r", 2, "-b", 8, "-e", 64, "-n", 2, "-w", 0,
                "--algorithms", "mpi", "--non-interactive", "--out", out)
    assert r.returncode == 0, r.stderr
    parts = open_parts(out)
    assert sorted(parts) == ["all_gather", "all_reduce"], sorted(parts)
    assert all(int(ds["latency"].count()) > 0 for ds in parts.values())
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.nc"]  # no lock or part left
