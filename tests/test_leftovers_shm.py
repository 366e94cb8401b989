"""Open MPI's shared-memory segments of a stopped job are removed, and only
its own (issue 37): a real run stopped with SIGINT leaves none of its job
family in /dev/shm, while a segment of another family, another user's
name and other files there stay.  The doctor stops its ranks through the
same `run_ranks`, so it is the same code."""
import os
import signal
import subprocess
import time

from conftest import BIN
from ccbench_kit.launch import leftovers, mpi_impl


def _segments(directory, family):
    uid = os.geteuid()
    return sorted(n for n in os.listdir(directory)
                  if (n.startswith("vader_segment.") or n.startswith("sm_segment."))
                  and n.split(".")[-3] == str(uid) and int(n.split(".")[-2], 16) >> 16 == family)


def test_remove_segments_takes_only_its_own_family(tmp_path):
    uid = os.geteuid()
    mine = [f"vader_segment.node-1.{uid}.4e450001.0", f"vader_segment.node-1.{uid}.4e450001.1",
            f"vader_segment.h4.{uid}.4e450002.0", f"sm_segment.node-1.{uid}.4e450003.0"]
    others = [f"vader_segment.node-1.{uid}.4e460001.0",      # another family
              f"vader_segment.node-1.{uid + 1}.4e450001.0",  # another user's name
              "vader_segment.node-1.junk", "4e450001", "psm2_shm.4e450001"]
    for n in mine + others:
        (tmp_path / n).write_bytes(b"x")
    removed = leftovers.remove_segments(0x4e45, str(tmp_path))
    assert sorted(os.path.basename(p) for p in removed) == sorted(mine)
    assert sorted(os.listdir(tmp_path)) == sorted(others)
    assert leftovers.remove_segments(None, str(tmp_path)) == []


def test_a_killed_launchers_noted_family_names_the_segments_its_sweep_removes(tmp_path,
                                                                             monkeypatch):
    """mpirun, taken down by a SIGKILLed launcher's lifeline, removes its own
    session folder; the family the launcher noted in its run folder is then
    what names the segments left.  Its host file goes too.  A live
    launcher's folder and host file, and other families' segments, stay."""
    uid = os.geteuid()
    shm, tmp = tmp_path / "shm", tmp_path / "tmp"
    shm.mkdir()
    tmp.mkdir()
    monkeypatch.setenv("OMPI_MCA_btl_vader_backing_directory", str(shm))
    dead = subprocess.Popen(["true"])
    dead.wait()
    session = tmp / f"ompi.node-1.{uid}" / f"pid.{os.getpid()}"  # this process: a live mpirun
    session.mkdir(parents=True)
    (session / "contact.txt").write_text(f"{0x4e45 << 16}.0;tcp://127.0.0.1:1\n")
    gone_run = tmp / f"ccbench-run-{dead.pid}-abc"
    live_run = tmp / f"ccbench-run-{os.getpid()}-def"
    gone_run.mkdir()
    live_run.mkdir()
    assert leftovers.note_family(str(gone_run), os.getpid()) == 0x4e45
    assert leftovers.note_family(str(live_run), os.getpid()) == 0x4e45
    assert leftovers.note_family(str(live_run), dead.pid) is None  # no session folder
    segments = [f"vader_segment.node-1.{uid}.4e450001.{k}" for k in range(3)]
    other = f"vader_segment.node-1.{uid}.4e460001.0"
    for n in segments + [other]:
        (shm / n).write_bytes(b"x")
    # host files (`command.Launcher`) are named as run folders are
    gone_hosts = tmp / f"ccbench-run-{dead.pid}-hosts-x1.txt"
    live_hosts = tmp / f"ccbench-run-{os.getpid()}-hosts-x2.txt"
    gone_hosts.write_text("n1\nn2\n")
    live_hosts.write_text("n1\nn2\n")
    removed = leftovers.sweep(str(tmp))
    assert sorted(removed) == sorted([str(shm / n) for n in segments]
                                     + [str(gone_run), str(gone_hosts)])
    assert sorted(os.listdir(shm)) == [other] and live_run.exists() and session.exists()
    assert live_hosts.exists()


def test_job_family_is_read_from_the_mpiruns_session_folder(tmp_path):
    session = tmp_path / f"ompi.node-1.{os.geteuid()}" / "pid.4242"
    session.mkdir(parents=True)
    # Open MPI 4.1's contact.txt: the mpirun's jobid.vpid, then its URIs
    (session / "contact.txt").write_text("1313144832.0;tcp://10.0.0.1:52799\n4242\n")
    assert leftovers.job_family(4242, str(tmp_path)) == 0x4e45
    assert leftovers.job_family(4243, str(tmp_path)) is None
    (session / "contact.txt").write_text("garbage")
    assert leftovers.job_family(4242, str(tmp_path)) is None


def _mpirun_child(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def test_a_run_stopped_with_sigint_leaves_no_segment_of_its_job(tmp_path):
    if mpi_impl.family() != mpi_impl.OPEN_MPI:
        import pytest
        pytest.skip("Open MPI's segments")
    shm = leftovers.shm_directory()
    proc = subprocess.Popen([str(BIN / "ccbench"), "run", "all_reduce", "-r", "3", "-b", "8",
                             "-e", "64M", "-f", "2", "-n", "20", "--non-interactive", "--out",
                             str(tmp_path / "k.nc")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    family, seen, decoy = None, [], None
    deadline = time.monotonic() + 120
    try:
        while not seen:   # the ranks are up and have made their segments
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            for child in _mpirun_child(proc.pid):
                family = family or leftovers.job_family(child)
            seen = _segments(shm, family) if family is not None else []
            time.sleep(0.1)
        # a neighbouring family's segment (another job's) must stay
        decoy = os.path.join(shm, f"vader_segment.ccbtest.{os.geteuid()}."
                                  f"{((family ^ 1) << 16) | 1:x}.0")
        with open(decoy, "wb") as f:
            f.write(b"x")
        proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=60)[1]
        assert proc.returncode == 130, err
        assert err.splitlines()[-1].startswith("ccbench: error: interrupted by SIGINT"), err
        assert _segments(shm, family) == [], seen
        assert os.path.exists(decoy)
    finally:
        if proc.poll() is None:
            proc.kill()
        if decoy and os.path.exists(decoy):
            os.unlink(decoy)


def test_a_launchers_host_file_is_named_as_its_run_folder_and_goes_with_it(tmp_path):
    from ccbench_kit.launch.command import Launcher
    launcher = Launcher(4, hosts=["localhost"], ranks_per_node=4)
    path = launcher._hostfile
    assert os.path.basename(path).startswith(leftovers.run_prefix() + "hosts-")
    assert open(path).read() == "localhost\n"
    del launcher
    assert not os.path.exists(path)
