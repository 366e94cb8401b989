"""The torch backend on GPUs: NCCL process groups, one rank per visible GPU
(1 is enough), every collective torch has, eager and CUDA-graph captured,
checked against the golden results; the versions torch loaded recorded.

One mpirun of one rank per GPU running every collective in-process (torch
and NCCL start once a rank).  Skipped without torch or a GPU it sees;
`bench/gpu_torch.sh` runs it on the device machine.
"""
import json
import subprocess
import sys

import pytest

from conftest import gpus_here


def _gpus():
    # NVML first: without a driver there is no GPU to ask torch about, and
    # importing torch takes 3 s of CPU in every pytest process that collects this
    here = gpus_here()
    if not isinstance(here, int) or here < 1:
        return f"no GPU here: {here}"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return torch.cuda.device_count() if torch.cuda.is_available() else "torch sees no GPU"


_N = _gpus()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not isinstance(_N, int) or _N < 1, reason=f"needs torch and a GPU ({_N})")]
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "alltoallv", "broadcast",
               "reduce", "gather", "scatter", "sendrecv", "permute")
NO_IN_PLACE = ("alltoall", "alltoallv", "sendrecv", "permute")


CODE = """
import json
from mpi4py import MPI
import ccbench_kit
out = {}
for coll in %r:
    ds = ccbench_kit.run(coll, sizes=[12 * %d, 1004, 1048580], backend="torch", dtype="fp32",
                         algorithms=["torch", "torch:graph"], check="random", seed=5, warmup=2,
                         iters=5, **({"root": MPI.COMM_WORLD.Get_size() - 1}
                                     if coll in ("broadcast", "reduce", "gather", "scatter") else {}))
    if MPI.COMM_WORLD.Get_rank() == 0:
        out[coll] = {"attrs": {k: str(ds.attrs.get(k)) for k in ("backend", "torch_process_group",
                               "timing", "nccl_version", "torch_version", "library")},
                     "not_available": ds.attrs["not_available"],
                     "wrong": {a: ds["wrong"].sel(algorithm=a).values.tolist()
                               for a in ("torch", "torch:graph")},
                     "positive": {a: bool((ds["latency"].sel(algorithm=a,
                                                             placement="out_of_place") > 0).all())
                                  for a in ("torch", "torch:graph")},
                     "devices": [str(d) for d in ds["device"].values]}
if MPI.COMM_WORLD.Get_rank() == 0:
    print("@@" + json.dumps(out), flush=True)
"""


def test_every_collective_on_nccl_eager_and_graph():
    """One mpirun, every collective in-process: torch and NCCL start once a rank."""
    import torch
    from ccbench_kit.launch.mpirun import mpirun_command, mpirun_env

    p = subprocess.run(mpirun_command(_N, [sys.executable, "-c", CODE % (COLLECTIVES, _N)]),
                       capture_output=True, text=True, timeout=420, env=mpirun_env())
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@")), None)
    assert p.returncode == 0 and line, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads(line[2:])
    assert sorted(res) == sorted(COLLECTIVES)
    nccl = ".".join(map(str, torch.cuda.nccl.version()[:3]))
    for coll, r in res.items():
        a = r["attrs"]
        assert (a["backend"], a["torch_process_group"], a["timing"]) == ("torch", "nccl",
                                                                        "cuda-events"), coll
        assert a["nccl_version"] == nccl and a["torch_version"] == str(torch.__version__)
        assert a["library"].startswith(f"PyTorch {torch.__version__}, NCCL {nccl}, CUDA ")
        assert all(d.startswith(f"cuda:{k} ") for k, d in enumerate(r["devices"])), r["devices"]
        in_place = coll not in NO_IN_PLACE
        for alg in ("torch", "torch:graph"):
            out_of_place, inplace = r["wrong"][alg]
            assert out_of_place == [0, 0, 0], (coll, alg, r["wrong"])   # every size checked
            assert inplace == ([0, 0, 0] if in_place else [-1, -1, -1]), (coll, alg, r["wrong"])
            assert r["positive"][alg], (coll, alg)
        refused = json.loads(r["not_available"])
        # alltoallv runs out of place only (the kit's layout), so nothing was refused
        assert set(refused) == ({"torch", "torch:graph"} if in_place is False
                                and coll != "alltoallv" else set()), (coll, refused)
