"""The nccl backend on real GPUs: every collective checked against numpy,
NCCL's algorithms and refusals, timing modes and buffer kinds.

Each test is one mpirun of one process per GPU (2 at least) that runs many
in-process sweeps, so that NCCL start-up is paid few times.  Skipped where
there is no NCCL or fewer than 2 GPUs; `bench/gpu_issue4.sh` runs them on
the device machine.
"""
import json
import os
import textwrap

import pytest

from ccbench_kit.launch.mpirun import mpirun_command, mpirun_env


def _gpus():
    try:
        from ccbench_kit import _nccl
        from ccbench_kit.backends.nccl_lib import locate
        cudart, nccl = locate()
        return _nccl.Library(cudart, nccl).device_count()
    except Exception as e:  # no NCCL, no CUDA runtime, no driver
        return f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"


_N = _gpus()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not isinstance(_N, int) or _N < 2,
    reason=f"needs NCCL and 2+ GPUs ({_N if not isinstance(_N, int) else f'{_N} GPU(s)'})")]
NRANKS = _N if isinstance(_N, int) else 0


def _mpirun(body, timeout=420):
    """Run `body` in every rank (after a prelude) and return rank 0's JSON."""
    return _mpirun_n(NRANKS, body, timeout)


def _mpirun_n(nranks, body, timeout=420):
    """`_mpirun` on `nranks` ranks."""
    import subprocess
    import sys
    code = textwrap.dedent("""
        import json, math, sys
        import numpy as np
        from mpi4py import MPI
        import ccbench_kit
        from ccbench_kit import collectives
        rank = MPI.COMM_WORLD.Get_rank()
        out = {}
    """) + textwrap.dedent(body) + textwrap.dedent("""
        if rank == 0:
            print("@@RESULT " + json.dumps(out, default=str), flush=True)
    """)
    env = mpirun_env()
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    import signal
    proc = subprocess.Popen(mpirun_command(nranks, [sys.executable, "-c", code]), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:  # take the ranks down too, and say where it stopped
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"no result in {timeout} s:\n{stdout[-3000:]}\n{stderr[-3000:]}")
    p = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    line = next((ln for ln in p.stdout.splitlines() if "@@RESULT " in ln), None)
    assert p.returncode == 0 and line, f"rc {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return json.loads(line.split("@@RESULT ", 1)[1])


def test_every_collective_matches_numpy_fp32_bf16():
    res = _mpirun("""
        from ccbench_kit.backends.nccl import nccl_algorithms
        # sizes: one element per rank, a count no rank count divides, 1 MiB + 4, 64 MiB
        sizes = [16, 1000 * 4 * 3 + 4, (1 << 20) + 4, 8 << 20]
        for coll in collectives.NAMES:
            algs = nccl_algorithms(coll)
            if not algs:
                continue
            algs = [a for a in algs if a in ("nccl", "nccl:p2p")]
            for dt in ("fp32", "bf16"):
                try:
                    ds = ccbench_kit.run(coll, sizes=sizes, algorithms=algs, dtype=dt,
                                         check="random", seed=7, backend="nccl", warmup=1, iters=3)
                except Exception as e:  # the same on every rank: report it, go on
                    out[f"{coll}/{dt}"] = {"error": f"{type(e).__name__}: {e}"}
                    continue
                if rank == 0:
                    lat = ds["latency"].sel(algorithm=algs[0])
                    out[f"{coll}/{dt}"] = {
                        "wrong": ds["wrong"].values.tolist(),
                        "finite": [bool(np.isfinite(lat.sel(placement=p).values).all())
                                   for p in ("out_of_place", "in_place")],
                        "sizes": ds["size"].values.tolist(),
                        "not_available": ds.attrs.get("not_available"),
                        "device": ds["device"].values.tolist()}
    """)
    assert res, "no collective has an nccl algorithm"
    from ccbench_kit.backends.nccl import NO_IN_PLACE
    bad = {}
    for k, v in res.items():
        if "error" in v:
            bad[k] = v
            continue
        coll = k.split("/")[0]
        finite_oop, finite_ip = v["finite"]
        if not finite_oop:
            bad[k] = v
        for out_of_place, in_place in v["wrong"]:
            if any(w != 0 for w in out_of_place):
                bad[k] = v
            if coll in NO_IN_PLACE:  # NCCL has none: not run, not checked
                if in_place != [-1] * len(in_place) or finite_ip:
                    bad[k] = v
            elif any(w != 0 for w in in_place) or not finite_ip:
                bad[k] = v
    assert not bad, json.dumps(bad, indent=1)
    for k, v in res.items():
        assert len(set(v["device"])) == NRANKS, f"{k}: ranks share a GPU: {v['device']}"


def test_all_reduce_ops_dtypes_and_forced_algorithms():
    res = _mpirun("""
        from ccbench_kit.backends.nccl import NCCL_DTYPES
        # every NCCL dtype with sum; every op on a float, bf16 and an integer
        cases = [(d, "sum") for d in NCCL_DTYPES]
        cases += [(d, op) for d in ("fp32", "bf16", "int32") for op in ("prod", "min", "max", "avg")]
        for dt, op in cases:
            ds = ccbench_kit.run("all_reduce", sizes=[4096 + 8 * 3], dtype=dt, op=op,
                                 check="random", seed=3, backend="nccl", algorithms="nccl",
                                 warmup=0, iters=1, placement="in_place")
            if rank == 0:
                out[f"{dt}/{op}"] = int(ds["wrong"].values.max())
        algs = ["nccl", "nccl:ring", "nccl:tree", "nccl:ring/ll", "nccl:ring/ll128",
                "nccl:ring/simple", "nccl:tree/ll", "nccl:pat"]
        ds = ccbench_kit.run("all_reduce", sizes=[8, 1 << 20, 64 << 20], algorithms=algs,
                             check="random", seed=5, backend="nccl", warmup=1, iters=2)
        if rank == 0:
            out["forced"] = {"wrong": ds["wrong"].values.tolist(),
                             "lat": np.nanmax(ds["latency"].values, axis=(1, 3, 4)).tolist(),
                             "ran": json.loads(ds.attrs["nccl_ran"]),
                             "not_available": json.loads(ds.attrs["not_available"]),
                             "algorithms": ds["algorithm"].values.tolist()}
    """)
    forced = res.pop("forced")
    assert all(w == 0 for w in res.values()), {k: w for k, w in res.items() if w}
    algs = forced["algorithms"]
    na, ran = forced["not_available"], forced["ran"]
    # NCCL has no PAT all_reduce: every size refused, with NCCL's reason, NaN times, unchecked
    assert set(na) == {"nccl:pat"} and len(na["nccl:pat"]) == 3, na
    assert all("no algorithm/protocol available" in r for r in na["nccl:pat"].values()), na
    ipat = algs.index("nccl:pat")
    assert all(v != v for v in forced["lat"][ipat])
    assert forced["wrong"][ipat] == [[-1] * 3] * 2
    for i, alg in enumerate(algs):
        if alg != "nccl:pat":
            assert all(w == 0 for p in forced["wrong"][i] for w in p), alg
            assert all(v > 0 for v in forced["lat"][i]), alg
    # what NCCL ran is what was forced
    for alg, want in (("nccl:ring", "RING"), ("nccl:tree", "TREE"), ("nccl:ring/ll", "RING/LL"),
                      ("nccl:ring/ll128", "RING/LL128"), ("nccl:ring/simple", "RING/SIMPLE"),
                      ("nccl:tree/ll", "TREE/LL")):
        got = ran[alg]
        assert len(got) == 3 and all(v.upper().startswith(want) for v in got.values()), (alg, got)
    assert len(ran["nccl"]) == 3 and all(ran["nccl"].values())


TIMING_RUNS = {
    "events": dict(timing="cuda-events"),
    "batch": dict(timing="batch"),
    "graph": dict(timing="graph", backend_options={"graph_launches": 3}),
    "cumem_registered": dict(timing="cuda-events", backend_options={
        "mem_type": "ncclMemAlloc", "register": True}),
    "blocking": dict(timing="cuda-events", blocking=3),
    "blocking_call_barrier": dict(timing="cuda-events", blocking=1),
    "blocking_call_wait": dict(timing="batch", blocking=2),
    "cputime": dict(timing="host-enqueue", report_cputime=True),
    "unique_buff": dict(timing="batch", unique_buff=True),
}


@pytest.mark.parametrize("name", list(TIMING_RUNS))
def test_timing_modes_and_buffer_kinds(name):
    kw = TIMING_RUNS[name]
    r = _mpirun(f"""
        ds = ccbench_kit.run("all_reduce", sizes=[8, 1 << 20, 64 << 20], algorithms="nccl",
                             check="random", seed=11, backend="nccl", warmup=2, iters=5, **{kw!r})
        if rank == 0:
            lat = ds["latency"].sel(placement="out_of_place").values
            out = {{"wrong": ds["wrong"].values.tolist(), "timing": ds.attrs["timing"],
                   "mem_type": ds.attrs["mem_type"], "register": ds.attrs["register"],
                   "graph_launches": ds.attrs["graph_launches"],
                   "min": float(np.min(lat)), "busbw": ds.ccb.busbw().values.tolist(),
                   "distinct_iters": int(len(np.unique(lat[0, -1, 0])))}}
    """, timeout=150)
    assert all(w == 0 for a in r["wrong"] for p in a for w in p), r
    assert r["min"] > 0, r
    assert r["timing"] == kw["timing"]
    opts = kw.get("backend_options", {})
    assert r["mem_type"] == opts.get("mem_type", "cudaMalloc")
    assert r["register"] == ("true" if opts.get("register") else "false")
    assert int(r["graph_launches"]) == opts.get("graph_launches", 1)
    # per-iteration events give each iteration its own time, as do the host
    # clock around each enqueue and the -z loops; batch and graph the mean
    if kw["timing"] in ("cuda-events", "host-enqueue") or kw.get("blocking"):
        assert r["distinct_iters"] > 1, r
    else:
        assert r["distinct_iters"] == 1, r
    # 64 MiB over NVLink: well above PCIe speeds in every mode
    assert r["busbw"][0][0][-1] > 50, r["busbw"]


def test_dataset_records_gpus_topology_and_env():
    res = _mpirun("""
        ds = ccbench_kit.run("all_gather", sizes=[1 << 20], algorithms="nccl", backend="nccl",
                             warmup=1, iters=2)
        if rank == 0:
            out = {k: ds.attrs.get(k) for k in ("library", "nccl_version", "gpus", "topology",
                                                 "env", "timing", "nccl_library")}
            out["device"] = ds["device"].values.tolist()
    """)
    gpus = json.loads(res["gpus"])
    assert len(gpus) == NRANKS and all(g["memory_bytes"] > 1 << 30 for g in gpus)
    assert len({g["pci_bus_id"] for g in gpus}) == NRANKS
    assert res["library"].startswith("NCCL 2.") and res["nccl_version"].startswith("2.")
    topo = json.loads(res["topology"])
    assert topo.get("matrix") or topo.get("nvidia_smi_topo"), topo
    assert json.loads(res["env"]).get("NCCL_NVLS_ENABLE") == "0"
    assert res["timing"] == "cuda-events" and os.path.basename(res["nccl_library"]).startswith("libnccl")
    assert all("cuda:" in d for d in res["device"])
