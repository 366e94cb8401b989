"""From measurements to a verdict: which node or link stands out, by how
much, against what, and how sure.

Every statistic is a ratio to the node's peers *in the same repeat*: the
nodes of one repeat are measured seconds apart, so load that comes and goes
on the machine cancels, where absolute numbers would drift with it.

- local: the node's intra-node 8 B all_reduce time over the median of the
  other nodes' (a node starved of CPU cannot pass a message between its own
  ranks without waiting for the scheduler: tens of times slower, where
  load from elsewhere moves the ratio by a few; the large all_reduce and
  the memory copy rate, the node's own peak, are kept in the results but
  vary too much with that load to vote);
- bandwidth: the median rate of the pairs through the node over the median
  of the pairs not through it (a node link cut, congested or lossy makes
  every pair through it slow, and at most one pair of any other node);
- latency: the same with the pairs' one-way latency;
- loss: 8-byte trips that waited for a TCP retransmission timeout
  (at least `RTO_S`; Linux never retransmits sooner, and nothing else on a
  loaded machine stalled a round trip that long in our runs): a lossy link
  makes them in most pairs through its node and (nearly) nowhere else, while
  the median latency and the bandwidth barely move.

A node is an outlier in a statistic when the median over repeats passes the
threshold and at least `AGREE` of the repeats agree (each repeat is an
independent vote; the bootstrap interval of the median over repeats is
reported as the confidence figure, and must not reach 1).  A pair statistic
(bandwidth, latency) names the node only if it also stands apart, by
intervals, from a healthy majority (`apart_from`): more than half of all
nodes, each of which its pairs beat with the same third nodes in the same
repeats (`pair_contrast`).  With four nodes a ratio of medians of three
pairs swings 2x with the load of the moment; a healthy node whose pairs
drew the slow moments passed the threshold by its point estimate alone.
And when as many nodes' links are slow as fast (`_slower_links`), no
majority is healthy: the pair statistics and the uplinks name nobody (the
verdict cannot tell, unless a baseline names the nodes).  Then:

- local outlier: ``node`` (CPU contention, a slow device: the node itself);
- else bandwidth or loss outlier: ``link`` (the node's link: rate cut,
  congestion, lost packets);
- else latency outlier: ``node`` (every message it handles waits; its
  bandwidth is fine, so not its link).
"""
from dataclasses import asdict, dataclass, field
import signal
import warnings

import numpy as np

from ..dataset.stats import SEED, bootstrap, interval
from . import bisect as _bisect
from .collective import TCP
from .results import host_allreduce, pair_figure

THRESHOLDS = {"local": 5.0, "bandwidth": 0.75, "latency": 2.0, "bisect": _bisect.THRESHOLD}
AGREE = 0.6
AGREE_LOCAL = 0.8  # load from elsewhere makes a node's local time jump now and then
RTO_S = 0.150  # a round trip this long waited for a retransmission timeout (min 200 ms)


@dataclass
class Finding:
    """One node that stands out."""

    node: str
    kind: str        # "node" or "link"
    metric: str      # "local", "bandwidth", "latency", "hang"
    ratio: float     # its value over its peers' (bandwidth < 1 is slow; others > 1)
    value: float     # the node's median (s, or B/s for bandwidth)
    reference: float  # its peers' median, same unit
    agree: str       # repeats that agree, "4/5"
    ci: tuple        # bootstrap 90% interval of `ratio`
    detail: str = ""

    @property
    def label(self):
        return {"link": f"{self.node} link", "uplink": f"uplink {self.node}",
                "died": f"{self.node} (died during the check)"}.get(self.kind, self.node)

    def sentence(self):
        if self.metric in ("hang", "died", "loss", "bisection", "uplink", "baseline"):
            return f"{self.label}: {self.detail}"
        what = {"local": "intra-node 8 B all_reduce time", "bandwidth": "bandwidth of its pairs",
                "latency": "latency of its pairs"}[self.metric]
        how = (f"{1 / self.ratio:.2f}x slower" if self.metric == "bandwidth"
               else f"{self.ratio:.2f}x slower")
        apart = f"; {self.detail}" if self.detail else ""
        return (f"{self.label}: {what} {how} than the other nodes' median "
                f"({_fmt(self.metric, self.value)} vs {_fmt(self.metric, self.reference)}; "
                f"{self.agree} repeats agree; 90% CI of the ratio {self.ci[0]:.2f}-{self.ci[1]:.2f}"
                f"{apart})")


def _fmt(metric, v):
    if metric == "bandwidth":
        return f"{v * 8 / 1e6:.0f} Mbit/s"
    return f"{v * 1e6:.1f} us"


@dataclass
class Verdict:
    findings: list = field(default_factory=list)
    scores: dict = field(default_factory=dict)  # metric -> {node: median ratio}
    notes: list = field(default_factory=list)
    failed: bool = False  # the run failed and named nobody: nothing is known
    # pairs differ but no node stands out against its peers (and no baseline
    # says which): why the verdict cannot tell, else ""
    undecided: str = ""
    # the run failed before measuring anything, for a reason that names a
    # node but says nothing of its health (its rank crashed in start-up)
    failed_at: str = ""

    @property
    def healthy(self):
        return not self.findings and not self.failed and not self.undecided

    def line(self):
        """``verdict: node3``, ``verdict: node3 link``, ``verdict: uplink
        LEAF1<->LEAF2``, ``verdict: none``; ``verdict: unknown`` when the run
        failed without naming a node, ``verdict: cannot tell`` when pairs
        differ and nothing explains it (`undecided`)."""
        if not self.findings:
            if self.failed:
                return f"verdict: unknown ({self.failed_at})" if self.failed_at else \
                    "verdict: unknown"
            return "verdict: cannot tell" if self.undecided else "verdict: none"
        return "verdict: " + ", ".join(dict.fromkeys(f.label for f in self.findings))

    def to_dict(self):
        return {"line": self.line(), "failed": self.failed, "findings": [asdict(f) for f in self.findings],
                "scores": self.scores, "notes": self.notes, "undecided": self.undecided,
                "failed_at": self.failed_at}


def node_ratios(matrix, x):
    """Per repeat: median over x's pairs / median over the pairs without x.

    `matrix` is (repeat, node, node), symmetric, NaN on the diagonal and
    where not measured."""
    n = matrix.shape[1]
    others = [k for k in range(n) if k != x]
    mine = np.nanmedian(matrix[:, x, others], axis=1) if others else np.nan
    iu = [(i, j) for i in others for j in others if i < j]
    if not iu:
        return np.full(matrix.shape[0], np.nan)
    rest = np.nanmedian(np.stack([matrix[:, i, j] for i, j in iu], axis=1), axis=1)
    return mine / rest


def local_ratios(values, x):
    """Per repeat: node x's value over the median of the other nodes'."""
    others = [k for k in range(values.shape[1]) if k != x]
    return values[:, x] / np.nanmedian(values[:, others], axis=1)


def _summary(ratios, slow_high, threshold, rng):
    r = ratios[np.isfinite(ratios)]
    if r.size == 0:
        return np.nan, 0, 0, (np.nan, np.nan)
    med = float(np.median(r))
    votes = int(np.sum(r >= threshold if slow_high else r <= threshold))
    boot = bootstrap(r, "median", rng)
    return med, votes, int(r.size), interval(boot, 0.90)


def judge(raw, thresholds=None, seed=SEED, baseline=None):
    """The `Verdict` of a run's raw records (`results.Raw`); `baseline`
    (a `health.baseline.Baseline` holding this backend's pair rates,
    `results.figures`) scores each node's link against it too."""
    th = {**THRESHOLDS, **(thresholds or {})}
    rng = np.random.default_rng(seed)
    nodes = raw.nodes
    n = len(nodes)
    verdict = Verdict()
    # the separation tests draw from their own stream: the findings'
    # intervals stay those of the same seed whatever they draw
    flagged, withheld = _peer_statistics(raw, th, rng, np.random.default_rng(seed + 1),
                                         verdict.scores)
    for x, finding in (_loss(raw) if raw.plan["waves"] else {}).items():
        verdict.scores.setdefault("loss", {})
        # None as for bandwidth: two nodes have no pair elsewhere to compare with
        verdict.scores["loss"][nodes[x]] = (round(float(finding.ratio), 4)
                                            if np.isfinite(finding.ratio) else None)
        if finding.kind:
            flagged.setdefault(x, {})["loss"] = finding
    for x, finding in _bisection(raw, th["bisect"]).items():
        flagged.setdefault(x, {})["bisection"] = finding
    bw = raw.pair_matrix("bw") if raw.plan["waves"] else None
    if bw is not None and baseline is not None:
        for x, finding in _against_baseline(raw, bw, baseline, th["bandwidth"], rng,
                                            verdict.scores).items():
            flagged.setdefault(x, {})["baseline"] = finding
    if raw.bisect_note:
        verdict.notes.append(raw.bisect_note)
    host = host_allreduce(raw)
    if host:
        busbw = host["busbw_gbps"]
        verdict.notes.append(f"host all_reduce of {host['gpus']} GPUs, {host['bytes']} B: busbw "
                             f"{_gbps(float(np.median(busbw)))} GB/s (median of {len(busbw)} "
                             f"repeats, {_gbps(min(busbw))}-{_gbps(max(busbw))})")
    if n == 2 and raw.plan["waves"]:
        verdict.notes.append("two nodes: the pair's bandwidth and latency have no other pair "
                             "to compare with; only the local check can single one out")
    # as many nodes' links slow as fast: no healthy majority for the pair
    # statistics (nor the uplinks, whose pairs inside a leaf are the
    # reference) to be compared with
    split = bw is not None and n > 2 and 2 * len(_slower_links(bw, th["bandwidth"])) >= n
    if split:
        for x in list(flagged):
            withheld += [_no_majority(flagged[x].pop(name)) for name in ("bandwidth", "latency")
                         if name in flagged[x]]
            if not flagged[x]:
                del flagged[x]
    for x in sorted(flagged):
        found = flagged[x]
        pick = found.get("local") or found.get("bandwidth") or found.get("loss") \
            or found.get("bisection") or found.get("latency") or found.get("baseline")
        verdict.findings.append(pick)
    if bw is not None and raw.plan.get("leaf"):
        uplinks = _uplinks(bw, raw.plan["leaf"], th["bandwidth"], rng, verdict.scores)
        if split:
            withheld += [_no_majority(f) for f in uplinks]
        else:
            verdict.findings += uplinks
    verdict.notes += withheld
    if bw is not None and n > 2 and (not verdict.findings or (split and baseline is None)):
        verdict.undecided = _unexplained_spread(bw, raw.nodes, th["bandwidth"],
                                                baseline is not None)
    return verdict


def _peer_statistics(raw, th, rng, apart_rng, scores):
    """({node: {metric: Finding}}, [notes of outliers not named]) of the
    local check and, with a pair matrix, the bandwidth and latency ratios
    to the node's peers; fills `scores` (metric -> {node: median ratio})."""
    nodes, n = raw.nodes, len(raw.nodes)
    metrics = {"local": (raw.local_matrix("lat"), local_ratios, True)}
    if raw.plan["waves"]:  # not when bisection replaced the pair matrix
        metrics.update({"bandwidth": (raw.pair_matrix("bw"), node_ratios, False),
                        "latency": (raw.pair_matrix("lat"), node_ratios, True)})
    flagged, withheld = {}, []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, (values, ratio_fn, slow_high) in metrics.items():
            scores[name] = {}
            for x in range(n):
                med, votes, total, ci = _summary(ratio_fn(values, x), slow_high, th[name], rng)
                scores[name][nodes[x]] = None if np.isnan(med) else round(med, 4)
                passes = (med >= th[name]) if slow_high else (med <= th[name])
                # and the bootstrap interval of the median does not reach 1
                # (the local check: most repeats agree far past the
                # threshold instead; a throttled node skips a repeat now
                # and then, which a bootstrap of 5 repeats cannot tell
                # from no effect)
                apart = (ci[0] > 1) if slow_high else (ci[1] < 1)
                if name == "local":
                    apart = votes >= AGREE_LOCAL * total and med >= 2 * th[name]
                if not (total and passes and apart and votes >= AGREE * total):
                    continue
                own, ref = _own_and_ref(values, x, name)
                finding = Finding(nodes[x], "link" if name == "bandwidth" else "node", name,
                                  med, own, ref, f"{votes}/{total}", ci)
                if name != "local":
                    beaten = apart_from(values, x, slow_high, apart_rng)
                    if len(beaten) < majority(n):
                        withheld.append(_not_apart(finding, beaten, nodes))
                        continue
                    finding.detail = _apart_clause(beaten, nodes)
                flagged.setdefault(x, {})[name] = finding
    return flagged, withheld


def majority(n):
    """How many of the other nodes a node must stand apart from to be named
    by a pair statistic: more than half of all `n` (the healthy majority
    its pairs are compared with; it is not one of them)."""
    return n // 2 + 1


def pair_contrast(matrix, x, k):
    """Per repeat: node x's pairs over node k's pairs with the same third
    nodes, the median over every third node j of ``log(matrix[r, x, j] /
    matrix[r, k, j])``, back from logs (with two third nodes, the geometric
    mean: one wild pair cannot carry it as it carries a plain mean).

    The two pairs of a ratio share their partner j and their repeat, so
    j's own link and the load of the moment fall on both; the pair (x, k),
    in both nodes' figures, is left out.  NaN where no third node was
    measured with both."""
    others = [j for j in range(matrix.shape[1]) if j not in (x, k)]
    if not others:
        return np.full(matrix.shape[0], np.nan)
    with np.errstate(all="ignore"):
        return np.exp(np.nanmedian(np.log(matrix[:, x, others] / matrix[:, k, others]),
                                   axis=1))


def apart_from(matrix, x, slow_high, rng):
    """The other nodes node x stands apart from on its slow side: the
    bootstrap 90 % interval of the median over repeats of `pair_contrast`
    lies past 1 (above for times, `slow_high`; below for rates)."""
    out = []
    for k in range(matrix.shape[1]):
        if k == x:
            continue
        med, _, total, ci = _summary(pair_contrast(matrix, x, k), slow_high, 1.0, rng)
        if total and ((ci[0] > 1) if slow_high else (ci[1] < 1)):
            out.append(k)
    return out


def _apart_clause(beaten, nodes):
    return (f"apart by intervals from {len(beaten)} of {len(nodes) - 1} other nodes "
            f"({', '.join(nodes[k] for k in beaten)})")


def _not_apart(finding, beaten, nodes):
    """The note of a peer-statistic outlier not named: its point estimate
    passed, but it stands apart from no healthy majority."""
    apart = ", ".join(nodes[k] for k in beaten) or "none"
    return (f"{finding.node} not named: its {finding.metric} ratio {finding.ratio:.2f} "
            f"({finding.agree} repeats) passed, but its pairs stand apart by intervals from "
            f"{len(beaten)} of {len(nodes) - 1} other nodes ({apart}); a healthy majority "
            f"is {majority(len(nodes))}")


def _no_majority(finding):
    """The note of a peer-statistic outlier not named in a fabric split in
    slow and fast links (no healthy majority to compare with)."""
    return (f"{finding.label} not named: its {finding.metric} ratio {finding.ratio:.2f} "
            f"({finding.agree} repeats) is against peers of which as many have slow links "
            f"as fast: no healthy majority to compare with")


def _votes_apart(ratios, threshold, rng):
    """(median, "votes/total", ci, slow): `ratios` (one a repeat, below 1
    slower) pass the threshold as the peer statistics must (`judge`)."""
    med, votes, total, ci = _summary(ratios, False, threshold, rng)
    slow = bool(total and med <= threshold and ci[1] < 1 and votes >= AGREE * total)
    return med, f"{votes}/{total}", ci, slow


def _uplinks(bw, leaf, threshold, rng, scores):
    """Findings for the uplinks between leaves: the pairs across two leaves
    over the pairs inside a leaf, per repeat.  A slow spine slows every
    pair across it alike, so every node's peer ratio stays near 1; only
    this comparison sees it."""
    n = len(leaf)
    inside = [(i, j) for i in range(n) for j in range(i + 1, n) if leaf[i] == leaf[j]]
    if not inside:
        return []
    ref = np.nanmedian(np.stack([bw[:, i, j] for i, j in inside], axis=1), axis=1)
    out = []
    names = sorted(set(leaf))
    for ai, a in enumerate(names):
        for b in names[ai + 1:]:
            across = [(i, j) for i in range(n) for j in range(i + 1, n)
                      if {leaf[i], leaf[j]} == {a, b}]
            if not across:
                continue
            own = np.nanmedian(np.stack([bw[:, i, j] for i, j in across], axis=1), axis=1)
            med, agree, ci, slow = _votes_apart(own / ref, threshold, rng)
            scores.setdefault("uplink", {})[f"{a}<->{b}"] = None if np.isnan(med) else round(med, 4)
            if slow:
                v, r = float(np.nanmedian(own)), float(np.nanmedian(ref))
                out.append(Finding(
                    f"{a}<->{b}", "uplink", "uplink", med, v, r, agree, ci,
                    f"the {len(across)} pairs across it ran {1 / med:.2f}x slower than the "
                    f"{len(inside)} pairs inside a leaf ({_fmt('bandwidth', v)} vs "
                    f"{_fmt('bandwidth', r)}; {agree} repeats agree; 90% CI of the ratio "
                    f"{ci[0]:.2f}-{ci[1]:.2f})"))
    return out


def _best_pair(bw, x):
    """Per repeat: the rate of node x's fastest pair.  A pair runs at its
    slower end's rate, so a node with one fast pair has a fast link: this
    is the node's own link, seen from its best partner."""
    others = [k for k in range(bw.shape[1]) if k != x]
    return np.nanmax(bw[:, x, others], axis=1)


def _against_baseline(raw, bw, baseline, threshold, rng, scores):
    """{node: Finding} of nodes whose link is slow against the baseline:
    every pair's rate over the baseline's, and the node's best pair's ratio
    per repeat (`_best_pair`): two slow nodes of four slow five of the six
    pairs, but each healthy node still has a full-rate pair."""
    n, fig = len(raw.nodes), pair_figure(raw.plan.get("backend", TCP))
    ref = np.full((n, n), np.nan)
    for a in range(n):
        for b in range(n):
            samples = baseline.samples(fig, {"node": raw.nodes[a], "peer": raw.nodes[b]})
            if samples is not None and samples.size:
                ref[a, b] = float(np.median(samples))
    ratio = bw / ref[None]
    out = {}
    scores["baseline"] = {}
    for x in range(n):
        best = _best_pair(ratio, x)
        med, agree, ci, slow = _votes_apart(best, threshold, rng)
        scores["baseline"][raw.nodes[x]] = None if np.isnan(med) else round(med, 4)
        if slow:
            others = [j for j in range(n) if j != x]
            k = others[int(np.nanargmax(np.nanmedian(ratio[:, x, others], axis=0)))]
            v = float(np.nanmedian(bw[:, x, k]))
            out[x] = Finding(raw.nodes[x], "link", "baseline", med, v, float(ref[x, k]), agree,
                             ci, f"even its fastest pair ran {1 / med:.2f}x slower than in the "
                                 f"baseline {baseline.path} (with {raw.nodes[k]}: "
                                 f"{_fmt('bandwidth', v)} vs {_fmt('bandwidth', ref[x, k])}; "
                                 f"{agree} repeats agree; 90% CI of the ratio "
                                 f"{ci[0]:.2f}-{ci[1]:.2f})")
    return out


def _links(bw):
    """Each node's link rate: its fastest pair (`_best_pair`), median over
    the repeats (B/s; NaN where none was measured)."""
    n = bw.shape[1]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(np.stack([_best_pair(bw, x) for x in range(n)], axis=1), axis=0)


def _slower_links(bw, threshold):
    """Node indices whose link (`_links`) runs at most `threshold` of the
    fastest node's."""
    best = _links(bw)
    if not np.isfinite(best).any():
        return []
    top = np.nanmax(best)
    return [x for x in range(len(best)) if best[x] <= threshold * top]


def _unexplained_spread(bw, nodes, threshold, have_baseline):
    """Why the verdict cannot tell ("" when it can): some nodes' links
    (`_best_pair`, median over repeats) run below `threshold` of the
    fastest node's, yet no node, link or uplink stands out against its
    peers.  Half the nodes slow alike look like this: without a baseline
    the kit cannot say which half is the normal one."""
    slower = _slower_links(bw, threshold)
    if not slower:
        return ""
    best = _links(bw)
    top = np.nanmax(best)
    hint = "" if have_baseline else ("; a baseline saved on the healthy cluster "
                                     "(--save-baseline, then --baseline FILE) would tell")
    why = ("as many nodes are slow as fast: no healthy majority to compare with"
           if 2 * len(slower) >= len(nodes) else
           "none stands apart from a healthy majority of its peers")
    return (f"the links of {', '.join(nodes[x] for x in slower)} look slower (their fastest "
            f"pair at {max(best[x] for x in slower) / top:.2f}x the fastest node's, "
            f"{_fmt('bandwidth', max(best[x] for x in slower))} vs {_fmt('bandwidth', top)}) "
            f"but no node can be named against its peers: {why}{hint}")


def _bisection(raw, threshold):
    """{node: Finding} of the bisection's culprits (`bisect.replay` of the
    recorded path)."""
    spec = raw.plan.get("bisect")
    if not spec or not raw.bisect:
        return {}
    leaf = spec.get("leaf")
    d = _bisect.replay(spec["order"], raw.bisect, threshold,
                       (lambda k: leaf[k]) if leaf else None, raw.nodes)
    if not d.culprits:
        return {}
    label = lambda g: "+".join(raw.nodes[k] for k in g)  # noqa: E731
    trail = [label(d.path[0]["groups"][0])] + [
        f"{label(e['slower'])} ({1 / e['ratio'] if e['slower'] == e['groups'][0] else e['ratio']:.2f}x"
        " slower than the other half)" for e in d.path if "slower" in e]
    last, out = d.path[-1], {}
    for c in d.culprits:
        k = next(i for i, p in enumerate(last["groups"]) if p[0] == c["node"])
        rates = last["median_busbw"]
        ref = float(np.median([r for i, r in enumerate(rates) if i != k]))
        detail = (f"bisection of the all_reduce: {' -> '.join(trail)}; its pair with "
                  f"{raw.nodes[last['groups'][k][1]]} (known good) ran at "
                  f"{_fmt('bandwidth', rates[k])} vs {_fmt('bandwidth', ref)} for the other "
                  f"pairs ({1 / c['ratio']:.2f}x slower; {c['agree']} repeats agree; 90% CI "
                  f"of the ratio {c['ci'][0]:.2f}-{c['ci'][1]:.2f})")
        out[c["node"]] = Finding(raw.nodes[c["node"]], "link", "bisection", c["ratio"],
                                 rates[k], ref, c["agree"], tuple(c["ci"]), detail)
    return out


def _loss(raw):
    """{node: Finding} of retransmission timeouts in the pairs' 8-byte trips
    (`lat_s`: a sendrecv's call, one-way where both ends send at once, a
    round trip through tcp; half a ping-pong in records of older kits' tcp
    transport): `kind` "link" where most of the
    node's pairs had some, at least 3 in all, and ten times fewer (per trip)
    elsewhere; "" otherwise (the ratio is kept as the node's score)."""
    n = len(raw.nodes)
    events, total = np.zeros((n, n)), np.zeros((n, n))
    for rec in raw.pair:
        rtt = 2 * np.asarray(rec["lat_s"])
        for i, j in ((rec["a"], rec["b"]), (rec["b"], rec["a"])):
            events[i, j] += np.sum(rtt >= RTO_S)
            total[i, j] += rtt.size
    out = {}
    for x in range(n):
        others = [k for k in range(n) if k != x]
        ev, tot = events[x, others].sum(), total[x, others].sum()
        rest = [(i, j) for i in others for j in others if i < j]
        ev_o = sum(events[i, j] for i, j in rest)
        tot_o = sum(total[i, j] for i, j in rest)
        rate, rate_o = ev / max(tot, 1), ev_o / max(tot_o, 1)
        pairs_with = int(np.sum(events[x, others] > 0))
        need = max(2, len(others) - 1)
        hit = (len(others) >= 2 and rest and ev >= 3 and pairs_with >= need
               and rate >= 10 * max(rate_o, 1 / max(tot_o, 1)))
        ratio = rate / max(rate_o, 1 / max(tot_o, 1)) if tot_o else float("nan")
        detail = (f"{int(ev)} of {int(tot)} 8-byte trips through it waited for a TCP "
                  f"retransmission timeout (twice the trip >= {RTO_S * 1e3:.0f} ms), {int(ev_o)} of "
                  f"{int(tot_o)} elsewhere; {pairs_with}/{len(others)} of its pairs "
                  "(lost packets)")
        out[x] = Finding(raw.nodes[x], "link" if hit else "", "loss", ratio, rate, rate_o,
                         f"{pairs_with}/{len(others)}", (float("nan"), float("nan")), detail)
    return out


def _own_and_ref(values, x, name):
    n = values.shape[1]
    others = [k for k in range(n) if k != x]
    if name == "local":
        return float(np.nanmedian(values[:, x])), float(np.nanmedian(values[:, others]))
    own = float(np.nanmedian(values[:, x, others]))
    rest = [values[:, i, j] for i in others for j in others if i < j]
    return own, float(np.nanmedian(np.stack(rest))) if rest else float("nan")


def hang_verdict(stall, message):
    """A `Verdict` naming the hosts of the ranks a stalled run waited for."""
    hosts = list(dict.fromkeys(stall.hosts[r] or f"rank {r}" for r in stall.culprits))
    if stall.kind == "stuck":  # every rank alive and stuck together: nobody to blame
        return Verdict(notes=[message], failed=True)
    detail = {"stopped": "stopped (no heartbeat): the run hung waiting for it",
              "missing": "never started its rank(s)",
              "late": "did not arrive at the collective the others wait in"}[stall.kind]
    v = Verdict(notes=[message])
    for h in hosts:
        v.findings.append(Finding(h, "node", "hang", float("nan"), float("nan"), float("nan"),
                                  "", (float("nan"), float("nan")), detail))
    return v


def death_verdict(dead, message, measured, again=False):
    """A `Verdict` for a run in which a rank was killed by a signal.

    `dead`: (rank, host, signal) as the launcher reported them, the one
    whose death caused the others first (`launch.watchdog.cause_first`).
    Mid-check (`measured`: some records were written) the host of the
    first is named: ``node3 (died during the check)``.  Before any
    measurement a crash in MPI start-up says nothing of the node's health:
    the verdict is unknown, naming where it happened (`again`: in the second
    start too)."""
    rank, host, sig = dead[0]
    host = host or f"rank {rank}"
    if not measured:
        twice = ", in both starts" if again else ""
        return Verdict(notes=[message], failed=True,
                       failed_at=f"{host}: rank {rank} died of {signal_name(sig)} in start-up"
                                 f"{twice}")
    v = Verdict(notes=[message])
    v.findings.append(Finding(host, "died", "died", float("nan"), float("nan"), float("nan"), "",
                              (float("nan"), float("nan")),
                              f"rank {rank} was killed by {signal_name(sig)} during the check"))
    return v


def signal_name(sig):
    """"SIGSEGV" for 11, "signal 77" for a number that names none."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _gbps(value):
    """GB/s for a note: one decimal, or two significant digits below 0.1
    (a slow host's 0.0004 is not "0.0")."""
    return f"{value:.1f}" if value >= 0.1 else f"{value:.2g}"
