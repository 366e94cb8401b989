"""Bisection of a slow all_reduce down to the node whose link slows it.

For many nodes the pair matrix costs N - 1 rounds of N/2 pairs; bisection
costs O(log N) rounds.  Rank 0 drives a `Descent`; the ranks measure what
it asks for (`probe`), and it decides where to go next:

1. ``whole``: an all_reduce over one rank per node (the path's first
   entry: what the job sees);
2. ``halves``: the suspects split in two (`plan.halves`, nodes in
   topology order so that a half stays under its leaves), both halves'
   all_reduce at the same time, repeated.  A ring all_reduce runs at the
   rate of its slowest link, so a node whose link is slow makes its half
   slow and not the other.  Per repeat, the ratio of the halves' busbw
   (measured side by side: load on the machine falls on both); the descent
   goes into the slower half when the median ratio is at most `THRESHOLD`
   and most repeats agree (`stands_out`); else it stops: no half stands
   out, nobody is named;
3. repeated until at most `STOP` suspects are left; then ``pairs``: every
   suspect with a known-good node (one of the faster halves), plus a pair
   of two known-good nodes as the control where there are two; a suspect
   whose pair rate, over the other pairs' median, passes the same test is
   the culprit.

Only the slower half is followed: one culprit per run (the slowest); the
pair matrix finds several.  `Descent` is pure (no MPI), so `verdict`
replays the recorded steps.
"""
import numpy as np

from ..dataset.stats import SEED, bootstrap, interval
from .plan import halves, waves

THRESHOLD = 0.75  # busbw ratio of the slower group to the faster one
STOP = 3          # at most this many suspects: pairs with good nodes decide
AGREE = 0.6


def summarize(ratios, threshold, rng):
    """(median, repeats at or below `threshold`, repeats, bootstrap 90% CI)."""
    r = np.asarray([x for x in ratios if np.isfinite(x)], dtype=float)
    if r.size == 0:
        return float("nan"), 0, 0, (float("nan"), float("nan"))
    boot = bootstrap(r, "median", rng)
    return (float(np.median(r)), int(np.sum(r <= threshold)), int(r.size),
            interval(boot, 0.90))


def stands_out(med, votes, total, threshold):
    """The test every step uses: the median ratio is past `threshold` and
    most repeats agree.  (Not the bootstrap interval too, as the pair
    matrix's verdict asks: with 5 repeats, one repeat hit by a burst of
    load stretches it to 1; here two steps in a row must agree instead,
    the halves and then the pairs; the interval is reported.)"""
    return bool(total and med <= threshold and votes >= AGREE * total)


def leaf_order(n, leaf_of=None):
    """Node indices with the nodes of one leaf together (stable)."""
    if leaf_of is None:
        return list(range(n))
    first = {}
    for k in range(n):
        first.setdefault(leaf_of(k), k)
    return sorted(range(n), key=lambda k: (first[leaf_of(k)], k))


def pair_waves(pairs, leaf_of=None):
    """Waves of disjoint pairs (a node in one pair a wave), each split so
    that no two of its pairs share an uplink (`plan.waves`)."""
    out = []
    for p in pairs:
        for w in out:
            if not set(p) & {x for q in w for x in q}:
                w.append(p)
                break
        else:
            out.append([p])
    return [sub for w in out for sub in waves(w, leaf_of)]


class Descent:
    """What to measure next and what it meant.

    Parameters
    ----------
    order : list of int
        Node indices, neighbours in the fabric next to each other.
    names : list of str, optional
        Node names (by index), for the decisions' sentences.
    threshold : float
        Busbw ratio (slower / faster) that counts as slow.
    leaf_of : callable, optional
        Node index -> leaf, to run pairs that would share an uplink apart.
    seed : int
        Of the bootstrap.

    `next()` gives a step (a dict: ``kind`` "whole", "halves" or "pairs",
    ``groups`` lists of node indices, for pairs ``waves``); `record(rates)`
    takes its busbw (B/s), one list per repeat, one value per group, and
    appends the step with its decision to `path`.  `culprits` names the
    node indices found; `done` is set when the descent is over, `note`
    says why it stopped.
    """

    def __init__(self, order, threshold=THRESHOLD, leaf_of=None, names=None, seed=SEED):
        if len(order) < 4:
            raise ValueError("bisection needs at least 4 nodes")
        self.names = names
        self.suspects, self.good = list(order), []
        self.threshold, self.leaf_of = threshold, leaf_of
        self.rng = np.random.default_rng(seed)
        self.path, self.culprits, self.note, self.done = [], [], "", False

    def next(self):
        if self.done:
            return None
        if not self.path:
            return {"kind": "whole", "groups": [list(self.suspects)]}
        if len(self.suspects) > STOP:
            return {"kind": "halves", "groups": [list(h) for h in halves(self.suspects)]}
        pairs = [[c, self.good[i % len(self.good)]] for i, c in enumerate(self.suspects)]
        if len(self.good) >= 2:
            pairs.append(self.good[:2])  # the control: two known-good nodes
        return {"kind": "pairs", "groups": pairs,
                "waves": pair_waves([tuple(p) for p in pairs], self.leaf_of)}

    def record(self, rates):
        step = self.next()
        rates = np.asarray(rates, dtype=float)  # (repeat, group)
        entry = {**step, "busbw": rates.tolist(),
                 "median_busbw": np.nanmedian(rates, axis=0).tolist()}
        entry.pop("waves", None)
        getattr(self, f"_after_{step['kind']}")(entry, rates)
        self.path.append(entry)
        return entry

    def _after_whole(self, entry, rates):
        pass

    def _after_halves(self, entry, rates):
        a, b = entry["groups"]
        with np.errstate(all="ignore"):
            ab = rates[:, 0] / rates[:, 1]
        ratio_a = self._test(ab)
        ratio_b = self._test(1 / ab)
        entry["ratio"] = ratio_a[0]  # first half's busbw over the second's
        for (med, votes, total, ci), slow, fast in ((ratio_a, a, b), (ratio_b, b, a)):
            if stands_out(med, votes, total, self.threshold):
                entry["slower"] = slow
                entry["decision"] = (f"descend: {self._label(slow)} {1 / med:.2f}x slower than "
                                     f"{self._label(fast)} ({votes}/{total} repeats, 90% CI of "
                                     f"the ratio {ci[0]:.2f}-{ci[1]:.2f})")
                self.suspects, self.good = list(slow), list(fast) + self.good
                return
        med = ratio_a[0]
        entry["decision"] = (f"stop: the halves' busbw agree (ratio {med:.2f}; slower than "
                             f"{self.threshold} needed in most repeats)")
        self.note = ("bisection: no half stands out " +
                     (f"(at the top: {self._label(a)} vs {self._label(b)})" if len(self.path) == 1
                      else f"below {self._label(a + b)}: the slowness is in that group, not one "
                           "node's link"))
        self.done = True

    def _after_pairs(self, entry, rates):
        pairs = entry["groups"]
        ratios, found = [], []
        for k, (c, _) in enumerate(pairs):
            if c not in self.suspects:  # the control pair
                continue
            rest = [j for j in range(len(pairs)) if j != k]
            with np.errstate(all="ignore"):
                r = rates[:, k] / np.nanmedian(rates[:, rest], axis=1)
            med, votes, total, ci = self._test(r)
            ratios.append(med)
            if stands_out(med, votes, total, self.threshold):
                found.append((med, c, votes, total, ci))
        entry["ratios"] = ratios
        for med, c, votes, total, ci in sorted(found):
            self.culprits.append({"node": c, "ratio": med, "agree": f"{votes}/{total}",
                                  "ci": ci})
        entry["decision"] = ("culprit: " + ", ".join(self._label([f[1]]) for f in sorted(found))
                             if found else "stop: no suspect's pair with a good node is slow")
        if not found:
            self.note = ("bisection: the slower group's nodes are each as fast as the others "
                         "in pairs: the slowness is in their group, not one node's link")
        self.done = True

    def _label(self, group):
        return "+".join(self.names[x] if self.names else str(x) for x in group)

    def _test(self, ratios):
        return summarize(ratios, self.threshold, self.rng)


def replay(order, steps, threshold=THRESHOLD, leaf_of=None, names=None):
    """A `Descent` fed the recorded steps (``[{"groups", "busbw"}, ...]``)
    while it asks for the same groups (a stricter threshold stops sooner)."""
    d = Descent(order, threshold, leaf_of, names)
    for step in steps:
        want = d.next()
        if want is None or [list(g) for g in want["groups"]] != [list(g) for g in step["groups"]]:
            break
        d.record(step["busbw"])
    return d
