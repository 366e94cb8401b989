"""Hung ranks, dead ranks, interrupts and oversize: the run ends fast, names
what went wrong, keeps what was measured, and leaves no process behind."""
import os
import signal
import subprocess
import time
import uuid

import pytest
import xarray as xr

from conftest import BIN, run_cli
from ccbench_kit.dataset.checkpoint import pending_files
from ccbench_kit.launch.watchdog import processes_with_env

SWEEP = ["run", "all_reduce", "-r", 3, "-b", 64, "-e", "64K", "-f", 8, "--algorithms", "ring",
         "-n", 5, "-w", 1, "--non-interactive"]


def tagged_env(**extra):
    tag = uuid.uuid4().hex
    return tag, {**os.environ, "CCB_TEST_TAG": tag, **extra}


def assert_no_leftovers(tag):
    for _ in range(20):  # mpirun's children may take a moment to be reaped
        left = processes_with_env("CCB_TEST_TAG", tag)
        if not left:
            return
        time.sleep(0.25)
    raise AssertionError(f"processes left behind: {left}")


def sizes_kept(out):
    """Sizes in the results file plus those rank 0 kept beside it."""
    n = xr.open_dataset(out).sizes["size"] if out.exists() else 0
    return n + len(pending_files(out))


def assert_partial(out, nsizes, reason):
    # the sizes kept beside the file (--checkpoint-every) are folded into it
    assert pending_files(out) == []
    ds = xr.open_dataset(out)
    assert ds.attrs["complete"] == "false"
    assert reason in ds.attrs["incomplete_reason"]
    assert list(ds["size"].values) == [64, 512][:nsizes]
    assert list(ds["count"].values) == [16, 128][:nsizes]  # fp32 all_reduce
    assert list(ds["in_bytes"].values) == [64, 512][:nsizes]
    assert ds["latency"].notnull().all() and ds["start"].notnull().all()
    assert (ds["latency"] > 0).all() and ds.sizes["rank"] == 3


def test_killed_rank_is_named_and_earlier_sizes_kept(tmp_path):
    tag, env = tagged_env(CCB_FAULT_INJECT="kill:1:4096")
    out = tmp_path / "k.nc"
    proc = run_cli(*SWEEP, "--timeout", 5, "--out", out, env=env, timeout=120)
    assert proc.returncode != 0
    assert "rank 1 on host" in proc.stderr and "died (signal 9)" in proc.stderr
    assert f"Results for the 2 sizes done before are in {out}" in proc.stderr
    assert "Traceback" not in proc.stderr
    # the launcher saw the death itself: the job was not left to the watchdog's
    # --timeout (a wall-clock bound here failed on a loaded machine)
    assert "timeout:" not in proc.stderr and "did not arrive" not in proc.stderr
    assert_partial(out, 2, "rank 1 on host")
    assert_no_leftovers(tag)


def test_hung_rank_is_named_within_timeout(tmp_path):
    tag, env = tagged_env(CCB_FAULT_INJECT="hang:2:4096")
    out = tmp_path / "h.nc"
    proc = subprocess.Popen([str(BIN / "ccbench"), *map(str, SWEEP), "--timeout", "4", "--out", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3
    # the hang starts at the third size; it must be caught within timeout + 5 s of it
    assert "timeout: rank 2 (host " in err
    assert "did not arrive at all_reduce/ring (out-of-place) at size 4096 B" in err
    assert "within 4 s" in err or "within 5 s" in err
    assert_partial(out, 2, "timeout: rank 2")
    assert_no_leftovers(tag)


@pytest.mark.parametrize("every", ["0", "default"])
def test_sigterm_saves_and_exits_cleanly(tmp_path, every):
    """With --checkpoint-every 0 the file holds every size as it is done; by
    default the second size waits beside it, and is folded in at the end."""
    tag, env = tagged_env(CCB_FAULT_INJECT="hang:0:4096")
    out = tmp_path / "t.nc"
    argv = [str(BIN / "ccbench"), *map(str, SWEEP), "--out", str(out)]
    argv.remove("--non-interactive")
    if every != "default":
        argv += ["--checkpoint-every", every]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while sizes_kept(out) < 2:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err  # SIGTERM (errors.EXIT_SIGTERM)
    assert "interrupted by SIGTERM" in err
    assert_partial(out, 2, "interrupted by SIGTERM")
    assert_no_leftovers(tag)


def test_oversize_stops_with_earlier_sizes_saved(tmp_path):
    out = tmp_path / "m.nc"
    proc = run_cli("run", "all_reduce", "-r", 2, "-b", "1M", "-e", "1T", "-f", 1 << 20,
                   "-n", 2, "-w", 0, "--non-interactive", "--out", out)
    assert proc.returncode == 3
    err = proc.stderr.strip()
    assert "size 1099511627776 B needs about" in err and "per host (2 ranks) but only" in err
    assert "--skip-oversize" in err
    assert xr.open_dataset(out)["size"].values.tolist() == [1 << 20]

    proc = run_cli("run", "all_reduce", "-r", 2, "-b", "1M", "-e", "1T", "-f", 1 << 20,
                   "-n", 2, "-w", 0, "--non-interactive", "--skip-oversize", "--out", out)
    assert proc.returncode == 0, proc.stderr
    ds = xr.open_dataset(out)
    assert ds.attrs["complete"] == "true"
    assert ds.attrs["skipped_oversize"] == "[1099511627776]"
    assert list(tmp_path.glob("m.nc.ccb-*")) == []  # no sidecar or template left


def test_loading_a_newer_schema_version_is_refused(tmp_path):
    from ccbench_kit.dataset import SchemaError, load
    path = tmp_path / "v4.nc"
    xr.Dataset(attrs={"schema": "ccbench/4"}).to_netcdf(path, engine="h5netcdf")
    with pytest.raises(SchemaError, match=r"schema ccbench/4 is newer than this kit reads \(newest ccbench/3\)"):
        load(path)
    proc = run_cli("show", path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_ranks_with_different_configurations_refuse_to_start(tmp_path):
    tag, env = tagged_env(CCB_FAULT_INJECT="config:2")
    proc = run_cli(*SWEEP, "--out", tmp_path / "c.nc", env=env, timeout=120)
    assert proc.returncode == 3
    assert "ranks [2] parsed a different configuration than rank 0" in proc.stderr
    assert "No size had completed, so no results were saved" in proc.stderr
    assert_no_leftovers(tag)


def test_a_failed_run_leaves_an_earlier_results_file_alone(tmp_path):
    out = tmp_path / "old.nc"
    from test_security import tiny_dataset
    from ccbench_kit.dataset import io
    io.save(tiny_dataset(), out)
    before = out.read_bytes()
    tag, env = tagged_env(CCB_FAULT_INJECT="kill:1:64")
    proc = run_cli(*SWEEP, "--out", out, env=env, timeout=120)
    assert proc.returncode == 3
    assert "No size had completed, so no results were saved" in proc.stderr
    assert out.read_bytes() == before
    assert_no_leftovers(tag)


def test_a_failed_check_exits_4_with_both_tools_lines_and_keeps_every_size(tmp_path):
    """Rank 1 reads back every checked output with one element changed (a
    corrupting fabric): the run still times and saves every size, prints
    nccl-tests' and nccom-test's failure lines and exits 4, as a CI or a
    Slurm prolog needs to tell it from a healthy run."""
    from ccbench_kit.errors import EXIT_CHECK_FAILED
    tag, env = tagged_env(CCB_FAULT_INJECT="corrupt:1")
    out = tmp_path / "w.nc"
    proc = run_cli(*SWEEP, "-e", 4096, "--check", "--out", out, env=env, timeout=120)
    assert proc.returncode == EXIT_CHECK_FAILED == 4, proc.stderr
    lines = proc.stdout.splitlines()
    # three sizes x one algorithm x two placements, each wrong on rank 1
    assert "# Out of bounds values : 6 FAILED" in lines
    assert lines[-1] == "6 errors found - test failed"
    assert "Traceback" not in proc.stderr
    ds = xr.open_dataset(out)
    assert ds.attrs["complete"] == "true"
    assert list(ds["size"].values) == [64, 512, 4096]
    # one element wrong on rank 1 (all_reduce: also differs from rank 0's output)
    assert (ds["wrong"].values == 2).all()
    assert sorted(p.name for p in tmp_path.glob("w.check-*")) == sorted(
        f"w.check-all_reduce-ring-{p}-{s}B-rank1.npz"
        for s in (64, 512, 4096) for p in ("in_place", "out_of_place"))
    assert_no_leftovers(tag)


def test_a_passed_check_says_ok_and_exits_0(tmp_path):
    """nccl-tests' spelling -c 1 checks as the bare -c does."""
    proc = run_cli("run", "all_reduce", "-r", 3, "-b", 64, "-e", 64, "-n", 2, "-w", 0,
                   "-c", "1", "--non-interactive", "--out", tmp_path / "ok.nc")
    assert proc.returncode == 0, proc.stderr
    assert "# Out of bounds values : 0 OK" in proc.stdout.splitlines()
    assert "errors found" not in proc.stdout
    assert xr.open_dataset(tmp_path / "ok.nc").attrs["check"] == "random"
