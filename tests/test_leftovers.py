"""What a run killed with SIGKILL leaves in TMPDIR is removed by the next
run (issue 28): a real launcher, really killed."""
import os
import signal
import subprocess
import time
import uuid

from conftest import BIN, run_cli, wait_until_gone
from ccbench_kit.launch import leftovers
from test_leftovers_shm import _mpirun_child, _segments


def _ours(tmp):
    return sorted(p for p in os.listdir(tmp) if p.startswith("ccbench-run-"))


def test_next_run_removes_a_killed_runs_temporary_folders(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tag = uuid.uuid4().hex
    env = {**os.environ, "TMPDIR": str(tmp), "CCB_TEST_TAG": tag}
    proc = subprocess.Popen([str(BIN / "ccbench"), "run", "all_reduce", "-r", "3", "-b", "8",
                             "-e", "64M", "-f", "2", "-n", "20", "--non-interactive", "--out",
                             str(tmp_path / "k.nc")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    family = None
    while not list(tmp_path.glob("k.nc.ccb-pending-*.npz")):
        assert proc.poll() is None and time.monotonic() < deadline
        for child in _mpirun_child(proc.pid):
            family = family or leftovers.job_family(child, str(tmp))
        time.sleep(0.1)
    shm = leftovers.shm_directory()
    assert family is not None and _segments(shm, family)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_until_gone(tag)  # a run still going down is not yet a killed run's leftovers
    left = _ours(tmp)
    assert left and left[0].startswith(f"ccbench-run-{proc.pid}-")
    # a live run's folder (this process's pid) is never touched
    live = tmp / f"ccbench-run-{os.getpid()}-keep"
    live.mkdir()
    again = run_cli("run", "all_reduce", "-r", "2", "-b", "8", "-e", "8", "-n", "1",
                    "--out", tmp_path / "n.nc", env=env, timeout=120)
    assert again.returncode == 0, again.stderr
    assert _ours(tmp) == [live.name]
    sessions = [s for d in tmp.glob("ompi.*") for s in os.listdir(d)]
    assert not [s for s in sessions if s == f"pid.{proc.pid}"]
    # and the killed job's shared-memory segments, named by its session folder
    assert _segments(shm, family) == []
