"""The torch backend (backends/torch_dist.py) on CPU ranks: gloo process
groups built from the kit's MPI world, every collective torch has checked
against the collectives' golden results on 4, 3 (and 1) and 2 ranks, the
refusals in one line, and a run without torch naming the extra.

One mpirun of 4 ranks runs every sweep in-process: 4 ranks on COMM_WORLD
(``ccbench_kit.run``), 3 ranks and the fourth alone on a split
communicator (the harness's `Sweep`), and two replica groups of 2 (each
its own process group), so torch is imported 4 times for 130-odd sweeps.
"""
import json
import os
import subprocess
import sys
import sysconfig
import textwrap

import importlib.util

import pytest

from conftest import mpirun_python
from ccbench_kit import backends
from ccbench_kit.api import make_config
from ccbench_kit.errors import ConfigError

# more than ~20 s in all: the module starts first under `make test` (conftest)
pytestmark = pytest.mark.slow

# every test but the last needs torch (make setup installs the CPU build)
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="the torch extra is not installed")

SIZES = [24, 1004, 13340]   # bytes: none divides evenly by every rank count
# each collective's data type and op: bit patterns (bf16), floats, integers
PLAN = {"all_reduce": ("bf16", "sum"), "reduce_scatter": ("int32", "max"),
        "reduce": ("fp64", "prod"), "all_gather": ("int8", None), "alltoall": ("int64", None),
        "alltoallv": ("fp32", None), "broadcast": ("uint8", None), "gather": ("fp16", None),
        "scatter": ("int32", None), "sendrecv": ("fp32", None), "permute": ("int32", None)}
ROOTED = ("broadcast", "reduce", "gather", "scatter")
NO_IN_PLACE = ("alltoall", "alltoallv", "sendrecv", "permute")

CODE = textwrap.dedent("""
    import json
    from mpi4py import MPI
    import numpy as np
    import ccbench_kit
    from ccbench_kit.api import make_config
    from ccbench_kit.errors import ConfigError
    from ccbench_kit.harness import Sweep

    PLAN, SIZES, ROOTED = {plan}, {sizes}, {rooted}
    world = MPI.COMM_WORLD
    me = world.Get_rank()
    out = {{}}

    def record(label, coll, ds):
        out[f"{{label}}/{{coll}}"] = {{
            "wrong": ds["wrong"].values.tolist(), "counts": ds["count"].values.tolist(),
            "measured": ds["latency"].notnull().all(["rank", "iteration"]).values.tolist(),
            "attrs": {{k: ds.attrs.get(k) for k in ("backend", "library", "timing",
                      "torch_process_group", "torch_calls", "not_available", "torch_version",
                      "torch_rendezvous", "nranks", "blocking_mode")}},
            "devices": ds["device"].values.tolist()}}

    for coll, (dtype, op) in PLAN.items():
        kw = dict(sizes=SIZES, backend="torch", check="random", seed=7, dtype=dtype, warmup=0,
                  iters=2, **({{"op": op}} if op else {{}}), **({{"root": 1}} if coll in ROOTED else {{}}))
        pairs = {{"src_target_pairs": [[0, 2], [2, 0], [1, 1], [3, 3]]}} if coll == "permute" else {{}}
        ds = ccbench_kit.run(coll, **kw, **pairs)
        if me == 0:
            record("4", coll, ds)
        sub = world.Split(0 if me < 3 else 1, me)   # 3 ranks, and rank 3 alone
        p = sub.Get_size()
        ds = Sweep(sub, make_config(coll, p, **dict(kw, root=min(1, p - 1)) if coll in ROOTED
                                    else kw)).run()
        if sub.Get_rank() == 0:
            record(str(p), coll, ds)
        sub.Free()
        ds = ccbench_kit.run(coll, **kw, replica_groups=[[0, 1], [2, 3]])
        if me == 0:
            record("2x2", coll, ds)
    # avg: on floats, and refused on integers (gloo divides in place); batch timing
    for dtype in ("fp32", "int32"):
        ds = ccbench_kit.run("all_reduce", sizes=[1004], backend="torch", check="random", seed=3,
                             dtype=dtype, op="avg", warmup=1, iters=3, timing="batch")
        if me == 0:
            record(f"4-avg-batch-{{dtype}}", "all_reduce", ds)
            out[f"batch_latency_{{dtype}}"] = ds["latency"].values.tolist()
    # last: it leaves the process group of the refused run behind
    try:
        ccbench_kit.run("all_reduce", sizes=[8], backend="torch", algorithms=["torch", "torch:graph"])
    except ConfigError as e:
        out["graph_refusal"] = str(e)
    got = world.gather(out, root=0)
    if me == 0:
        print("@@" + json.dumps({{k: v for d in got for k, v in d.items()}}), flush=True)
""")


@pytest.fixture(scope="module")
def torch():
    import torch
    return torch


@pytest.fixture(scope="module")
def sweeps():
    code = CODE.format(plan=repr(PLAN), sizes=repr(SIZES), rooted=repr(ROOTED))
    p = mpirun_python(4, code, timeout=600)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@")), None)
    assert p.returncode == 0 and line, p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads(line[2:])


def _counts(coll, size, itemsize, p):
    """Elements per call, by hand: split collectives round down to p blocks."""
    if coll in ("all_reduce", "reduce", "broadcast", "sendrecv", "permute"):
        return size // itemsize
    return size // itemsize // p


ITEMSIZE = {"bf16": 2, "int32": 4, "fp64": 8, "int8": 1, "int64": 8, "fp32": 4, "uint8": 1,
            "fp16": 2}


@needs_torch
@pytest.mark.parametrize("label,p", [("4", 4), ("3", 3), ("2x2", 2), ("1", 1)])
def test_every_collective_matches_its_golden_result(sweeps, torch, label, p):
    for coll, (dtype, _op) in PLAN.items():
        r = sweeps[f"{label}/{coll}"]
        item = ITEMSIZE[dtype]
        want = [c for c in (_counts(coll, s, item, p) for s in SIZES) if c >= 1]
        assert r["counts"] == want, (label, coll)
        in_place = coll not in NO_IN_PLACE
        # checked on every size; in place too where torch has the form (-1: not run)
        assert r["wrong"] == [[[0] * len(want), [0 if in_place else -1] * len(want)]], (label, coll)
        assert r["measured"] == [[[True] * len(want), [in_place] * len(want)]], (label, coll)
        a = r["attrs"]
        assert (a["backend"], a["timing"], a["torch_process_group"]) == ("torch", "host-clock",
                                                                         "gloo"), coll
        assert a["library"] == f"PyTorch {torch.__version__}, gloo"
        assert a["torch_version"] == str(torch.__version__)
        assert "TCPStore 127.0.0.1:" in a["torch_rendezvous"]
        assert r["devices"] == ["cpu"] * (4 if label in ("4", "2x2") else p)
        refused = json.loads(a["not_available"])
        if in_place or coll == "alltoallv":  # the kit runs alltoallv out of place only
            assert refused == {}, coll
        else:
            assert len(refused["torch"]) == len(want), coll
            assert set(refused["torch"].values()) == {
                f"torch.distributed has no in-place {coll}: its send and receive buffers must "
                "not overlap"}, coll


@needs_torch
def test_the_torch_calls_are_recorded(sweeps, torch):
    calls = {coll: json.loads(sweeps[f"4/{coll}"]["attrs"]["torch_calls"])[coll] for coll in PLAN}
    new = hasattr(torch.distributed, "all_gather_single")
    assert calls == {
        "all_reduce": "all_reduce", "reduce": "reduce", "broadcast": "broadcast",
        "all_gather": "all_gather_single" if new else "all_gather_into_tensor",
        "reduce_scatter": "reduce_scatter_single" if new else "reduce_scatter_tensor",
        "alltoall": "all_to_all_single", "alltoallv": "all_to_all_single",
        "sendrecv": "batch_isend_irecv", "permute": "batch_isend_irecv", "gather": "gather",
        "scatter": "scatter"}


@needs_torch
def test_avg_and_batch_timing(sweeps):
    r = sweeps["4-avg-batch-fp32/all_reduce"]
    assert r["wrong"] == [[[0], [0]]] and r["attrs"]["timing"] == "batch"
    # batch: one average in every iteration slot, per placement and rank
    for placement in sweeps["batch_latency_fp32"][0]:
        for rank in placement[0]:
            assert len(set(rank)) == 1 and rank[0] > 0
    r = sweeps["4-avg-batch-int32/all_reduce"]
    assert r["measured"] == [[[False], [False]]] and r["wrong"] == [[[-1], [-1]]]
    assert json.loads(r["attrs"]["not_available"]) == {"torch": {"1004": (
        "gloo's avg divides the sum in place in floating point, which an integer tensor "
        "cannot hold")}}


@needs_torch
def test_graph_capture_is_refused_on_gloo_in_one_line(sweeps):
    assert sweeps["graph_refusal"] == (
        "--algorithms: torch:graph captures a CUDA graph and needs CUDA tensors; this rank "
        "runs gloo on host tensors (no GPU visible, or --torch-device cpu)")


@needs_torch
def test_a_collective_torch_lacks_is_refused_in_one_line(cli, tmp_path):
    p = cli("run", "hypercube", "--backend", "torch", "-r", "2", "--sizes", "8",
            "--out", tmp_path / "h.nc")
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == ("ccbench: error: --backend: hypercube does not run on backend torch; "
                        "choose another backend\n")
    assert not (tmp_path / "h.nc").exists()
    assert backends.backend_algorithms("torch", "hypercube") == []


@needs_torch
def test_options_are_checked_before_any_rank_starts():
    with pytest.raises(ConfigError) as e:
        make_config("all_reduce", 2, sizes=[8], backend="torch",
                    backend_options={"graph_launches": 2})
    assert str(e.value) == ("-G/--cudagraph: the torch backend captures CUDA graphs as the "
                            "algorithm torch:graph (--algorithms torch,torch:graph); -G and "
                            "--timing graph are the nccl backend's")
    with pytest.raises(ConfigError, match=r"^--timing: cuda-events needs CUDA tensors"):
        make_config("all_reduce", 2, sizes=[8], backend="torch", timing="cuda-events",
                    backend_options={"device": "cpu"})
    with pytest.raises(ConfigError, match=r"^--backend: the torch backend has no option "
                                          r"'mem_type'; its options: timing, device$"):
        make_config("all_reduce", 2, sizes=[8], backend="torch",
                    backend_options={"mem_type": "ncclMemAlloc"})
    cfg = make_config("all_reduce", 2, sizes=[8], backend="torch", report_cputime=True)
    assert cfg.backend.options == {"timing": "host-enqueue", "device": "auto"}
    cls = backends.backend_class("torch")
    assert cls.algorithms_for("all_reduce") == ["torch", "torch:graph"]
    assert cls.data_types() == ("uint8", "int8", "int32", "int64", "fp16", "bf16", "fp32", "fp64")
    assert set(backends.aggregated_timings()) == {"batch", "graph"}


def test_a_run_without_torch_names_the_extra(tmp_path):
    # this interpreter without site (-S) and with a copy of its site-packages
    # that lacks torch (whether it is installed or not): the kit's other
    # dependencies import, torch does not
    farm = tmp_path / "site"
    farm.mkdir()
    site = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    for folder in site:
        for name in os.listdir(folder):
            if name.split("-")[0] in ("torch", "torchgen", "functorch") or (farm / name).exists():
                continue
            (farm / name).symlink_to(os.path.join(folder, name))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(backends.__file__)), str(farm)]))
    p = subprocess.run([sys.executable, "-S", "-m", "ccbench_kit", "run", "all_reduce",
                        "--backend", "torch", "-r", "2", "--sizes", "8",
                        "--out", str(tmp_path / "t.nc")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert (p.returncode, p.stdout) == (2, ""), p.stderr
    assert p.stderr == ("ccbench: error: torch is required for this; install it with "
                        "`pip install ccbench_kit[torch]`\n")
    assert not (tmp_path / "t.nc").exists()
