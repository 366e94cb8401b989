"""`ccbench doctor` on real "hosts" (network namespaces, Open MPI over TCP
between them): the whole matrix of an odd node count, the report page, and
bad input (one line, exit 2, nothing launched)."""
import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xarray as xr

from conftest import BIN
from test_multihost_netns import named_hosts


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    with named_hosts(3, tmp_path_factory.mktemp("doctor-netns"), "ccbdoc") as hosts:
        yield hosts


def test_matrix_of_three_nodes_with_report(net, tmp_path):
    out, html = tmp_path / "d.nc", tmp_path / "d.html"
    r = net.run(net.names[0], [BIN / "ccbench", "doctor", "--hosts", *net.names,
                               "--ranks-per-node", "1", "--repeats", "2", "--lat-iters", "10",
                               "--bw-size", "256K", "--bw-iters", "2", "--out", out,
                               "--report", html], timeout=400)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("verdict: "), r.stdout
    pairs = xr.open_dataset(out)
    # 3 nodes: 3 rounds of one pair (one node sits out each round), every
    # pair measured in both repeats, both tests
    assert list(pairs["algorithm"].values) == [f"{a}-{b}" for a, b in (
        (net.names[0], net.names[1]), (net.names[0], net.names[2]),
        (net.names[1], net.names[2]))]
    lat = pairs["latency"].isel(placement=0, rank=0)
    for rep in (0, 1):
        sel = lat.isel(iteration=np.flatnonzero(pairs["repeat"].values == rep))
        assert (sel.sel(size=8).count("iteration") == 10).all()
        assert (sel.sel(size=256 << 10).count("iteration") == 2).all()
    assert (lat > 0).sum() == lat.count()
    plan = json.loads(pairs.attrs["doctor_plan"])
    assert len(plan["waves"]) == 3 and json.loads(pairs.attrs["doctor_nodes"]) == net.names
    assert json.loads(pairs.attrs["doctor_verdict"])["line"] == last
    local = xr.open_dataset(out, group="local")
    assert list(local["algorithm"].values) == net.names
    assert (local["peak_GBps"] > 0).all()
    page = html.read_text()
    assert page.count("<img") >= 2 and last in page  # the matrices, the per-node bars


def test_doctor_on_dask_workers_across_hosts(net, tmp_path):
    """A Dask-MPI cluster over the three hosts (scheduler and a worker on the
    first, workers on the others): the check runs on its workers, one per
    node, and writes the same results as with --hosts."""
    h0, h1, h2 = net.names
    sched, out = tmp_path / "s.json", tmp_path / "d.nc"
    script = tmp_path / "doctor_dask.py"
    script.write_text(textwrap.dedent(f"""\
        import subprocess, sys
        from ccbench_kit.launch import cluster
        c = cluster.start(6, scheduler_file={str(sched)!r}, hosts=[{h0!r}, {h1!r}, {h2!r}],
                          interface="veth0", timeout=90)
        try:
            r = subprocess.run([{str(BIN / "ccbench")!r}, "doctor", "--scheduler-file",
                                {str(sched)!r}, "--repeats", "2", "--lat-iters", "10",
                                "--bw-size", "256K", "--bw-iters", "2", "--out", {str(out)!r}],
                               capture_output=True, text=True, timeout=300)
            print(r.stdout + r.stderr)
            print("EXIT", r.returncode)
        finally:
            print("STOP", c.stop())
        """))
    r = net.run(h0, [sys.executable, script], timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "STOP shut down" and lines[-2] in ("EXIT 0", "EXIT 1"), r.stdout
    last = [line for line in lines if line.startswith("verdict: ")]
    assert last, r.stdout
    last = last[-1]
    pairs = xr.open_dataset(out)
    assert json.loads(pairs.attrs["doctor_nodes"]) == [h0, h1, h2]
    assert json.loads(pairs.attrs["doctor_verdict"])["line"] == last
    assert json.loads(pairs.attrs["doctor_plan"])["ranks_per_node"] == 1
    lat = pairs["latency"].isel(placement=0, rank=0)
    assert lat.sel(size=8).count() == 3 * 2 * 10 and lat.sel(size=256 << 10).count() == 3 * 2 * 2
    local = xr.open_dataset(out, group="local")
    assert list(local["algorithm"].values) == [h0, h1, h2] and local.attrs["nranks"] == 1
    assert all(net.pids()[ns] == [] for ns in net.names)


@pytest.mark.parametrize("args, message", [
    (["--hosts", "a"], "--hosts: a health check compares nodes: it needs at least 2, got 1 (a)"),
    (["--hosts", "a", "b", "a"], "--hosts: host 'a' is listed twice"),
    (["--hosts", "a", "b", "-N", "3"],
     "-N/--nnodes: 3 nodes asked for but only 2 are there (a, b)"),
    (["--hosts", "a", "b", "--repeats", "0"], "--repeats: must be an integer >= 1, got 0"),
    (["--hosts", "a", "b", "c", "-N", "1"],
     "-N/--nnodes: a health check compares nodes: it needs at least 2, got 1 (a)"),
    (["--hosts", "a", "b", "--backend", "gloo"],
     "--backend: unknown backend 'gloo'; choose one of mpi, nccl, torch, tcp"),
    (["--hosts", "a", "b", "--baseline", "/nonexistent/base.json"],
     "--baseline: /nonexistent/base.json: no such baseline file"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    r = subprocess.run([str(BIN / "ccbench"), "doctor", *args, "--out", str(tmp_path / "x.nc")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr == f"ccbench: error: {message}\n"
    assert not (tmp_path / "x.nc").exists()


def test_a_host_that_does_not_answer_is_one_line(tmp_path):
    """A host name that does not resolve is bad input, found before any rank
    is started: one line naming it and the flag (not Open MPI's banner),
    exit 2, no results file (nothing ran), no verdict that names it."""
    host = "nosuchhost-ccbench.invalid"  # .invalid never resolves (RFC 6761)
    r = subprocess.run([str(BIN / "ccbench"), "doctor", "--hosts", host, "localhost",
                        "--repeats", "1", "--out", str(tmp_path / "x.nc")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines()[-1] == (
        f"ccbench: error: --hosts: 1 of 2 host names do not resolve to an address (or not "
        f"within 20 s): {host}"), r.stderr
    assert "verdict:" not in r.stdout
    assert not (tmp_path / "x.nc").exists()


def test_nccl_on_a_host_without_a_gpu_is_one_line_naming_backend(tmp_path):
    from ccbench_kit.backends.nccl import visible_gpus
    if visible_gpus()[0]:
        pytest.skip("this host has a GPU")
    r = subprocess.run([str(BIN / "ccbench"), "doctor", "--hosts", "a", "b", "--backend", "nccl",
                        "--out", str(tmp_path / "x.nc")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert re.fullmatch(r"ccbench: error: --backend: nccl needs a GPU on every node but this "
                        r"host has none \([^\n]+\); use --backend mpi on CPU nodes\n",
                        r.stderr), r.stderr
    assert not (tmp_path / "x.nc").exists()


def _shape(ns, rate_mbit):
    """`ns`'s egress to the switch shaped with tbf (None: unshaped).  Its
    queue holds 400 ms (5 MB at 100 Mbit/s), more than a 1 MiB message: with
    50 ms tbf dropped part of each burst, and TCP's recovery made the rate
    anywhere from 0.69 to 0.88 of the link from one run to the next."""
    if rate_mbit is None:
        subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", "veth0", "root"], check=False,
                       capture_output=True)
        return
    subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", "veth0", "root", "tbf", "rate",
                    f"{rate_mbit}mbit", "burst", "16k", "latency", "400ms"], check=True)


@pytest.mark.slow
@pytest.mark.measures
def test_a_pairs_busbw_is_ccbench_run_sendrecv_between_the_same_nodes(net, tmp_path):
    """--backend mpi runs the pair test through the kit's own backend: the
    pair's rate in the doctor is the busbw `ccbench run sendrecv` reports
    between the same two hosts, with the same Open MPI settings (both on a
    link shaped to 100 Mbit/s each way, so both measure the link)."""
    from ccbench_kit.backends.mpi import MPIBackend
    h0, h1 = net.names[:2]
    env = {**net.env, **MPIBackend.doctor_env(1 << 20)}
    on_h0 = lambda argv: subprocess.run(  # noqa: E731
        ["ip", "netns", "exec", h0, "unshare", "--uts", "sh", "-c",
         'hostname "$1"; shift; exec "$@"', "sh", h0, *map(str, argv)],
        capture_output=True, text=True, timeout=300, env=env)
    for ns in (h0, h1):
        _shape(ns, 100)
    try:
        d = on_h0([BIN / "ccbench", "doctor", "--hosts", h0, h1, "--backend", "mpi",
                   "--ranks-per-node", "1", "--repeats", "2", "--lat-iters", "5", "--bw-size",
                   "1M", "--bw-iters", "8", "--out", tmp_path / "d.nc"])
        r = on_h0([BIN / "ccbench", "run", "sendrecv", "--hosts", h0, h1, "-r", "2",
                   "--ranks-per-node", "1", "-b", "1M", "-e", "1M", "-w", "2", "-n", "8",
                   "--out", tmp_path / "r.nc"])
    finally:
        for ns in (h0, h1):
            _shape(ns, None)
    assert d.returncode in (0, 1), d.stdout + d.stderr
    assert "note: measured through --backend mpi (asked for)" in d.stdout
    assert r.returncode == 0, r.stdout + r.stderr
    pairs, run = xr.open_dataset(tmp_path / "d.nc"), xr.open_dataset(tmp_path / "r.nc")
    assert pairs.attrs["backend"] == run.attrs["backend"] == "mpi"
    doctor_bw = float(pairs.ccb.busbw("median").sel(size=1 << 20, placement="out_of_place")
                      .isel(algorithm=0))
    run_bw = float(run.ccb.busbw("median").sel(size=1 << 20, placement="out_of_place")
                   .isel(algorithm=0))
    link = 100e6 / 8 / 1e9  # GB/s
    print(f"pair busbw: doctor {doctor_bw * 8e3:.1f} Mbit/s, ccbench run sendrecv "
          f"{run_bw * 8e3:.1f} Mbit/s (link 100)")
    # both went through the shaped link, none around it (namespace to
    # namespace unshaped is tens of times faster).  Two measurements taken
    # one after the other on a TCP link are not compared with each other:
    # through tbf they read 0.69-0.91 of the link from one run to the next
    # (a fresh clone, 2026-11-28: the doctor 0.91, the run 0.76)
    for bw in (doctor_bw, run_bw):
        assert 0.5 * link < bw < 1.02 * link, (doctor_bw, run_bw, link)
    # ... and the pair's figure is what `ccbench run sendrecv` reports: the
    # same collective, ranks, bus factor and size, each file's busbw by the
    # one accessor over its own iterations (the backend's, asserted above)
    assert pairs.attrs["collective"] == run.attrs["collective"] == "sendrecv"
    assert pairs.ccb.nranks == run.ccb.nranks == 2
    assert pairs.ccb.bus_factor == run.ccb.bus_factor
