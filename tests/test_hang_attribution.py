"""A stopped rank (SIGSTOP) is named, with its host and pid, apart from the
ranks that wait for it; the size really in flight is named; every size done
before is kept; on one host and across hosts (heartbeats on the job's own
stdout, relayed by mpirun's daemons)."""
import os
import re
import signal
import subprocess
import time
import uuid

import pytest
import xarray as xr

from conftest import BIN
from ccbench_kit.dataset.checkpoint import merge_pending
from ccbench_kit.launch.watchdog import processes_with_env

SIZES = [64, 256, 1024, 4096, 16384, 65536, 262144]
SWEEP = ["run", "all_reduce", "-b", "64", "-e", "256K", "-f", "4", "--algorithms", "ring",
         "--placement", "out_of_place", "-n", "300", "-w", "1", "--timeout", "5",
         "--checkpoint-every", "0"]


def rank_pid(tag, rank, timeout=60):
    """The pid of `rank` of the run tagged `tag` (its environment says)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {}  # pid: parent pid, of the rank and of its heartbeat child (a fork)
        for pid in processes_with_env("CCB_TEST_TAG", tag):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env and b"launch.worker" in cmd:
                found[pid] = ppid
        ranks = [pid for pid, ppid in found.items() if ppid not in found]
        if len(ranks) == 1:  # the rank itself, not the child it forked
            return ranks[0]
        time.sleep(0.1)
    raise AssertionError(f"rank {rank} never appeared")


def stop_after_sizes(proc, tag, rank, nsizes):
    """SIGSTOP `rank` once the progress shows `nsizes` sizes; the stop time."""
    rows, seen = 0, []
    for line in proc.stderr:
        seen.append(line)
        if " done, best busbw" in line:
            rows += 1
            if rows == nsizes:
                break
    assert rows == nsizes, "".join(seen)
    pid = rank_pid(tag, rank)
    os.kill(pid, signal.SIGSTOP)
    return pid, time.monotonic()


def wait_for_job_end(proc, tag, since):
    """Seconds from `since` until every rank of the run is gone; then the
    launcher's exit code and stderr (it still folds in the saved sizes)."""
    gone = None
    while proc.poll() is None:
        if gone is None and not [p for p in processes_with_env("CCB_TEST_TAG", tag)
                                 if p != proc.pid]:
            gone = time.monotonic() - since
        time.sleep(0.05)
    gone = gone if gone is not None else time.monotonic() - since
    return gone, proc.returncode, proc.stderr.read()


def check_stall(err, out, pid, rank, host, waiting, done=2):
    """The stall names `rank` on `host` (with its pid) as stopped and the
    `waiting` (rank, host) pairs as waiting; the size named in flight is the
    first size not kept, and at least the `done` sizes seen finished are kept."""
    m = re.search(rf"timeout: rank {rank} \(host (\S+), pid (\d+)\) stopped \(no heartbeat", err)
    assert m, err
    assert m.group(1) == host and int(m.group(2)) == pid
    others = ", ".join(f"{r} (host {h})" for r, h in waiting)
    m = re.search(rf"ranks {re.escape(others)} wait for it in all_reduce/ring \(out-of-place\) "
                  r"at size (\d+) B", err)
    assert m, err
    in_flight = int(m.group(1))
    assert "every rank" not in err and "did not arrive" not in err
    merge_pending(out)
    kept = list(xr.open_dataset(out)["size"].values)
    # every size before the one in flight is kept, and none after it: the
    # job stops where the stall was seen (Open MPI's SIGCONT before its
    # SIGTERM once let the stopped rank finish the size named and more)
    assert kept == SIZES[:SIZES.index(in_flight)], (kept, in_flight)
    assert len(kept) >= done
    return in_flight


def test_stopped_rank_is_named_apart_from_the_waiting_ones(tmp_path):
    tag = uuid.uuid4().hex
    out = tmp_path / "s.nc"
    proc = subprocess.Popen([str(BIN / "ccbench"), *SWEEP, "-r", "3", "--out", str(out)],
                            env={**os.environ, "CCB_TEST_TAG": tag, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # after the first size: rank 0 is still writing the file for the first
        # time while the others go on, the widest window between sizes
        pid, stopped = stop_after_sizes(proc, tag, 1, 1)
        ended, rc, err = wait_for_job_end(proc, tag, stopped)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 3
    import socket
    me = socket.gethostname()
    check_stall(err, out, pid, 1, me, [(0, me), (2, me)], done=1)
    # the stall is seen after 5 s without progress and the job is down
    # within 5 s more (+2 s for a loaded 2-core machine)
    assert ended < 5 + 5 + 2, ended
    assert not processes_with_env("CCB_TEST_TAG", tag)


def test_stopped_rank_on_another_host_is_named_with_that_host(tmp_path):
    from test_multihost_netns import NetHosts, _netns_usable
    why = _netns_usable()
    if why:
        pytest.skip(why)
    net = NetHosts(3, tmp_path)
    net.prefix = f"ccbdoc{os.getpid() % 10000}"
    net.switch, net.names = f"{net.prefix}sw", [f"{net.prefix}h{i}" for i in range(3)]
    net.up()
    tag = uuid.uuid4().hex
    out = tmp_path / "s.nc"
    try:
        h0, h1, h2 = net.names
        cmd = ["ip", "netns", "exec", h0, "unshare", "--uts", "sh", "-c",
               'hostname "$1"; shift; exec "$@"', "sh", h0, str(BIN / "ccbench"), *SWEEP,
               "-r", "3", "--hosts", h0, h1, h2, "--out", str(out)]
        proc = subprocess.Popen(cmd, env={**net.env, "CCB_TEST_TAG": tag, "PYTHONUNBUFFERED": "1"},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pid, stopped = stop_after_sizes(proc, tag, 2, 2)
        ended, rc, err = wait_for_job_end(proc, tag, stopped)
        assert rc == 3, err
        # rank 2 runs on h2, where the launcher's board does not reach: only
        # its heartbeats, relayed by mpirun's daemon there, tell it apart
        check_stall(err, out, pid, 2, h2, [(0, h0), (1, h1)])
        assert ended < 5 + 5 + 2, ended
    finally:
        net.down()
