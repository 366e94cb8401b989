"""``ccbench doctor --per-gpu``'s rank code through nccl on real GPUs: the
pair matrix, the host all_reduce and the bisection on every GPU count of
the machine (2, 3, ... all), each rank on its own GPU (issue 33: a pair's
backend took the pair's local ranks and switched ranks 2 and 3 to GPUs 0
and 1, ``invalid resource handle`` from 3 GPUs on).  Skipped without NCCL
and 2 GPUs; bench/gpu_pairs.sh runs them on the device machine."""
import tempfile

import numpy as np
import pytest

from ccbench_kit.backends.nccl import visible_gpus
from ccbench_kit.health import api, results
from ccbench_kit.launch.job import RANK_MODULE, Job
from ccbench_kit.launch.mpirun import run_ranks

_N, _WHY = visible_gpus()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    _N < 2, reason=f"needs NCCL and 2+ GPUs ({_N} GPU(s){': ' + _WHY if _WHY else ''})")]


def _probe(n, tmp_path, bisect=False):
    plan = api.make_plan(n, ranks_per_node=1, repeats=2, bw_bytes="16M", local_bytes="4M",
                         lat_iters=10, bw_iters=3, backend="nccl", bisect=bisect)
    plan["hosts"], plan["per_gpu"] = api.per_gpu_nodes(n, host="vm"), True
    plan["out"] = str(tmp_path / f"raw{n}{'b' if bisect else ''}.json")
    with tempfile.TemporaryDirectory() as run_dir:
        failure, _, errors = run_ranks(RANK_MODULE, [Job.doctor(plan).word()], n, run_dir,
                                       describe=str, call_timeout=120)[:3]
    assert failure is None, (failure, errors)
    return results.Raw.read(plan["out"])


@pytest.mark.parametrize("n", range(2, max(_N, 2) + 1))
def test_per_gpu_pairs_and_host_allreduce_on_n_gpus(n, tmp_path):
    raw = _probe(n, tmp_path)
    pairs = n * (n - 1) // 2
    assert len(raw.pair) == 2 * pairs
    assert sorted({(r["a"], r["b"]) for r in raw.pair}) == \
        [(a, b) for a in range(n) for b in range(a + 1, n)]
    for r in raw.pair:
        assert all(np.isfinite(r["bw_s"])) and min(r["bw_s"]) > 0
    host = results.host_allreduce(raw)
    assert host["gpus"] == n and min(host["busbw_gbps"]) > 0


@pytest.mark.skipif(_N < 4, reason="the bisection needs 4 GPUs")
def test_per_gpu_bisection_rings_on_their_own_gpus(tmp_path):
    raw = _probe(_N, tmp_path, bisect=True)
    # the first step is the whole host's ring, then halves: each measured
    assert raw.bisect and raw.bisect[0]["kind"] == "whole"
    assert np.all(np.isfinite(raw.bisect[0]["median_busbw"]))
    for step in raw.bisect:
        assert np.nanmax(step["median_busbw"]) > 0
