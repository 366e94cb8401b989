"""The ``--local --per-gpu`` verdict on the figures of a real 4x H200 call
(NV18 between every pair, 2026-11-28 13:14 UTC, `bench/gpu_pairs.sh`
RUNS=2; bench/RESULTS.md): the GPU checks' Datasets and the NCCL pairs'
figures of every run, and the baseline the call saved, trimmed by
`bench/gpu_rejudge.py --fixture` (tests/data/doctor/x4-h200-*.json).  As
run, a clean run named three healthy GPUs' NVLink (every link's 8 B
latency 1.36-1.43x the baseline's, bandwidth unchanged) and a copy loop
gpu0 <-> gpu1 named two more things than the pair (the NCCL sendrecv of
every pair with either GPU fell)."""
import json
import os

import pytest
import xarray as xr

from ccbench_kit.health import api, baseline
from ccbench_kit.health.gpu import judge, per_gpu_baseline

DATA = os.path.join(os.path.dirname(__file__), "data", "doctor")
RUNS = json.load(open(os.path.join(DATA, "x4-h200-pairs.json")))
BASE = baseline.load(os.path.join(DATA, "x4-h200-baseline.json"))
# the whole command's verdict as printed (summary.txt of the call)
PRINTED = {"clean1": "verdict: none", "peer1": "verdict: vm gpu0<->gpu1 NVLink",
           "compute1": "verdict: vm gpu0",
           "clean2": "verdict: vm gpu0 nvlink, vm gpu1 nvlink, vm gpu2 nvlink",
           "peer2": "verdict: vm gpu0<->gpu1 NVLink, vm gpu1<->gpu2 NVLink, vm gpu0 nvlink",
           "compute2": "verdict: vm gpu1"}
NOW = {"clean1": "verdict: none", "peer1": "verdict: vm gpu0<->gpu1 NVLink",
       "compute1": "verdict: vm gpu0", "clean2": "verdict: none",
       "peer2": "verdict: vm gpu0<->gpu1 NVLink", "compute2": "verdict: vm gpu1"}


def rejudged(name):
    """(GPU checks' Verdict, NCCL pairs' Verdict, the joint line) of a run."""
    ds = xr.Dataset.from_dict(RUNS[name]["gpu"])
    checks = judge.judge(ds, BASE)
    nccl = per_gpu_baseline.judge(RUNS[name]["per_gpu"], BASE, "vm", checks)
    line, code = api.joint_verdict([api.Diagnosis(v, api.OUTLIER if v.findings else api.HEALTHY)
                                    for v in (checks, nccl)])
    return checks, nccl, line, code


@pytest.mark.parametrize("name", sorted(NOW))
def test_every_run_of_the_call_names_exactly_the_fault(name):
    checks, nccl, line, code = rejudged(name)
    assert line == NOW[name], [f.sentence()[:200] for f in checks.findings + nccl.findings]
    assert code == (0 if line == "verdict: none" else 1)
    # the GPU checks' own line as the run printed it, kept in its file
    then = RUNS[name]["gpu"]["attrs"]["verdict_then"]
    assert PRINTED[name].startswith(then)


def test_a_latency_shift_of_every_link_is_a_host_wide_note():
    ds = xr.Dataset.from_dict(RUNS["clean2"]["gpu"])
    ratios = [row["baseline"] for label, row in judge.judge(ds, BASE).scores[
        "peer_latency_us"].items()]
    assert len(ratios) == 12 and max(ratios) < 0.75  # every link's 8 B copy 1.36-1.43x longer
    checks, _, _, _ = rejudged("clean2")
    assert not checks.findings
    assert ("vm: the 8 B peer-copy latency of 12 of 12 links moved against the baseline "
            "(1.36-1.43x longer) while their bandwidth did not: a host-wide shift (the host's "
            "launch latency, clocks), not a link; shown, names nothing") in checks.notes


def test_the_nccl_pairs_of_the_busy_pair_join_it():
    checks, nccl, _, _ = rejudged("peer2")
    assert [f.label for f in checks.findings] == ["vm gpu0<->gpu1 NVLink"]
    (f,) = nccl.findings
    assert f.label == "vm gpu0<->gpu1 NVLink"
    # 0-1, 0-2, 0-3 and 1-2 fell to 0.51-0.60x their baseline: all explained by the pair
    assert [r.split(" GB/s")[0] for r in f.reasons] == [
        "NCCL sendrecv gpu0<->gpu1 43.7", "NCCL sendrecv gpu0<->gpu2 43.1",
        "NCCL sendrecv gpu0<->gpu3 44.8", "NCCL sendrecv gpu1<->gpu2 45.3"]
    # the NCCL pairs alone (no copy matrix): gpu0's NVLink, every pair of
    # which fell; 1-2 not apart from 0-1 and 0-2 (printed then: named)
    alone = per_gpu_baseline.judge(RUNS["peer2"]["per_gpu"], BASE, "vm")
    assert alone.line() == "verdict: vm gpu0 nvlink"
    assert any(n.startswith("vm gpu1<->gpu2 not named: NCCL sendrecv gpu1<->gpu2 45.3 GB/s")
               for n in alone.notes)
