"""The NVLink pair matrix's judgement on hand-made figures (no GPU needed):
which pair, which GPU's NVLink, or none, and against what; its baseline,
its report lines and its bad input.  The measuring side runs on the device
(tests/test_doctor_gpu_pairs_gpus.py, bench/gpu_pairs.sh)."""
import json
import math

import numpy as np
import pytest
import xarray as xr

from ccbench_kit.errors import ConfigError
from ccbench_kit.health import baseline
from ccbench_kit.health.gpu import judge, pairs, per_gpu_baseline, report
from test_doctor_gpu_judge import H100, gpu_run

ONE_WAY, BOTH, LAT = 380.0, 740.0, 2.4  # GB/s, GB/s, us: a healthy NVSwitch pair (hand-made)
SM_WAY, SM_LAT = 360.0, 1.2  # the SM copy and the SM load latency of that pair (hand-made)


def pair_run(ngpu=4, slow=None, reps=5, seed=2, no_access=(), during=None, gpu_scale=None,
             names=None, lat_scale=None, sm=False, sm_lat_scale=None):
    """The GPU figures (`gpu_run`) and the pair matrix of `ngpu` GPUs: every
    link at ONE_WAY x (1 +- 1 %), times `slow` {(a, b): factor} of the link
    a -> b; both ways at BOTH x the slower direction's factor; latency LAT x
    `lat_scale` {(a, b): factor}; `during` {gpu: {counter: n}} NVLink
    errors during the matrix.  `sm`: the SM figures too, the SM copy at
    SM_WAY x `slow`, the SM latency at SM_LAT x `sm_lat_scale`."""
    rng = np.random.default_rng(seed)
    idx = list(range(ngpu))
    links = [(a, b) for a in idx for b in idx if a != b]
    prs = [(a, b) for a in idx for b in idx if a < b]
    slow, lat_scale = slow or {}, lat_scale or {}
    noise = lambda n: 1 + 0.01 * rng.standard_normal((n, reps))  # noqa: E731
    samples = {
        "peer_gbps": ONE_WAY * noise(len(links)) * [[slow.get(k, 1.0)] for k in links],
        "peer_latency_us": LAT * noise(len(links)) * [[lat_scale.get(k, 1.0)] for k in links],
        "peer_bidir_gbps": BOTH * noise(len(prs)) * [[min(slow.get((a, b), 1.0),
                                                          slow.get((b, a), 1.0))]
                                                     for a, b in prs]}
    if sm:
        samples["peer_sm_gbps"] = SM_WAY * noise(len(links)) * [[slow.get(k, 1.0)]
                                                                for k in links]
        samples["peer_sm_latency_us"] = SM_LAT * noise(len(links)) * [
            [(sm_lat_scale or {}).get(k, 1.0)] for k in links]
    access = {k: not ({k, k[::-1]} & set(no_access)) for k in links}
    for i, k in enumerate(links):
        if not access[k]:
            for name in ("peer_gbps", "peer_latency_us", "peer_sm_gbps", "peer_sm_latency_us"):
                if name in samples:
                    samples[name][i] = np.nan
    for i, k in enumerate(prs):
        if not access[k]:
            samples["peer_bidir_gbps"][i] = np.nan
    zero = {key: 5.0 for key in ("nvlink_replay", "nvlink_recovery", "nvlink_crc")}
    before = [(dict(zero), "") for _ in idx]
    after = [({k: v + (during or {}).get(g, {}).get(k, 0) for k, v in zero.items()}, "")
             for g in idx]
    matrix = pairs.to_dataset("n1", idx, samples, access, before, after)
    gpus = gpu_run(gpu_scale, ngpu=ngpu, names=names or [H100] * ngpu, reps=reps, seed=seed)
    return xr.merge([gpus, matrix], combine_attrs="no_conflicts")


def busy(*gpus, ngpu=4, factor=0.5):
    """Every link in or out of `gpus` at `factor` (their NVLink ports loaded)."""
    return {(a, b): factor for a in range(ngpu) for b in range(ngpu)
            if a != b and {a, b} & set(gpus)}


def test_healthy_pair_matrix_is_none_with_its_three_references():
    v = judge.judge(pair_run())
    assert v.line() == "verdict: none", [f.sentence() for f in v.findings]
    row = v.scores["peer_gbps"]["n1/1->3"]
    assert row["peers"] == pytest.approx(0.98, abs=0.03)  # over the best other link
    assert row["preset"] == pytest.approx(ONE_WAY / 450, abs=0.02)  # the NVLink4 datasheet
    assert v.scores["peer_bidir_gbps"]["n1/0<->2"]["preset"] == pytest.approx(BOTH / 900,
                                                                              abs=0.02)
    assert v.scores["peer_latency_us"]["n1/2->0"]["preset"] is None  # no preset latency
    assert len(v.scores["peer_gbps"]) == 12 and len(v.scores["peer_bidir_gbps"]) == 6
    assert any(n.startswith("pair preset h100-nvlink4: NVIDIA H100 SXM5 datasheet")
               for n in v.notes)


def test_a_copy_loop_between_two_gpus_names_that_pair_alone():
    # a peer copy loop gpu1 <-> gpu3 loads both GPUs' NVLink ports: every
    # pair of either is slower (5 of 6 pairs), the GPU checks see nothing
    v = judge.judge(pair_run(slow=busy(1, 3)))
    assert v.line() == "verdict: n1 gpu1<->gpu3 NVLink"
    (f,) = v.findings
    assert set(f.moved) == {"peer_gbps", "peer_bidir_gbps"}
    assert any(r.startswith("gpu1->gpu3 peer copy 1") and " is 0.4" in r for r in f.reasons)
    assert any("the best other pair's figure (peers)" in r for r in f.reasons)


def test_one_slow_pair_is_named_as_that_pair():
    v = judge.judge(pair_run(slow={(0, 2): 0.6, (2, 0): 0.6}))
    assert v.line() == "verdict: n1 gpu0<->gpu2 NVLink"
    # one direction only: the pair, through its one-way figure
    v = judge.judge(pair_run(slow={(3, 0): 0.5}))
    assert v.line() == "verdict: n1 gpu0<->gpu3 NVLink"
    assert v.findings[0].reasons[0].startswith("gpu3->gpu0 peer copy 192 GB/s is 0.50x the "
                                               "best other pair's figure (peers) (slower; 5/5 "
                                               "repeats agree")


def test_a_gpu_whose_pairs_are_all_slow_is_its_nvlink_not_three_pairs():
    v = judge.judge(pair_run(slow=busy(2)))
    assert v.line() == "verdict: n1 gpu2 nvlink"
    assert len(v.findings[0].reasons) >= 6  # its 6 links' one-way rates, at least


def test_a_loaded_gpu_named_by_the_gpu_checks_takes_its_slow_pairs():
    # a GPU loaded by a competing process: its HBM copy and matmul fall, its
    # copies to the others too; one name, the GPU's
    v = judge.judge(pair_run(slow=busy(2, factor=0.6),
                             gpu_scale={(2, "hbm_gbps"): 0.4, (2, "matmul_tflops"): 0.35}))
    assert v.line() == "verdict: n1 gpu2"
    assert {"hbm_gbps", "matmul_tflops", "peer_gbps"} <= set(v.findings[0].moved)
    # two GPUs loaded: each GPU once, no pair between them
    both = {**busy(1, factor=0.6), **busy(2, factor=0.6)}
    v = judge.judge(pair_run(slow=both, gpu_scale={(1, "matmul_tflops"): 0.35,
                                                   (2, "matmul_tflops"): 0.35}))
    assert v.line() == "verdict: n1 gpu1, n1 gpu2"


def test_latency_alone_names_nothing_and_joins_a_pair_named_by_its_bandwidth():
    # 8 B copies: the copy engine's start and the host's launch, not the
    # link; a latency that moved alone is a note (pair_judge.SUPPORTING)
    v = judge.judge(pair_run(lat_scale={(1, 2): 3.0, (2, 1): 3.0}))
    assert v.line() == "verdict: none"
    assert v.scores["peer_latency_us"]["n1/1->2"]["peers"] == pytest.approx(1 / 3, abs=0.03)
    (note,) = [n for n in v.notes if "8 B peer-copy latency" in n]
    assert note.startswith("n1: the 8 B peer-copy latency of 2 of 12 links moved against the "
                           "peers (2.9")
    assert note.endswith("x longer) while their bandwidth did not: shown, names nothing (a "
                         "latency alone does not separate a link from the host: gpu1->gpu2, "
                         "gpu2->gpu1)")
    # beside the pair's bandwidth it is one more reason of that pair
    v = judge.judge(pair_run(slow={(1, 2): 0.5, (2, 1): 0.5}, lat_scale={(1, 2): 3.0}))
    assert v.line() == "verdict: n1 gpu1<->gpu2 NVLink"
    assert "peer_latency_us" in v.findings[0].moved
    assert any("latency 7.2 us is 0.3" in r and "(longer;" in r for r in v.findings[0].reasons)


def test_every_pair_slower_than_the_baseline_is_the_hosts_nvlink_not_three_gpus(tmp_path):
    # nothing separates a pair or a GPU when all moved alike (an NVSwitch
    # fabric, a node-wide cap): the host, once; before, gpu0, gpu1 and gpu2
    # were named (each pair to its lower GPU) and gpu3 not
    base = baseline.load(baseline.save(pair_run(), str(tmp_path / "base.json")))
    every = {(a, b): 0.6 for a in range(4) for b in range(4) if a != b}
    v = judge.judge(pair_run(slow=every, seed=4, names=["NVIDIA A100-SXM4-80GB"] * 4), base)
    assert v.line() == "verdict: n1 NVLink"
    assert len([r for r in v.findings[0].reasons if "peer copy" in r]) == 12
    # five pairs at 0.7x, the sixth at 0.85x: against the baseline the five
    # passed, but none stands apart from the sixth (0.82x of it, peers
    # 0.75x): a move of the node, not the pair gpu0<->gpu1 that "two GPUs
    # slow in all their pairs" named before
    near = {(a, b): 0.85 if {a, b} == {2, 3} else 0.7 for a, b in every}
    v = judge.judge(pair_run(slow=near, seed=6, names=["NVIDIA A100-SXM4-80GB"] * 4), base)
    assert v.line() == "verdict: none", [f.sentence()[:200] for f in v.findings]
    assert any(n.startswith("n1: both ways, peer copy of 10 links or pairs moved against the "
                            "baseline (1.4") and n.endswith("no further than the best other "
                            "pair's: a move of the node's pairs, not of one; shown, names "
                            "nothing") for n in v.notes), v.notes
    # the latency of every link longer, bandwidth as saved: a note, no name
    v = judge.judge(pair_run(lat_scale={k: 1.4 for k in every}, seed=5), base)
    assert v.line() == "verdict: none"
    assert any(n.startswith("n1: the 8 B peer-copy latency of 12 of 12 links moved against "
                            "the baseline (1.") and "a host-wide shift" in n for n in v.notes)


def test_two_pairs_sharing_a_gpu_do_not_stand_apart_cannot_tell():
    # 0-1 and 1-2 slower, gpu1's third pair not: neither pair is apart from
    # the other, nor is gpu1 slow in all its pairs: the verdict cannot tell
    v = judge.judge(pair_run(slow={(0, 1): 0.5, (1, 0): 0.5, (1, 2): 0.5, (2, 1): 0.5}))
    assert v.line() == "verdict: cannot tell"
    assert v.undecided.startswith("n1 gpu0<->gpu1 not named: gpu0->gpu1 peer copy 18")
    assert "other pairs of its GPUs moved too (gpu1<->gpu2)" in v.undecided
    # two pairs with no GPU in common: each stands apart, each named
    v = judge.judge(pair_run(slow={(0, 1): 0.5, (1, 0): 0.5, (2, 3): 0.5, (3, 2): 0.5}))
    assert v.line() == "verdict: n1 gpu0<->gpu1 NVLink, n1 gpu2<->gpu3 NVLink"


def test_a_latency_within_the_events_resolution_is_shown_not_judged():
    # 2.4 -> 3.2 us: 0.75x its peers, but 0.8 us above them (events resolve ~0.5 us)
    v = judge.judge(pair_run(lat_scale={(1, 2): 1.35, (2, 1): 1.35}))
    assert v.line() == "verdict: none"
    assert v.scores["peer_latency_us"]["n1/1->2"]["peers"] == pytest.approx(1 / 1.35, abs=0.03)


def test_nvlink_errors_that_grew_during_the_matrix_name_the_gpus_nvlink():
    v = judge.judge(pair_run(during={3: {"nvlink_recovery": 2, "nvlink_crc": 40}}))
    assert v.line() == "verdict: n1 gpu3 nvlink"
    assert v.findings[0].reasons == [
        "2 NVLink recovery error(s) during the pair matrix (7 since the driver loaded)",
        "40 NVLink crc error(s) during the pair matrix (45 since the driver loaded)"]


def test_crc_errors_alone_are_shown_not_judged():
    # corrected by the link's replay: a healthy pair of the device's 2x H200
    # counted 29 and 34 CRC errors in one matrix at 0.88x of the datasheet's
    # rate; they are a note unless that GPU is named for something else
    v = judge.judge(pair_run(during={3: {"nvlink_crc": 29, "nvlink_replay": 2}}))
    assert v.line() == "verdict: none"
    assert ("n1 gpu3: 29 NVLink crc error(s) during the pair matrix (34 since the driver "
            "loaded) (corrected by the link: shown, not judged alone)") in v.notes
    assert ("n1 gpu3: 2 NVLink replay error(s) during the pair matrix (7 since the driver "
            "loaded) (corrected by the link: shown, not judged alone)") in v.notes


def test_two_gpus_are_judged_by_the_preset_and_their_own_baseline(tmp_path):
    # one pair: its two directions are the only peers; a copy loop between
    # them slows both alike, so only the preset or the baseline can tell
    ngpu, model = 2, "NVIDIA A100-SXM4-80GB"  # a model without a preset: the baseline alone
    healthy = pair_run(ngpu, names=[model] * 2)
    assert judge.judge(healthy).line() == "verdict: none"
    path = baseline.save(healthy, str(tmp_path / "base.json"))
    saved = json.load(open(path))["figures"]
    assert saved["peer_gbps"]["dims"] == ["node", "link"]
    assert saved["peer_gbps"]["labels"]["link"] == ["0->1", "1->0"]
    assert saved["peer_latency_us"]["better"] == "lower"
    base = baseline.load(path)
    loaded = pair_run(ngpu, slow=busy(0, 1, ngpu=2, factor=0.55), names=[model] * 2, seed=5)
    assert judge.judge(loaded).line() == "verdict: none"  # no peer, no preset: nothing seen
    v = judge.judge(loaded, base)
    assert v.line() == "verdict: n1 gpu0<->gpu1 NVLink"
    assert v.findings[0].reasons[0].startswith("gpu0->gpu1 peer copy 208 GB/s is 0.55x the "
                                               "baseline's 378 GB/s (baseline ")
    assert judge.judge(pair_run(ngpu, names=[model] * 2, seed=6), base).line() == "verdict: none"
    # an H100 pair at half its rate is below the preset without a baseline
    v = judge.judge(pair_run(ngpu, slow=busy(0, 1, ngpu=2, factor=0.5)))
    assert v.line() == "verdict: n1 gpu0<->gpu1 NVLink"
    assert any("the preset's NVLink 450 GB/s (h100-nvlink4)" in r for r in v.findings[0].reasons)


def test_a_pair_without_peer_access_is_not_measured_and_says_so():
    ds = pair_run(3, no_access=[(0, 2)])
    assert json.loads(ds.attrs["peer_no_access"]) == ["0<->2"]
    v = judge.judge(ds)
    assert v.line() == "verdict: none"
    assert "n1/0->2" not in v.scores["peer_gbps"] and "n1/0<->2" not in v.scores["peer_bidir_gbps"]
    assert ("gpu0<->gpu2: no peer access (cudaDeviceCanAccessPeer): not copied GPU to GPU; "
            "ccbench doctor --per-gpu measures it through NCCL") in v.notes
    text = report.text(ds, v)
    assert "n1/gpu0<->gpu2        both ways      not measured        -        -         -" \
        in text.splitlines()


def test_sm_figures_join_the_pair_their_copy_loop_slowed_and_latency_alone_names_nothing():
    # a copy loop gpu1 <-> gpu3 slows the SM copies of every pair of either
    # end as it slows the copy engines': one finding, the pair, with both
    v = judge.judge(pair_run(slow=busy(1, 3), sm=True))
    assert v.line() == "verdict: n1 gpu1<->gpu3 NVLink"
    (f,) = v.findings
    assert {"peer_gbps", "peer_sm_gbps"} <= set(f.moved)
    assert len(v.scores["peer_sm_gbps"]) == 12 and len(v.scores["peer_sm_latency_us"]) == 12
    # the SM load latency of one link, alone: a note naming nothing
    v = judge.judge(pair_run(sm=True, sm_lat_scale={(0, 2): 2.0}))
    assert v.line() == "verdict: none"
    (note,) = [n for n in v.notes if "SM load latency" in n]
    assert note.startswith("n1: the SM load latency of 1 of 12 links moved against the peers (")
    assert note.endswith("a latency alone does not separate a link from the host: gpu0->gpu2)")
    # within 0.05 us of its peers (a tenth of the 8 B copy's resolution): not judged
    v = judge.judge(pair_run(sm=True, sm_lat_scale={(0, 2): 1.03}))
    assert not [n for n in v.notes if "SM load latency" in n]
    text = report.text(pair_run(3, sm=True), judge.judge(pair_run(3, sm=True))).splitlines()
    assert sum(ln.startswith("n1/gpu") and "SM copy" in ln for ln in text) == 6
    assert sum(ln.startswith("n1/gpu") and "SM latency" in ln for ln in text) == 6


def test_sm_figures_not_measured_say_why_and_leave_no_rows():
    ds = pair_run(3)
    ds.attrs["peer_sm_missing"] = "NVRTC (libnvrtc.so) not found; looked in: CUDA_HOME"
    v = judge.judge(ds)
    assert v.line() == "verdict: none"
    assert ("SM copy and SM latency not measured: NVRTC (libnvrtc.so) not found; looked in: "
            "CUDA_HOME (the copy-engine figures are)") in v.notes
    text = report.text(ds, v)
    assert "SM copy" not in text.replace("SM copy and SM latency not measured", "")


def test_report_lists_every_link_and_the_nvlink_counters():
    ds = pair_run(3, during={1: {"nvlink_replay": 1}})
    v = judge.judge(ds)
    text = report.text(ds, v).splitlines()
    assert sum(ln.startswith("n1/gpu") and "peer copy" in ln for ln in text) == 6
    assert sum(ln.startswith("n1/gpu") and "both ways" in ln for ln in text) == 3
    assert ("n1/gpu1               NVLink errors during the matrix (since the driver loaded): "
            "replay +1 (6), recovery +0 (5), crc +0 (5)") in text
    # a replay alone is the link correcting itself: shown, not a finding
    assert v.line() == "verdict: none"
    assert ("n1 gpu1: 1 NVLink replay error(s) during the pair matrix (6 since the driver "
            "loaded) (corrected by the link: shown, not judged alone)") in v.notes


def test_pair_matrix_wanted_and_refused_with_one_gpu():
    assert pairs.wanted(None, 4) and pairs.wanted(None, 2) and not pairs.wanted(None, 1)
    assert not pairs.wanted(False, 8)
    with pytest.raises(ConfigError) as e:
        pairs.wanted(True, 1)
    assert e.value.flag == "--pairs"
    assert str(e.value).endswith("the pair matrix copies between GPUs: it needs at least 2, "
                                 "this check has 1")
    assert pairs.ends("1<->3") == pairs.ends("1->3") == (1, 3)


def test_pairs_flag_needs_local(cli, tmp_path):
    p = cli("doctor", "--pairs", "--hosts", "a,b", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip() == "ccbench: error: --pairs: applies to the GPU checks: add --local"
    assert list(tmp_path.iterdir()) == []


def test_one_gpu_note_says_no_pair():
    v = judge.judge(gpu_run(ngpu=1))
    assert any(n.endswith("no pair of GPUs to copy between") for n in v.notes)
    assert not math.isnan(v.scores["hbm_gbps"]["n1/gpu0"]["value"])


# -- --local --per-gpu: the NCCL pairs and the host all_reduce in the baseline --

def per_gpu_figures(ngpu=2, host=296.0, pair=150e9, slow=None, reps=5, seed=3):
    """A --per-gpu run's figures in the baseline's form: every pair's NCCL
    rate `pair` B/s x `slow` {(a, b): factor}, the host all_reduce `host` GB/s."""
    rng = np.random.default_rng(seed)
    nodes = [f"vm gpu{k}" for k in range(ngpu)]
    rates = np.full((ngpu, ngpu, reps), np.nan)
    for a in range(ngpu):
        for b in range(ngpu):
            if a != b:
                k = (slow or {}).get((min(a, b), max(a, b)), 1.0)
                rates[a, b] = pair * k * (1 + 0.01 * rng.standard_normal(reps))
    rates[1, 0] = rates[0, 1]
    return {"pair_busbw_nccl": {"dims": ["node", "peer"], "labels": {"node": nodes,
                                                                     "peer": nodes},
                                "better": "higher", "units": "B/s",
                                "samples": np.where(np.isnan(rates), None, rates).tolist()},
            per_gpu_baseline.HOST_FIGURE: {
                "dims": ["node"], "labels": {"node": ["vm"]}, "better": "higher",
                "units": "GB/s",
                "samples": [list(host * (1 + 0.01 * rng.standard_normal(reps)))]}}


def saved(tmp_path, per_gpu, ngpu=2):
    path = str(tmp_path / "base.json")
    ds = pair_run(ngpu)
    baseline.save(ds.assign_coords(node=["vm"]), path)
    per_gpu_baseline.extend(path, per_gpu)
    return path


def test_a_two_gpu_node_is_judged_against_its_own_past(tmp_path):
    path = saved(tmp_path, per_gpu_figures())
    base = baseline.load(path)
    assert base.identity["nodes"] == ["vm", "vm gpu0", "vm gpu1"]
    assert set(base.figures) >= {"hbm_gbps", "peer_gbps", "pair_busbw_nccl",
                                 "host_allreduce_gbps"}
    baseline.check_matches(base, pair_run(2).assign_coords(node=["vm"]))  # the GPU checks' too
    v = per_gpu_baseline.judge(per_gpu_figures(seed=4), base, "vm")
    assert v.line() == "verdict: none"
    assert v.notes[0].startswith("host all_reduce 29") and "x the baseline's 29" in v.notes[0]
    # the P2P copy loop on 2 H200: host all_reduce 296 -> 166 GB/s
    loaded = per_gpu_figures(host=166.0, pair=80e9, seed=5)
    v = per_gpu_baseline.judge(loaded, base, "vm")
    assert v.line() == "verdict: vm gpu0<->gpu1 NVLink"
    (f,) = v.findings
    assert set(f.moved) == {"pair_busbw_nccl", "host_allreduce_gbps"}
    assert f.reasons[0] == ("NCCL sendrecv gpu0<->gpu1 79.8 GB/s is 0.53x the baseline's "
                            "149.3 GB/s (90% CI 0.52-0.54)")
    assert any(r.startswith("host all_reduce 16") and "x the baseline's 29" in r
               for r in f.reasons)
    # the host all_reduce alone moved: still the one pair
    v = per_gpu_baseline.judge(per_gpu_figures(host=166.0, seed=6), base, "vm")
    assert v.line() == "verdict: vm gpu0<->gpu1 NVLink"


def test_per_gpu_baseline_on_four_gpus_names_the_pair_or_the_host(tmp_path):
    base = baseline.load(saved(tmp_path, per_gpu_figures(4), 4))
    loop = {p: 0.5 for p in [(0, 1), (1, 2), (1, 3), (0, 3), (2, 3)]}  # gpu1 <-> gpu3 busy
    v = per_gpu_baseline.judge(per_gpu_figures(4, slow=loop, seed=7), base, "vm")
    assert v.line() == "verdict: vm gpu1<->gpu3 NVLink"
    # a loaded GPU the GPU checks named takes its pairs: no new name
    gpu2 = {p: 0.5 for p in [(0, 2), (1, 2), (2, 3)]}
    checks = judge.Verdict(findings=[judge.GpuFinding("vm", 2, "gpu")])
    v = per_gpu_baseline.judge(per_gpu_figures(4, slow=gpu2, seed=8), base, "vm", checks)
    assert v.line() == "verdict: vm gpu2"
    v = per_gpu_baseline.judge(per_gpu_figures(4, host=150.0, seed=9), base, "vm")
    assert v.line() == "verdict: vm NVLink"
    # ... unless the GPU checks named a GPU: the all_reduce runs over it too
    # (a PCIe copy loop on gpu2 of 4 H200: its H2D/D2H 0.64x, the host
    # all_reduce 0.74x, no NCCL pair moved; it had named "vm NVLink" beside gpu2)
    v = per_gpu_baseline.judge(per_gpu_figures(4, host=220.0, seed=9), base, "vm", checks)
    assert v.line() == "verdict: none"
    assert v.notes[0].startswith("host all_reduce 22") and "x the baseline's 29" in v.notes[0]
    pair_named = judge.Verdict(findings=[judge.PairFinding("vm", 0, "pair", peer=3)])
    v = per_gpu_baseline.judge(per_gpu_figures(4, host=150.0, seed=9), base, "vm", pair_named)
    assert v.line() == "verdict: none"


def test_nccl_pairs_of_a_pair_the_copy_matrix_named_join_it(tmp_path):
    # a copy loop gpu0 <-> gpu1 busies both GPUs' NVLink: NCCL sendrecv of
    # 0-1, 0-2, 0-3 and 1-2 fell (the 4 H200: 0.51-0.60x); the copy
    # matrix named the pair: one name, not gpu0's NVLink and gpu1<->gpu2
    base = baseline.load(saved(tmp_path, per_gpu_figures(4), 4))
    loop = {p: 0.55 for p in [(0, 1), (0, 2), (0, 3), (1, 2)]}
    figures = per_gpu_figures(4, slow=loop, seed=10)
    # the NCCL pairs alone: gpu0's are all slower (its NVLink); 1-2 moved
    # beside 0-1 and 0-2, pairs of its GPUs: not apart from them, not named
    alone = per_gpu_baseline.judge(figures, base, "vm")
    assert alone.line() == "verdict: vm gpu0 nvlink"
    assert any(n.startswith("vm gpu1<->gpu2 not named: NCCL sendrecv gpu1<->gpu2 ") and
               n.endswith("other pairs of its GPUs moved too (gpu0<->gpu1, gpu0<->gpu2): it "
                          "does not stand apart from them") for n in alone.notes)
    checks = judge.Verdict(findings=[judge.PairFinding("vm", 0, "pair", peer=1)])
    v = per_gpu_baseline.judge(figures, base, "vm", checks)
    assert v.line() == "verdict: vm gpu0<->gpu1 NVLink"
    assert len(v.findings[0].reasons) == 4
    # the copy matrix named the host's NVLink: every NCCL pair joins it
    checks = judge.Verdict(findings=[judge.HostFinding("vm", -1, "host")])
    assert per_gpu_baseline.judge(figures, base, "vm", checks).line() == "verdict: vm NVLink"


def test_a_gpu_only_baseline_says_the_per_gpu_figures_are_not_judged(tmp_path):
    path = str(tmp_path / "gpu-only.json")
    baseline.save(pair_run(2).assign_coords(node=["vm"]), path)
    v = per_gpu_baseline.judge(per_gpu_figures(), baseline.load(path), "vm")
    assert v.line() == "verdict: none"
    assert v.notes == [f"{path} holds no --per-gpu figures (save it with --local --per-gpu "
                       "--save-baseline): the NCCL pairs and the host all_reduce are not "
                       "judged against it"]


def test_per_gpu_figures_read_back_from_the_run_files(tmp_path):
    from ccbench_kit.dataset import save
    from ccbench_kit.health import results
    from test_doctor_per_gpu import per_gpu_raw
    nb = 1 << 20
    raw = per_gpu_raw([[4e-6, 5e-6, 9e-6], [8e-6, 10e-6, 10e-6]], nb, gpus=2)
    for rep in (0, 1):
        raw.add("pair", rep, {"a": 0, "b": 1, "lat_s": [5e-6] * 3, "bw_s": [1e-5 * (rep + 1)] * 3,
                              "bw_bytes": nb})
    save(results.to_datasets(raw, {"doctor_host_allreduce": results.host_allreduce(raw)}),
         str(tmp_path / "d.nc"))
    baseline.save(results.figures(raw), str(tmp_path / "pairs.json"))
    got = per_gpu_baseline.figures(str(tmp_path / "d.nc"), str(tmp_path / "pairs.json"), "vm")
    # 2 GPUs: busbw = 2 (n - 1) / n x nb / the median time = nb / 5 us, nb / 10 us
    assert got["host_allreduce_gbps"]["samples"] == [[209.715, 104.858]]
    assert got["pair_busbw_nccl"]["samples"][0][1] == [nb / 1e-5, nb / 2e-5]


def test_compare_lists_the_pair_figures_and_reads_latency_the_right_way_round():
    old, new = pair_run(3), pair_run(3, slow={(0, 1): 0.5}, lat_scale={(2, 1): 2.0}, seed=9)
    lines, below = report.compare_lines(old, new, "old.nc", "new.nc", min_ratio=0.9)
    row = next(ln for ln in lines if ln.startswith("n1/gpu0->gpu1") and "peer copy" in ln)
    assert row.split()[-1] == "slower" and " 0.5" in row
    row = next(ln for ln in lines if ln.startswith("n1/gpu2->gpu1") and "latency" in ln)
    assert row.split()[-1] == "slower" and "2.4 us        4.8 us   1.99x" in row
    assert {(p, f) for p, f, _ in below} == {("n1/gpu0->gpu1", "peer_gbps"),
                                             ("n1/gpu0<->gpu1", "peer_bidir_gbps"),
                                             ("n1/gpu2->gpu1", "peer_latency_us")}


def test_report_page_names_the_pair_and_lists_the_matrix(tmp_path):
    pytest.importorskip("papermill")
    from ccbench_kit.health.gpu import check
    ds = pair_run(slow=busy(1, 3))
    ds.attrs["doctor_verdict"] = json.dumps(judge.judge(ds).to_dict(), default=float)
    check.save(ds, tmp_path / "r.nc")
    assert check.load(tmp_path / "r.nc").sizes["link"] == 12  # the file keeps the matrix
    page = open(report.html(tmp_path / "r.nc", tmp_path / "r.html")).read()
    assert "verdict: n1 gpu1&lt;-&gt;gpu3 NVLink" in page
    assert "- n1 gpu1&lt;-&gt;gpu3 NVLink: gpu0-&gt;gpu1 peer copy" in page
    assert page.count("NVLink errors during the matrix") == 4
