"""The health check's plan and statistics, on hand-made records: every pair
once in N-1 (even) or N (odd) rounds, waves that share no uplink, and the
verdict naming the slow link, the contended node, or nobody."""
import itertools

import numpy as np
import pytest

from ccbench_kit.health import plan, results, verdict
from ccbench_kit.health.api import make_plan


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8, 9])
def test_tournament_covers_every_pair_once_in_disjoint_rounds(n):
    rounds = plan.tournament(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [p for r in rounds for p in r]
    assert sorted(seen) == list(itertools.combinations(range(n), 2))
    for r in rounds:
        nodes = [x for p in r for x in p]
        assert len(nodes) == len(set(nodes))  # disjoint: a node meets one peer a round
        assert len(r) == n // 2


def test_waves_never_put_two_pairs_across_the_same_spine():
    leaf = {0: "A", 1: "A", 2: "B", 3: "B", 4: "C", 5: "C"}.get
    for r in plan.tournament(6):
        waves = plan.waves(r, leaf)
        assert sorted(p for w in waves for p in w) == sorted(r)
        for w in waves:
            crossings = [frozenset((leaf(a), leaf(b))) for a, b in w if leaf(a) != leaf(b)]
            assert len(crossings) == len(set(crossings))
    # 4 nodes on two leaves: the intra-leaf round stays one wave, the two
    # rounds whose both pairs cross the spine become two waves each
    assert plan.schedule(4, {0: 1, 1: 1, 2: 2, 3: 2}.get) == [
        [(0, 3)], [(1, 2)], [(0, 2)], [(1, 3)], [(0, 1), (2, 3)]]
    assert plan.schedule(4) == plan.tournament(4)


def fake_raw(n=4, reps=5, rate=25e6, slow_link=None, cpu=None, noise=0.05, seed=1):
    """Records as the probe writes them, for a fabric of `rate` B/s a node link."""
    rng = np.random.default_rng(seed)
    p = make_plan(n, repeats=reps, lat_iters=10, bw_iters=3)
    p["hosts"] = [f"node{k + 1}" for k in range(n)]
    raw = results.Raw(p["hosts"], list(range(2 * n)), [k // 2 for k in range(2 * n)], p)
    raw.peaks = [10.0] * (2 * n)
    jitter = lambda k: rng.lognormal(0, noise, k)  # noqa: E731
    for rep in range(reps):
        for k in range(n):
            lat = 20e-6 * (50 if k == cpu else 1)
            raw.add("local", rep, {"node": k, "ranks": 2, "lat_s": list(lat * jitter(10)),
                                   "bw_s": list(2e-3 * jitter(3)), "cpu_s": list(1e-3 * jitter(5)),
                                   "bw_bytes": p["local_bytes"]})
        for wave in p["waves"]:
            for a, b in wave:
                r = rate * (0.5 if slow_link in (a, b) else 1)
                raw.add("pair", rep, {"a": a, "b": b, "lat_s": list(30e-6 * jitter(10)),
                                      "bw_s": list(p["bw_bytes"] / r * jitter(3)),
                                      "bw_bytes": p["bw_bytes"]})
    raw.complete = True
    return raw


def test_slow_link_is_named_as_the_nodes_link_and_by_how_much():
    v = verdict.judge(fake_raw(slow_link=2))
    assert v.line() == "verdict: node3 link"
    f, = v.findings
    assert (f.metric, f.kind) == ("bandwidth", "link")
    assert 0.45 < f.ratio < 0.55 and f.ci[1] < 1
    assert f.agree == "5/5"
    assert f.value == pytest.approx(12.5e6, rel=0.1) and f.reference == pytest.approx(25e6, rel=0.1)
    assert "2." in f.sentence() and "slower" in f.sentence()


def test_contended_node_is_named_as_the_node():
    v = verdict.judge(fake_raw(cpu=1))
    assert v.line() == "verdict: node2"
    assert v.findings[0].metric == "local"


@pytest.mark.parametrize("seed", range(5))
def test_clean_noisy_fabric_names_nobody(seed):
    v = verdict.judge(fake_raw(n=5, noise=0.25, seed=seed))
    assert v.line() == "verdict: none", v.findings


def test_two_nodes_can_only_be_told_apart_by_the_local_check():
    v = verdict.judge(fake_raw(n=2, slow_link=0))
    assert v.line() == "verdict: none"  # one pair: nothing to compare it with
    assert any("two nodes" in n for n in v.notes)
    assert verdict.judge(fake_raw(n=2, cpu=0)).line() == "verdict: node1"


def test_records_become_ccbench_datasets_that_compare_and_keep_partial_matrices(tmp_path):
    import ccbench_kit as ccb
    from ccbench_kit.compare import compare
    raw = fake_raw(n=3, reps=2)
    raw.pair = [r for r in raw.pair if not (r["rep"] == 1 and (r["a"], r["b"]) == (1, 2))]
    parts = results.to_datasets(raw, {"doctor_verdict": {"line": "verdict: none"}})
    path = tmp_path / "d.nc"
    ccb.save(parts, path)
    tree = ccb.load(path)
    pairs = tree["pairs"].to_dataset()
    assert list(pairs["algorithm"].values) == ["node1-node2", "node1-node3", "node2-node3"]
    assert list(pairs["node_b"].values) == ["node2", "node3", "node3"]
    assert list(pairs["size"].values) == [8, 2 << 20]
    # bandwidth test: busbw is the exchange's rate each way (25e6 B/s = 0.025 GB/s)
    bw = pairs.ccb.busbw().sel(size=2 << 20, placement="out_of_place")
    assert float(bw.sel(algorithm="node1-node2")) == pytest.approx(0.025, rel=0.15)
    # the pair missing from repeat 1 is NaN there, kept in repeat 0
    lat = pairs["latency"].sel(algorithm="node2-node3", size=8, rank=0)
    assert np.isnan(lat.where(pairs["repeat"] == 1, drop=True)).all()
    assert np.isfinite(lat.where(pairs["repeat"] == 0, drop=True)).all()
    local = tree["local"].to_dataset()
    assert list(local["algorithm"].values) == ["node1", "node2", "node3"]
    assert (local["peak_GBps"].values == 10.0).all()
    res = compare(pairs, pairs)
    assert float(res["ratio"].sel(algorithm="node1-node2", size=2 << 20, placement="out_of_place")) \
        == pytest.approx(1.0)


def test_lossy_link_is_named_from_retransmission_timeouts():
    raw = fake_raw(n=4)
    for rec in raw.pair:  # node 3's link drops packets: some round trips wait 200 ms
        if 3 in (rec["a"], rec["b"]):
            rec["lat_s"][rec["rep"] % 10] = 0.105
    v = verdict.judge(raw)
    assert v.line() == "verdict: node4 link"
    f, = v.findings
    assert f.metric == "loss" and f.agree == "3/3"
    assert "15 of 150 ping-pongs through it" in f.sentence() and "0 of 150 elsewhere" in f.sentence()
    # one slow round trip in one pair is no lossy link
    raw = fake_raw(n=4)
    raw.pair[0]["lat_s"][0] = 0.2
    assert verdict.judge(raw).line() == "verdict: none"
