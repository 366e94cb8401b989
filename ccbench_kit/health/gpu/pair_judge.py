"""The pair matrix's verdict (`pairs`): which pair of GPUs, or which GPU's
NVLink, and the figure that moved.

Each figure of each link (a -> b) or pair (a <-> b) is scored against
three references, with the GPU figures' rule (`judge`: median ratio over
the repeats at or below the threshold, `AGREE` of the repeats agreeing,
the bootstrap 90 % interval below 1):

- **peers**: per repeat, the figure over the *best* of the other links'
  (pairs') figures.  Not their median: a GPU whose NVLink is busy slows
  every pair it is in, n - 1 of the n (n - 1) / 2 pairs (half of them on
  4 GPUs), and two such GPUs slow 5 of 6; the best other pair stays a
  healthy one while one pair of the node is.  Healthy pairs of an NVSwitch
  node agree within a few per cent, so the best is not an outlier;
- **preset**: the one-way copy over the GPU model's NVLink rate per
  direction (`theory.presets`, ``peer_gbps``), both ways over twice it;
- **baseline**: a saved healthy run (`health.baseline`), 0.8x.

The preset's and the baseline's evidence names something only where it
also stands apart from the best other pair over the same reference
(`_mark_common`): a move of all the node's pairs is not one pair's.

Latency is judged against the median of the other links (a few us, where
the best of them would be one lucky reading of the events' 0.5 us
resolution), and only when it is more than its resolution
(`LATENCIES`: 1 us for the 8 B copy, 0.05 us for the SM latency) above
it; it has no preset (the copy engine's start-up time is not a link figure
a datasheet gives); a higher latency is the worse one.

Then who is named (`attribute`): the pairs that moved are grouped by GPU.
A pair of a GPU the GPU checks named, or (the ``--per-gpu`` NCCL pairs)
of a GPU of a pair they named, joins that finding.  A GPU all of whose
pairs moved (3 GPUs or more) is the cause, not each pair: its NVLink is
named (``HOST gpu1 nvlink``).  Exactly two such GPUs are the two ends of
one busy or degraded pair (a copy loop between them loads both GPUs'
NVLink ports, so every pair of either end is slower):
``HOST gpu1<->gpu3 NVLink``.  *Every* GPU so (every pair moved): nothing
separates a pair or a GPU from a healthy rest; the host's NVLink as a
whole is named (``HOST NVLink``: a slower NVSwitch fabric, a node-wide
power cap or driver).  A pair that moved alone is named as the pair; one
that moved beside other pairs of its GPUs, none of which explains it, does
not stand apart from them: a note, and ``cannot tell`` if nothing is named.

The latencies never name on their own (`SUPPORTING`): each joins a
finding of its pair or of one of its GPUs, else it is a note.  The SM load
latency is a round trip over the link, evidence beside the bandwidths (a
longer path or a queue on the link), not a finding without them.  The 8 B
copy's few us are the copy engine's start and the host's launch, the
NVLink's own part far below the events' resolution: on 4 H200
(2026-11-28) a clean run's 12 links all read 7.0-7.3 us against the
baseline's 5.1-5.2 (a host-wide
shift, bandwidth unchanged), while a copy loop that took 40 % of a pair's
bandwidth left its latency at 5.0-5.3 us.  The NVLink recovery errors that
grew during the matrix name the GPU's NVLink on their own; CRC and replay
errors (corrected by the link) join a finding of that GPU, else they are a
note.
"""
from dataclasses import dataclass

import numpy as np

from .. import baseline as _baseline
from ..verdict import AGREE, _summary
from . import nvml as _nvml
from .pairs import PAIR_FIGURES, SHORT, ends, named

PEER_THRESHOLD = 0.75
PRESET_THRESHOLD = 0.75
PRESET_SCALE = {"peer_gbps": 1.0, "peer_bidir_gbps": 2.0}  # x the preset's per-direction rate
# the latencies: (how far above its peers' one is still not judged, µs; its
# name in a note).  CUDA events resolve about 0.5 us, and a copy engine's
# latency is a few us; the SM latency is one event pair over 10,000 loads
LATENCIES = {"peer_latency_us": (1.0, "8 B peer-copy latency"),
             "peer_sm_latency_us": (0.05, "SM load latency")}
# a pair moved against the preset or the baseline names it only this far
# below the best other pair over the same reference (`_mark_common`)
APART = _baseline.THRESHOLD


@dataclass
class Evidence:
    """One figure of one link or pair that moved, and why."""

    a: int
    b: int
    figure: str
    reason: str
    ratio: float = float("nan")  # the figure over its reference, < 1 worse (latency too)
    against: str = ""            # the reference: "peers", "preset", "baseline"
    common: bool = False         # moved with the other pairs: not apart (`_mark_common`)


def _fmt(figure, v):
    unit = PAIR_FIGURES[figure][1]
    return f"{v:,.1f} {unit}" if unit == "us" else f"{v:,.0f} {unit}"


def score(ds, node, preset, baseline, rng):
    """({figure: {"NODE/label": row}} scores, [`Evidence`]) of one node's pair
    figures; a row holds {"value", "peers", "preset", "baseline"} ratios
    (None where that reference is missing; < 1 is worse, latency included)."""
    scores, evidence = {}, []
    base = {(s.figure, str(s.where[PAIR_FIGURES[s.figure][0]])): s
            for s in (_baseline.score(ds.sel(node=[node]), baseline)
                      if baseline is not None else []) if s.figure in PAIR_FIGURES}
    for figure, (dim, _, _, better) in PAIR_FIGURES.items():
        if figure not in ds:
            continue
        labels = [str(x) for x in ds[dim].values]
        raw = np.asarray(ds[figure].sel(node=node).transpose(dim, "repeat").values, dtype=float)
        with np.errstate(all="ignore"):
            good = raw if better == "higher" else 1.0 / raw  # higher is better from here
        scores[figure] = {}
        base_good = np.full(len(labels), np.nan)
        for i, label in enumerate(labels):
            if not np.isfinite(raw[i]).any():
                continue  # not measured (no peer access)
            a, b = ends(label)
            med = float(np.nanmedian(raw[i]))
            row = {"value": round(med, 3), "peers": None, "preset": None, "baseline": None}

            def vote(ref, ratios, threshold, against, judged=True):
                m, votes, total, ci = _summary(ratios, False, threshold, rng)
                row[ref] = round(m, 4)
                if judged and total and m <= threshold and ci[1] < 1 \
                        and votes >= AGREE * total:
                    worse = "slower" if better == "higher" else "longer"
                    evidence.append(Evidence(a, b, figure, (
                        f"{named(label)} {SHORT[figure]} {_fmt(figure, med)} is {m:.2f}x {against}"
                        f" ({worse}; {votes}/{total} repeats agree; 90% CI "
                        f"{ci[0]:.2f}-{ci[1]:.2f})"), m, ref))
            others = np.delete(good, i, axis=0)
            if np.isfinite(others).any():
                with np.errstate(all="ignore"):
                    if better == "higher":
                        ref = np.nanmax(np.where(np.isfinite(others), others, -np.inf), axis=0)
                        ref[~np.isfinite(ref)] = np.nan
                        against = "the best other pair's figure (peers)"
                    else:
                        ref = np.nanmedian(others, axis=0)
                        against = "the other links' median (peers)"
                    # a latency within the events' resolution of its peers': shown, not judged
                    judged = better == "higher" or \
                        np.nanmedian(raw[i] - 1.0 / ref) > LATENCIES[figure][0]
                vote("peers", good[i] / ref, PEER_THRESHOLD, against, judged)
            rate = preset.extra.get("peer_gbps") if preset else None
            if rate and figure in PRESET_SCALE:
                typical = rate * PRESET_SCALE[figure]
                vote("preset", good[i] / typical, PRESET_THRESHOLD,
                     f"the preset's NVLink {_fmt(figure, typical)} ({preset.name})")
            s = base.get((figure, label))
            if s is not None:
                row["baseline"] = round(s.ratio if better == "higher" else 1 / s.ratio, 4)
                if s.flagged:
                    evidence.append(Evidence(a, b, figure, (
                        f"{named(label)} {SHORT[figure]} {_fmt(figure, s.now)} is {s.ratio:.2f}x "
                        f"the baseline's {_fmt(figure, s.base)} (baseline {baseline.path}; "
                        f"90% CI {s.ci[0]:.2f}-{s.ci[1]:.2f})"), row["baseline"], "baseline"))
            if s is not None:
                base_good[i] = s.base if better == "higher" else 1.0 / s.base
            scores[figure][f"{node}/{label}"] = row
        _mark_common([e for e in evidence if e.figure == figure], labels, good, base_good)
    return scores, evidence


def _mark_common(evidence, labels, good, base_good):
    """Mark the preset's and the baseline's `evidence` (one figure) that
    does not stand apart from the best other pair, both over the same
    reference (per repeat, median <= `APART`, 90 % interval below 1):
    `common`, a move of the node's every pair, not of this one.  The peers'
    evidence is apart by its rule; with one pair there is no other."""
    rng = np.random.default_rng(1)  # its own stream: the reasons' intervals stay the same
    where = {ends(label): i for i, label in enumerate(labels)}
    for e in evidence:
        if e.against not in ("preset", "baseline"):
            continue
        i = where[(e.a, e.b)]
        with np.errstate(all="ignore"):
            norm = good if e.against == "preset" else good / base_good[:, None]
            others = np.delete(norm, [k for k, label in enumerate(labels)
                                      if set(ends(label)) == {e.a, e.b}], axis=0)
            if not np.isfinite(others).any():
                continue
            best = np.nanmax(np.where(np.isfinite(others), others, -np.inf), axis=0)
            m, _, total, ci = _summary(norm[i] / best, False, APART, rng)
        e.common = not (total and m <= APART and ci[1] < 1)


#: figures that never name a pair or a GPU on their own (module docstring)
SUPPORTING = tuple(LATENCIES)


@dataclass
class Attribution:
    """Who the evidence names (`attribute`)."""

    to_gpu: dict    # {gpu: [Evidence]}: its NVLink, or the GPU finding it joins
    to_pair: dict   # {(a, b): [Evidence]}: the pair, or the named pair it joins
    host: list      # [Evidence]: every pair moved; the host's NVLink as a whole
    shown: list     # [Evidence]: latency that joined no finding (a note)
    unclear: dict = None  # {(a, b): [Evidence]}: moved beside other pairs of its GPUs

    def __post_init__(self):
        self.unclear = {} if self.unclear is None else self.unclear

    def unclear_notes(self, node):
        """Why each pair of `unclear` is not named (notes)."""
        out = []
        for (a, b), es in self.unclear.items():
            near = [p for p in self.moved if p != (a, b) and set(p) & {a, b}]
            out.append(f"{node} gpu{a}<->gpu{b} not named: {es[0].reason}; other pairs of "
                       f"its GPUs moved too ({', '.join(f'gpu{x}<->gpu{y}' for x, y in near)}): "
                       "it does not stand apart from them")
        return out

    @property
    def moved(self):
        """Every pair with naming evidence, whoever took it."""
        out = set(self.unclear)
        for es in [*self.to_gpu.values(), *self.to_pair.values(), self.host]:
            out |= {_pair_of(e) for e in es if e.figure not in SUPPORTING}
        return sorted(out)


def _pair_of(e):
    return min(e.a, e.b), max(e.a, e.b)


def attribute(evidence, gpus, named_gpus=(), named_pairs=()):
    """Who the `evidence` names (`Attribution`; rules in the module docstring).

    `gpus`: the node's GPU indices; `named_gpus`: those the GPU checks
    named (a GPU or its NVLink), `named_pairs`: the pairs (a, b) they named;
    a pair of theirs joins their finding."""
    naming = [e for e in evidence if e.figure not in SUPPORTING and not e.common]
    common = [e for e in evidence if e.figure not in SUPPORTING and e.common]
    by_pair = {}
    for e in naming:
        by_pair.setdefault(_pair_of(e), []).append(e)
    out = Attribution({}, {}, [], [])
    named_gpus, named_pairs = set(named_gpus), [tuple(sorted(p)) for p in named_pairs]
    free = {}
    for p, es in by_pair.items():
        owner = next((g for g in p if g in named_gpus), None)
        joined = next((q for q in named_pairs if set(q) & set(p)), None)
        if owner is not None:
            out.to_gpu.setdefault(owner, []).extend(es)
        elif joined is not None:
            out.to_pair.setdefault(joined, []).extend(es)
        else:
            free[p] = es
    taken = named_gpus.union(*map(set, named_pairs))
    whole = set()
    if len(gpus) >= 3:
        whole = {g for g in gpus if g not in taken
                 and all((min(g, h), max(g, h)) in by_pair for h in gpus if h != g)}
    every = {(g, h) for g in gpus for h in gpus if g < h}
    if len(gpus) >= 3 and not taken and every <= set(by_pair) | {_pair_of(e) for e in common}:
        # every pair moved alike: no healthy pair to tell a GPU or a pair from
        out.host, common = common, []
    if len(gpus) >= 3 and whole == set(gpus):
        out.host += [e for es in free.values() for e in es]
    elif len(whole) == 2 and not taken:
        # two GPUs slow in all their pairs: the pair between them (one copy
        # loop loads both ends' NVLink ports)
        out.to_pair[tuple(sorted(whole))] = [e for es in free.values() for e in es]
    else:
        for p, es in free.items():
            owner = next((g for g in p if g in whole), None)
            if owner is not None:
                out.to_gpu.setdefault(owner, []).extend(es)
            elif any(q != p and set(q) & set(p) for q in by_pair):
                # other pairs of its GPUs moved too, none of them all of its
                # pairs: the evidence does not separate this pair from them
                out.unclear[p] = es
            else:
                out.to_pair.setdefault(p, []).extend(es)
    for e in evidence:
        if e.figure in SUPPORTING or e in common:
            p = _pair_of(e)
            if p in out.to_pair:
                out.to_pair[p].append(e)
            elif set(p) & set(out.to_gpu):
                out.to_gpu[next(g for g in p if g in out.to_gpu)].append(e)
            elif out.host:
                out.host.append(e)
            else:
                out.shown.append(e)
    return out


def shown_notes(node, shown, links):
    """The notes of evidence that joined no finding: latency (`SUPPORTING`)
    and moves common to the node's pairs (`Evidence.common`); `links`: how
    many links were measured."""
    out = []
    for figure in SUPPORTING:
        lat = [e for e in shown if e.figure == figure]
        if not lat:
            continue
        moved = {(e.a, e.b) for e in lat}
        head = (f"{node}: the {LATENCIES[figure][1]} of {len(moved)} of {links} links moved "
                f"against the {_refs(lat)}{_spread(lat, 'longer')} while their bandwidth did not")
        out.append(f"{head}: a host-wide shift (the host's launch latency, clocks), not a link; "
                   "shown, names nothing" if len(moved) >= links - 1 and links > 2 else
                   f"{head}: shown, names nothing (a latency alone does not separate a link "
                   f"from the host: {', '.join(sorted(named(f'{a}->{b}') for a, b in moved))})")
    rest = [e for e in shown if e.figure not in SUPPORTING]
    if rest:
        what = ", ".join(sorted({SHORT[e.figure] for e in rest}))
        out.append(f"{node}: {what} of {len({(e.a, e.b) for e in rest})} links or pairs moved "
                   f"against the {_refs(rest)}{_spread(rest, 'slower')}, but no further than "
                   "the best other pair's: a move of the node's pairs, not of one; shown, names "
                   "nothing")
    return out


def _refs(evidence):
    return " and ".join(sorted({e.against for e in evidence if e.against})) or "references"


def _spread(evidence, worse):
    ratios = [1 / e.ratio for e in evidence if np.isfinite(e.ratio) and e.ratio > 0]
    return f" ({min(ratios):.2f}-{max(ratios):.2f}x {worse})" if ratios else ""


#: the NVLink counters that name a GPU's NVLink on their own: a recovery is
#: the link retraining (its traffic stopped).  A CRC error is corrected by a
#: replay, and a replay is that correction: both are shown, and judged only
#: beside a finding of that GPU (a healthy H200 pair, 394 GB/s each way,
#: counted 29-34 CRC errors in one matrix on the device, 2026-11-28)
JUDGED_COUNTERS = ("nvlink_recovery",)


def counter_reasons(ds, node, gpu):
    """(figure, sentence, judged) for the NVLink error counters of `gpu` that
    grew during the matrix; `judged`: it names the NVLink on its own
    (`JUDGED_COUNTERS`)."""
    out = []
    for key in _nvml.NVLINK_COUNTERS:
        name = f"{key}_during"
        if name not in ds:
            continue
        v = float(ds[name].sel(node=node, gpu=gpu).values)
        if np.isfinite(v) and v > 0:
            total = float(ds[f"{key}_total"].sel(node=node, gpu=gpu).values)
            out.append((name, f"{v:.0f} NVLink {key.removeprefix('nvlink_')} error(s) during "
                              f"the pair matrix ({total:.0f} since the driver loaded)",
                         key in JUDGED_COUNTERS))
    return out
