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


def fake_raw(n=4, reps=5, rate=25e6, slow_link=None, cpu=None, noise=0.05, seed=1, slow=(),
             leaf=None, spine=1.0):
    """Records as the probe writes them, for a fabric of `rate` B/s a node link.

    `slow`: nodes whose links run at half rate; `leaf`: each node's leaf
    (the plan of ``--topology``); `spine`: the rate of a pair across two
    leaves, a fraction of `rate`."""
    rng = np.random.default_rng(seed)
    p = make_plan(n, repeats=reps, lat_iters=10, bw_iters=3,
                  leaf_of=leaf.__getitem__ if leaf else None)
    p["hosts"] = [f"node{k + 1}" for k in range(n)]
    slow = set(slow) | ({slow_link} if slow_link is not None else set())
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
                r = rate * (0.5 if slow & {a, b} else 1)
                if leaf and leaf[a] != leaf[b]:
                    r = min(r, rate * spine)
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
    assert "15 of 150 8-byte trips through it" in f.sentence() and "0 of 150 elsewhere" in f.sentence()
    # one slow round trip in one pair is no lossy link
    raw = fake_raw(n=4)
    raw.pair[0]["lat_s"][0] = 0.2
    assert verdict.judge(raw).line() == "verdict: none"


def test_slow_spine_is_named_as_the_uplink_with_the_topology():
    """The spine at 40 %: every node has a fast pair inside its leaf and
    slow ones across, so every peer ratio stays near 1; the pairs across
    the leaves against those inside one name the uplink, not a node."""
    leaf = ["A", "A", "B", "B"]
    v = verdict.judge(fake_raw(leaf=leaf, spine=0.4))
    assert v.line() == "verdict: uplink A<->B"
    f, = v.findings
    assert (f.kind, f.metric, f.agree) == ("uplink", "uplink", "5/5")
    assert 0.36 < f.ratio < 0.44 and f.ci[1] < 1
    assert "the 4 pairs across it ran 2.46x slower than the 2 pairs inside a leaf" in f.sentence()
    assert all(0.8 < r < 1.25 for r in v.scores["bandwidth"].values())
    # a slow node link with the topology is the node's, not the uplink's
    assert verdict.judge(fake_raw(leaf=leaf, slow_link=2)).line() == "verdict: node3 link"
    # without the topology every node still has a fast pair: nothing to name
    raw = fake_raw(leaf=leaf, spine=0.4)
    raw.plan["leaf"] = None
    assert verdict.judge(raw).line() == "verdict: none"


def test_two_slow_nodes_cannot_be_told_without_a_baseline_and_are_named_with_one(tmp_path):
    """2 of 4 links at half rate: 5 of the 6 pairs are slow, and every
    node's peer ratio is 1.  Without a baseline the verdict says it cannot
    tell (not none); with the clean fabric's baseline both are named."""
    from ccbench_kit.health import baseline
    v = verdict.judge(fake_raw(slow=(0, 2)))
    assert v.line() == "verdict: cannot tell"
    assert "the links of node1, node3 look slower (their fastest pair at 0.5" in v.undecided
    assert "--baseline FILE" in v.undecided
    assert not v.healthy
    base = baseline.load(baseline.save(results.figures(fake_raw(seed=7)), tmp_path / "b.json"))
    v = verdict.judge(fake_raw(slow=(0, 2)), baseline=base)
    assert v.line() == "verdict: node1 link, node3 link"
    assert [f.metric for f in v.findings] == ["baseline", "baseline"]
    assert 0.45 < v.findings[0].ratio < 0.55
    assert f"even its fastest pair ran {1 / v.findings[0].ratio:.2f}x slower than in the " \
        f"baseline {base.path} (with node3: 101 Mbit/s" in v.findings[0].sentence()
    assert v.scores["baseline"]["node2"] > 0.9 and v.scores["baseline"]["node4"] > 0.9
    # the clean fabric against its own baseline: nobody
    assert verdict.judge(fake_raw(seed=3), baseline=base).line() == "verdict: none"


def test_pair_baseline_is_per_backend_and_of_these_nodes(tmp_path):
    from ccbench_kit.errors import ConfigError
    from ccbench_kit.health import baseline
    from ccbench_kit.health.api import check_baseline
    raw = fake_raw(seed=7)  # the plan's backend: tcp (make_plan's default)
    figs = results.figures(raw)
    bw = figs["pair_busbw_tcp"]
    assert bw.dims == ("node", "peer", "repeat") and bw.attrs["better"] == "higher"
    # both orders of a pair hold the rate of every repeat, as the raw records say
    rec = next(r for r in raw.pair if (r["a"], r["b"]) == (0, 3) and r["rep"] == 2)
    want = rec["bw_bytes"] / float(np.median(rec["bw_s"]))
    assert float(bw.sel(node="node1", peer="node4", repeat=2)) == pytest.approx(want)
    assert float(bw.sel(node="node4", peer="node1", repeat=2)) == pytest.approx(want)
    base = baseline.load(baseline.save(figs, tmp_path / "b.json"))
    check_baseline(base, ["node4", "node3", "node2", "node1"], "tcp")
    with pytest.raises(ConfigError, match=r"b.json: no pair rates measured through --backend "
                                          r"mpi \(it holds pair_busbw_tcp\)") as e:
        check_baseline(base, ["node1", "node2", "node3", "node4"], "mpi")
    assert e.value.flag == "--baseline"
    with pytest.raises(ConfigError, match=r"recorded on node1, node2, node3, node4, this "
                                          r"check measures node1, node5: a baseline of other"):
        check_baseline(base, ["node1", "node5"], "tcp")


def test_backend_choice_and_its_bad_input():
    from ccbench_kit.backends.nccl import visible_gpus
    from ccbench_kit.errors import ConfigError
    from ccbench_kit.health.api import choose_backend
    assert choose_backend("tcp") == ("tcp", "asked for")
    assert choose_backend("mpi") == ("mpi", "asked for")
    with pytest.raises(ConfigError, match=r"unknown backend 'gloo'; choose one of mpi, nccl, "
                                          r"torch, tcp") as e:
        choose_backend("gloo")
    assert e.value.flag == "--backend"
    # the bisection's ring is an algorithm each backend has (nccl's table needs no GPU)
    from ccbench_kit.backends import backend_algorithms
    from ccbench_kit.health.collective import ring_algorithm
    for b in ("mpi", "nccl"):
        assert ring_algorithm(b) in backend_algorithms(b, "all_reduce")
    if visible_gpus()[0]:
        pytest.skip("this host has a GPU: the CPU-only choices are not reachable")
    name, why = choose_backend(None)
    assert name == "mpi" and why.startswith("the default: no GPU on this host (")
    with pytest.raises(ConfigError, match=r"nccl needs a GPU on every node but this host has "
                                          r"none \(.+\); use --backend mpi on CPU nodes"):
        choose_backend("nccl")
    # under Slurm the ranks run on the nodes, which may have the GPUs this host lacks
    assert choose_backend("nccl", remote=True) == ("nccl", "asked for")


# srun's own lines from a testbed run (a rank crashed in MPI_Init, srun then
# stopped the others), and Open MPI's mpirun line
SRUN_TAIL = """Fatal Python error: Segmentation fault
srun: error: node3: task 5: Segmentation fault (core dumped)
srun: error: node3: task 4: Terminated
srun: error: node1: task 0: Exited with exit code 3
srun: error: node2: tasks 2-3,6: Terminated
"""


def test_ranks_killed_by_a_signal_are_read_from_srun_and_mpirun_in_order():
    from ccbench_kit.launch.watchdog import dead_ranks
    assert dead_ranks(SRUN_TAIL) == [(5, "node3", 11), (4, "node3", 15), (2, "node2", 15),
                                     (3, "node2", 15), (6, "node2", 15)]
    assert dead_ranks("mpirun noticed that process rank 3 with PID 77 on node h2 exited on "
                      "signal 9 (Killed).") == [(3, "h2", 9)]
    assert dead_ranks("srun: error: node1: task 0: Exited with exit code 3\n") == []


# A testbed run of the doctor (-S, --backend tcp, one rank a node), node3's
# ranks SIGKILLed mid-check while node3's node was busy (cpu-contended, 16
# loops), as the launcher read it: rank 0 lost its pair's connection to rank
# 2 and aborted; Slurm cancelled the step; srun reported the ranks the
# cancel killed before node3's, in words alike.  The old launcher named the
# first reported (rank 0 on node1: "verdict: node1 (died during the check)").
# Its stderr from the kill on, as it came (trailing blanks trimmed).
CANCELLED_ERROR = ('@@ccbench {"event": "error", "rank": 0, "message": "rank 0: '
                   'ConnectionResetError: [Errno 104] Connection reset by peer", '
                   '"kind": "RunError", "lost": [2]}\n')
CANCELLED_TAIL = """--------------------------------------------------------------------------
An MPI communication peer process has unexpectedly disconnected.  This
usually indicates a failure in the peer process (e.g., a crash or
otherwise exiting without calling MPI_FINALIZE first).

Although this local MPI process will likely now behave unpredictably
(it may even hang or crash), the root cause of this problem is the
failure of the peer -- that is what you need to investigate.  For
example, there may be a core file that you can examine.  More
generally: such peer hangups are frequently caused by application bugs
or other external events.

  Local host: node2
  Local PID:  968
  Peer host:  node3
--------------------------------------------------------------------------
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD
with errorcode 3.

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.
You may or may not see output from other processes, depending on
exactly when Open MPI kills them.
--------------------------------------------------------------------------
srun: Job step aborted: Waiting up to 4 seconds for job step to finish.
slurmstepd-node1: error: *** STEP 3.0 ON node1 CANCELLED AT 2026-11-28T21:48:08 ***
srun: error: node1: task 0: Killed
srun: launch/slurm: _step_signal: Terminating StepId=3.0
srun: error: node4: task 3: Killed
srun: error: node2: task 1: Killed
srun: error: node3: task 2: Killed
salloc: Relinquishing job allocation 3
salloc: Job allocation 3 has been revoked.
"""


def test_the_rank_a_survivor_lost_is_the_cause_not_the_first_srun_reported():
    from ccbench_kit.launch import events
    from ccbench_kit.launch.watchdog import cause_first, dead_ranks
    reported = dead_ranks(CANCELLED_TAIL)
    assert reported[0] == (0, "node1", 9)    # what the old launcher named
    errors = [events.parse(CANCELLED_ERROR)]
    # rank 2, which rank 0 lost, first; rank 0 last: it wrote its error after
    # a death, so it died after it; the others in srun's order
    assert cause_first(reported, errors) == [(2, "node3", 9), (3, "node4", 9),
                                             (1, "node2", 9), (0, "node1", 9)]
    # with no error from the ranks (srun stopped the others after the death it
    # saw: nothing else killed them) srun's order stands
    assert cause_first(reported, []) == reported
    # a `lost` that names no rank is not read as one
    assert cause_first(dead_ranks(SRUN_TAIL), [{"event": "error", "rank": 1, "lost": ["x"]}]) \
        == dead_ranks(SRUN_TAIL)


def test_a_death_names_the_node_during_the_check_and_not_in_start_up():
    died = [(5, "node3", 11), (4, "node3", 15)]
    mid = verdict.death_verdict(died, "rank 5 on host node3 died (signal 11)", measured=True)
    assert mid.line() == "verdict: node3 (died during the check)" and not mid.failed
    assert mid.findings[0].sentence() == ("node3 (died during the check): rank 5 was killed by "
                                          "SIGSEGV during the check")
    start = verdict.death_verdict(died, "m", measured=False, again=True)
    assert start.failed and not start.findings
    assert start.line() == ("verdict: unknown (node3: rank 5 died of SIGSEGV in start-up, in "
                            "both starts)")
    assert verdict.death_verdict(died, "m", measured=False).line() == \
        "verdict: unknown (node3: rank 5 died of SIGSEGV in start-up)"
