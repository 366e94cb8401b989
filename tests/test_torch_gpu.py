"""The torch backend on GPUs: NCCL process groups, one rank per visible GPU
(1 is enough), every collective torch has, eager and CUDA-graph captured,
checked against the golden results; the versions torch loaded recorded.

One ``ccbench run`` of every collective into one file.  Skipped without
torch or a GPU it sees; `bench/gpu_torch.sh` runs it on the device machine.
"""
import json
import subprocess
import sys

import pytest


def _gpus():
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


def test_every_collective_on_nccl_eager_and_graph(tmp_path):
    import torch
    from ccbench_kit.importers import open_any

    out = tmp_path / "torch_gpu.nc"
    p = subprocess.run([sys.executable, "-m", "ccbench_kit", "run", ",".join(COLLECTIVES),
                        "-r", str(_N), "--backend", "torch", "--algorithms", "torch,torch:graph",
                        "--sizes", "24,1004,1048580", "-d", "fp32", "-w", "2", "-n", "5",
                        "--root", str(_N - 1), "--check", "--non-interactive", "--out", str(out)],
                       capture_output=True, text=True, timeout=420)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    parts = open_any(str(out))
    assert sorted(ds.attrs["collective"] for ds in parts.values()) == sorted(COLLECTIVES)
    for ds in parts.values():
        coll = ds.attrs["collective"]
        a = ds.ccb.attrs
        assert (a["backend"], a["torch_process_group"], a["timing"]) == ("torch", "nccl",
                                                                        "cuda-events"), coll
        nccl = ".".join(map(str, torch.cuda.nccl.version()[:3]))
        assert a["nccl_version"] == nccl and a["torch_version"] == str(torch.__version__)
        assert a["library"].startswith(f"PyTorch {torch.__version__}, NCCL {nccl}, CUDA ")
        assert all(str(d).startswith(f"cuda:{r} ") for r, d in enumerate(ds["device"].values))
        for alg in ("torch", "torch:graph"):
            wrong = ds["wrong"].sel(algorithm=alg).values
            assert (wrong[0] == 0).all(), (coll, alg, wrong)   # out of place, every size
            in_place = coll not in NO_IN_PLACE and coll != "alltoallv"
            assert ((wrong[1] == 0) if in_place else (wrong[1] == -1)).all(), (coll, alg, wrong)
            lat = ds["latency"].sel(algorithm=alg, placement="out_of_place")
            assert bool((lat > 0).all()), (coll, alg)
        refused = json.loads(ds.attrs["not_available"])
        assert set(refused) == ({"torch", "torch:graph"} if coll in NO_IN_PLACE
                                and coll != "alltoallv" else set()), coll
