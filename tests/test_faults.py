"""Faults for real, as root (issue 17): device nodes and FIFOs at the output
path, symbolic links, read-only mounts, a full tmpfs, killed launchers,
memory limits.  Each ends in one line, the documented exit status, nothing
clobbered and the completed sizes reachable."""
import contextlib
import os
import signal
import stat
import subprocess
import time
import uuid

import pytest
import xarray as xr

from conftest import BIN, wait_until_gone
from ccbench_kit.cli import main
from ccbench_kit.dataset.checkpoint import pending_files
from ccbench_kit.launch.watchdog import processes_with_env

from test_bad_inputs import AR

SMALL_RUN = ["run", "all_reduce", "-r", "2", "-b", "8", "-e", "64", "-f", "2", "-n", "3",
             "-w", "0", "--non-interactive"]


@contextlib.contextmanager
def mounted(target, *opts):
    """``mount OPTS target``, unmounted in a finally; skips where the kernel refuses."""
    proc = subprocess.run(["mount", *opts, str(target)], capture_output=True, text=True)
    if proc.returncode:
        pytest.skip(f"the kernel refused `mount {' '.join(opts)}`: {proc.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


@contextlib.contextmanager
def tmpfs(path, size="2m"):
    path.mkdir()
    with mounted(path, "-t", "tmpfs", "-o", f"size={size}", "tmpfs"):
        yield path


@contextlib.contextmanager
def read_only(path):
    path.mkdir(exist_ok=True)
    with mounted(path, "--bind", str(path)):
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
        yield path


def one_line(capsys, rc, expected_rc, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == expected_rc, err
    assert len(err) == 1 and err[0].startswith("ccbench: error: "), err
    for n in needles:
        assert n in err[0], err[0]
    return err[0]


def cli(argv):
    try:
        return main([str(a) for a in argv])
    except SystemExit as e:
        return e.code


# -- the output path policy --------------------------------------------------------

WRITERS = [
    (["run", "all_reduce", "-b", "8", "--out"], "--out"),
    (["import", AR, "-o"], "-o/--out"),
    (["export", AR, "--csv"], "--csv"),
    (["report", AR, "-o"], "-o/--output"),
    (["compare", AR, AR, "--csv"], "--csv"),
    (["run", "all_reduce", "-b", "8", "--report-to-json-file"], "--report-to-json-file"),
]


@pytest.mark.parametrize("argv,flag", WRITERS, ids=[w[1] + ":" + w[0][0] for w in WRITERS])
def test_device_nodes_and_fifos_are_never_replaced(tmp_path, capsys, argv, flag):
    fifo = tmp_path / "fifo.html"
    os.mknod(fifo, 0o600 | stat.S_IFIFO)
    for target, kind in (("/dev/null", "a character device"), (fifo, "a FIFO")):
        rc = cli(argv + [target])
        one_line(capsys, rc, 2, flag, f"{target} is {kind}", "does not replace it")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_directories_and_file_parents_are_refused_before_the_run(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    rc = cli(SMALL_RUN + ["--out", tmp_path])
    one_line(capsys, rc, 2, f"--out: {tmp_path} is a directory; name a file inside it")
    rc = cli(SMALL_RUN + ["--out", tmp_path / "afile" / "x.nc"])
    one_line(capsys, rc, 2, f"{tmp_path / 'afile'} is a file, not a folder")
    rc = cli(["export", AR, "--aws-naming", tmp_path / "afile"])
    one_line(capsys, rc, 2, "--aws-naming", "exists and is not a folder")
    assert (tmp_path / "afile").read_text() == "x"


def test_a_symlink_is_written_through(tmp_path, capsys):
    target = tmp_path / "real.nc"
    target.write_text("old")
    link = tmp_path / "link.nc"
    link.symlink_to(target)
    assert cli(["import", AR, "-o", link]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert xr.open_dataset(target).attrs["collective"] == "all_reduce"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ccb-")] == []


def test_read_only_mount_is_refused_before_the_run(tmp_path, capsys):
    with read_only(tmp_path / "ro") as ro:
        for argv, flag in WRITERS:
            rc = cli(argv + [ro / "sub" / "x.html"])
            one_line(capsys, rc, 2, flag, f"{ro} is on a read-only file system")
        assert list(ro.iterdir()) == []


def test_no_room_is_refused_before_the_run(tmp_path, capsys):
    with tmpfs(tmp_path / "full") as full:
        subprocess.run(["dd", "if=/dev/zero", f"of={full / 'fill'}", "bs=64k"], capture_output=True)
        rc = cli(SMALL_RUN + ["--out", full / "x.nc"])
        one_line(capsys, rc, 2, f"--out: {full / 'x.nc'}: no room: about", "free on its file system")
        # a write that passes the check but finds no room: one line, nothing left behind
        rc = cli(["import", AR, "-o", full / "x.nc"])
        one_line(capsys, rc, 3, f"cannot write {full / 'x.nc'}: No space left on device")
        assert sorted(p.name for p in full.iterdir()) == ["fill"]


def test_full_disk_mid_run_rescues_every_size_without_a_crash(tmp_path):
    """The disk fills after the first size: no signal 11 (HDF5 never writes
    to disk), and the sizes done land in the rescue folder, named in the
    one line."""
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    with tmpfs(tmp_path / "full", size="4m") as full:
        out = full / "x.nc"
        argv = [str(BIN / "ccbench"), "run", "all_reduce", "-r", "2", "-b", "8", "-e", "256K",
                "-f", "2", "-n", "300", "-w", "0", "--non-interactive", "--checkpoint-every", "0",
                "--out", str(out)]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 120
        while not out.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        subprocess.run(["dd", "if=/dev/zero", f"of={full / 'fill'}", "bs=4k"], capture_output=True)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert "signal 11" not in err and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("ccbench: error: cannot write") and "No space left on device" in line
    rescued = next((state / "ccbench" / "rescue").iterdir())
    assert f"the results are safe in {rescued}: move them back with `mv {rescued} {out}`" in line
    ds = xr.open_dataset(rescued)
    assert ds.sizes["size"] >= 1 and ds.attrs["complete"] == "false"
    assert (ds["latency"] > 0).all()


# -- no orphans, and the sizes a killed launcher left are recoverable ------------------

def test_killed_launcher_leaves_no_process_and_recover_folds_its_sizes(tmp_path, capsys):
    tag = uuid.uuid4().hex
    out = tmp_path / "k.nc"
    env = {**os.environ, "CCB_TEST_TAG": tag}
    proc = subprocess.Popen([str(BIN / "ccbench"), "run", "all_reduce", "-r", "3", "-b", "8",
                             "-e", "64M", "-f", "2", "-n", "20", "--non-interactive",
                             "--out", str(out)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(pending_files(out)) < 2:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    assert len(processes_with_env("CCB_TEST_TAG", tag)) >= 4  # launcher, mpirun, 3 ranks
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_until_gone(tag)
    kept = len(pending_files(out))
    assert cli(["recover", out]) == 0
    assert f"# recovered {kept} sizes from {kept} sidecar files into {out}" in capsys.readouterr().out
    ds = xr.open_dataset(out)
    assert ds.sizes["size"] == kept and ds.attrs["complete"] == "false"
    assert list(ds["size"].values[:2]) == [8, 16]
    assert pending_files(out) == [] and not list(tmp_path.glob("k.nc.ccb-*"))


# -- resources before launch -------------------------------------------------------

def test_memory_limits_refuse_before_launch(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SLURM_MEM_PER_NODE", "300")  # MB: Slurm's share of this node
    rc = cli(SMALL_RUN + ["-r", "4", "--out", tmp_path / "x.nc"])
    one_line(capsys, rc, 2, "-r/--nworkers: 4 ranks on this host need about 512.0 MiB")
    monkeypatch.delenv("SLURM_MEM_PER_NODE")
    rc = cli(["run", "all_reduce", "-r", "2", "-b", "8", "-e", "1G", "-f", "2", "-n", "100000000",
              "--out", tmp_path / "x.nc"])
    one_line(capsys, rc, 2, "-n/--iters: the per-iteration results (2 ranks x 100000000 iterations"
             " x 28 sizes")
    assert not (tmp_path / "x.nc").exists()


def test_a_memory_cgroup_limit_is_seen(tmp_path):
    """The CLI in a memory cgroup of 400 MiB: 4 ranks do not fit, though
    MemAvailable is far larger."""
    v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    mount = "/sys/fs/cgroup" if v2 else "/sys/fs/cgroup/memory"
    with open("/proc/self/cgroup") as f:  # a child of our own cgroup, not the machine's root
        line = next((ln for ln in f.read().splitlines()
                     if (ln.startswith("0::") if v2 else ":memory:" in ln)), "::/")
    here = os.path.join(mount, line.split(":", 2)[2].lstrip("/"))
    base = here if os.path.isdir(here) else mount
    group = os.path.join(base, f"ccb-harden-{uuid.uuid4().hex[:8]}")
    try:
        os.mkdir(group)
    except OSError as e:
        pytest.skip(f"cannot create a memory cgroup here: {e}")
    try:
        with open(os.path.join(group, "memory.max" if v2 else "memory.limit_in_bytes"), "w") as f:
            f.write(str(400 << 20))

        def enter():
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        proc = subprocess.run([str(BIN / "ccbench"), *SMALL_RUN, "-r", "4", "--out",
                               str(tmp_path / "x.nc")], capture_output=True, text=True,
                              preexec_fn=enter, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "-r/--nworkers: 4 ranks on this host need about 512.0 MiB" in proc.stderr
    finally:
        os.rmdir(group)
