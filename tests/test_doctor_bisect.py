"""The bisection's descent (`health.bisect`) on hand-made busbw numbers:
which groups it asks for, where it goes, whom it names, when it stops."""
import re

import numpy as np
import pytest

from ccbench_kit.health import bisect

GOOD, SLOW = 25e6, 12e6  # B/s


def feed(d, speed, noise=0.0, repeats=5, seed=1):
    """Run the descent to the end; `speed[node]` is its link's rate.  A
    group runs at its slowest link's rate (a ring), a pair at its slower
    end's; `noise` a relative jitter per repeat."""
    rng = np.random.default_rng(seed)
    steps = []
    while (step := d.next()) is not None:
        steps.append(step)
        rates = [[min(speed[x] for x in g) * (1 + noise * rng.standard_normal())
                  for g in step["groups"]] for _ in range(repeats)]
        d.record(rates)
    return steps


def test_eight_nodes_slow_link_is_found_in_log_steps():
    speed = {k: GOOD for k in range(8)}
    speed[5] = SLOW
    d = bisect.Descent(list(range(8)), names=[f"node{k + 1}" for k in range(8)])
    steps = feed(d, speed, noise=0.05)
    assert [s["kind"] for s in steps] == ["whole", "halves", "halves", "pairs"]
    assert steps[1]["groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert steps[2]["groups"] == [[4, 5], [6, 7]]
    # suspects 4 and 5 each with a node of the faster halves, and a control pair
    assert steps[3]["groups"] == [[4, 6], [5, 7], [6, 7]]
    assert [c["node"] for c in d.culprits] == [5]
    assert d.path[1]["slower"] == [4, 5, 6, 7] and d.path[2]["slower"] == [4, 5]
    assert re.fullmatch(r"descend: node5\+node6\+node7\+node8 2\.\d\dx slower than "
                        r"node1\+node2\+node3\+node4 \(5/5 repeats, 90% CI of the ratio "
                        r"0\.4\d-0\.4\d\)", d.path[1]["decision"]), d.path[1]["decision"]
    assert d.path[3]["decision"] == "culprit: node6"
    assert d.culprits[0]["ratio"] == pytest.approx(SLOW / GOOD, rel=0.1)


def test_clean_fabric_stops_at_the_top():
    d = bisect.Descent(list(range(6)))
    steps = feed(d, {k: GOOD for k in range(6)}, noise=0.1)
    assert [s["kind"] for s in steps] == ["whole", "halves"]
    assert d.culprits == [] and d.path[1]["decision"].startswith("stop: the halves' busbw agree")
    assert d.note == "bisection: no half stands out (at the top: 0+1+2 vs 3+4+5)"


def test_one_noisy_repeat_does_not_steer_and_a_split_vote_stops():
    # the second half is slower in 2 repeats of 5 only: not most repeats
    d = bisect.Descent([0, 1, 2, 3])
    d.record([[GOOD]] * 5)
    entry = d.record([[GOOD, GOOD], [GOOD, SLOW], [GOOD, GOOD], [GOOD, SLOW], [GOOD, GOOD]])
    assert d.done and d.culprits == [] and "slower" not in entry
    # 4 of 5: it descends, and a pair stage of two suspects has no control
    d = bisect.Descent([0, 1, 2, 3])
    d.record([[GOOD]] * 5)
    d.record([[GOOD, SLOW], [GOOD, SLOW], [GOOD, GOOD], [GOOD, SLOW], [GOOD, SLOW * 1.1]])
    assert d.suspects == [2, 3] and d.good == [0, 1]
    step = d.next()
    assert step["groups"] == [[2, 0], [3, 1], [0, 1]]


def test_odd_groups_and_topology_waves():
    order = bisect.leaf_order(5, leaf_of=lambda k: "B" if k in (0, 3) else "A")
    assert order == [0, 3, 1, 2, 4]
    d = bisect.Descent(order, leaf_of=lambda k: "B" if k in (0, 3) else "A")
    speed = {k: GOOD for k in range(5)}
    speed[2] = SLOW
    steps = feed(d, speed)
    assert steps[1]["groups"] == [[0, 3], [1, 2, 4]]
    # three suspects, two good nodes: the pairs reuse a good node, so they
    # run in separate waves; pairs crossing between leaves A and B run apart
    pairs = steps[2]
    assert pairs["groups"] == [[1, 0], [2, 3], [4, 0], [0, 3]]
    assert all(len({x for p in w for x in p}) == 2 * len(w) for w in pairs["waves"])
    assert all(len(w) == 1 for w in pairs["waves"])
    assert [c["node"] for c in d.culprits] == [2]


def test_replay_follows_the_record_and_a_stricter_threshold_stops_sooner():
    speed = {k: GOOD for k in range(8)}
    speed[2] = SLOW
    d = bisect.Descent(list(range(8)))
    feed(d, speed, noise=0.02)
    again = bisect.replay(list(range(8)), d.path)
    assert again.culprits == d.culprits and len(again.path) == 4
    strict = bisect.replay(list(range(8)), d.path, threshold=0.3)
    assert strict.culprits == [] and len(strict.path) == 2


def test_needs_four_nodes():
    with pytest.raises(ValueError, match="at least 4 nodes"):
        bisect.Descent([0, 1, 2])


def test_verdict_names_the_culprit_link_and_the_path():
    from ccbench_kit.health import results, verdict
    from ccbench_kit.health.api import make_plan
    names = [f"node{k + 1}" for k in range(6)]
    plan = make_plan(6, repeats=5, bisect=True)
    assert plan["waves"] == [] and plan["bisect"]["order"] == list(range(6))
    speed = {k: GOOD for k in range(6)}
    speed[4] = SLOW
    d = bisect.Descent(plan["bisect"]["order"], names=names)
    feed(d, speed, noise=0.03)
    raw = results.Raw(names, list(range(12)), [k // 2 for k in range(12)], plan)
    raw.bisect = d.path
    v = verdict.judge(raw)
    assert v.line() == "verdict: node5 link"
    s = v.findings[0].sentence()
    assert s.startswith("node5 link: bisection of the all_reduce: node1+node2+node3+node4+"
                        "node5+node6 -> node4+node5+node6 (2.")
    assert re.search(r"; its pair with node2 \(known good\) ran at 9\d Mbit/s vs (19|20)\d Mbit/s "
                     r"for the other pairs \(2\.\d\dx slower; 5/5 repeats agree", s), s
