"""α-β(-γ) (Hockney) costs of every algorithm the kit runs, and lower bounds.

Every model is linear in the machine parameters::

    T(n) = L·α + W·β + R·γ

with L the message steps on the critical path, W the bytes that cross the
busiest link and R the bytes reduced on the critical path.  `cost` returns
(L, W, R), so the same tables serve prediction (`predict_time`) and the least
squares fit (`fit.fit`), which solves for α, β and γ directly.

Conventions (docs/theory.md): p = ranks; n = the collective's size in
nccl-tests' convention (per-rank buffer for all_reduce, broadcast, reduce;
total output / input for all_gather, reduce_scatter, gather, scatter; each
rank's total send for alltoall); α in s, β = 1/B in s/B, γ in s/B.

Where the textbook formulas assume a power of two, non-powers of two follow
MPICH (Thakur, Rabenseifner & Gropp 2005): the p − p' extra ranks fold into
their partners before and unfold after the power-of-two part, p' = 2^⌊lg p⌋.
Alltoall's bandwidth term counts the (p−1)/p·n bytes that really leave a
rank (the textbook writes nβ, the large-p limit).
"""
import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .. import collectives

# NCCL protocols move payload plus flags: LL 8 B of data per 16 B line,
# LL128 120 B per 128 B line, Simple all payload (NCCL's design, tuning.cc).
NCCL_PROTOCOL_EFFICIENCY = {"simple": 1.0, "ll128": 120 / 128, "ll": 0.5}

# Collectives whose operation reduces data (γ term), by canonical name.
REDUCING = ("all_reduce", "reduce_scatter", "reduce")


@dataclass(frozen=True)
class Cost:
    """Coefficients of T = latency·α + bandwidth·β + reduction·γ.

    Attributes may be numpy arrays (one value per size).
    """

    latency: object    # α terms: messages on the critical path
    bandwidth: object  # β terms: bytes over the busiest link
    reduction: object  # γ terms: bytes reduced on the critical path

    def time(self, alpha, beta, gamma=0.0):
        """Seconds for α (s), β (s/B), γ (s/B)."""
        return self.latency * alpha + self.bandwidth * beta + self.reduction * gamma


def _lg(p):
    """⌈lg p⌉, the steps of a binomial tree or a hypercube exchange."""
    return math.ceil(math.log2(p)) if p > 1 else 0


def _pow2_below(p):
    return 1 << (p.bit_length() - 1)


def _frac(p):
    return (p - 1) / p


# -- one function per (collective, algorithm); n is an ndarray of bytes ------

def _allreduce_ring(n, p, k):
    return 2 * (p - 1), 2 * _frac(p) * n, _frac(p) * n


def _allreduce_direct(n, p, k):
    # Direct reduce-scatter then direct all-gather, p-1 messages each; in the
    # single-port Hockney model the same cost as the ring (it differs in
    # practice through contention and message concurrency).
    return 2 * (p - 1), 2 * _frac(p) * n, _frac(p) * n


def _allreduce_recursive_doubling(n, p, k):
    q = _pow2_below(p)
    steps = int(math.log2(q))
    extra = p != q  # fold in (send n, reduce n), unfold (send n)
    return steps + 2 * extra, (steps + 2 * extra) * n, (steps + extra) * n


def _allreduce_rabenseifner(n, p, k):
    q = _pow2_below(p)
    steps = int(math.log2(q))
    extra = p != q
    return (2 * steps + 2 * extra, 2 * _frac(q) * n + 2 * extra * n,
            _frac(q) * n + extra * n)


def _allreduce_tree(n, p, k):
    # Binomial reduce then binomial broadcast, whole vector at every step.
    s = _lg(p)
    return 2 * s, 2 * s * n, s * n


def _nccl_allreduce_ring(n, p, k):
    return _allreduce_ring(n, p, k)


def _nccl_allreduce_tree(n, p, k):
    # Double binary tree, pipelined: ≈ 2⌈lg p⌉α + 2nβ (docs/theory.md).
    return 2 * _lg(p), 2 * n, _frac(p) * n


def _allgather_ring(n, p, k):
    return p - 1, _frac(p) * n, 0 * n


def _allgather_log(n, p, k):
    # recursive doubling, Bruck, and NCCL's PAT
    return _lg(p), _frac(p) * n, 0 * n


def _reducescatter_ring(n, p, k):
    return p - 1, _frac(p) * n, _frac(p) * n


def _reducescatter_recursive_halving(n, p, k):
    q = _pow2_below(p)
    steps = int(math.log2(q))
    if q == p:
        return steps, _frac(p) * n, _frac(p) * n
    # fold in: n/p·(per extra rank's whole input) ≈ n, then halving on q
    # ranks of the n(q/p) data, then each extra rank's block back
    return (steps + 2, _frac(q) * n * q / p + n + n / p,
            _frac(q) * n * q / p + n)


def _reducescatter_pat(n, p, k):
    return _lg(p), _frac(p) * n, _frac(p) * n


def _alltoall_linear(n, p, k):
    # pairwise exchange and direct: p-1 messages of n/p each, plus the copy
    # of the rank's own block out of place: (p-1)α + nβ (docs/theory.md)
    return p - 1, 1.0 * n, 0 * n


def _alltoall_bruck(n, p, k):
    # step k sends every block whose index has bit k set (the textbook's n/2
    # per step, exact for any p)
    blocks = sum(sum(1 for j in range(1, p) if j >> b & 1) for b in range(_lg(p)))
    return _lg(p), blocks * n / p, 0 * n


def _alltoallv_linear(n, p, k):
    # pairwise and direct: p-1 messages; n is the largest rank's send or
    # receive total, all of it to other ranks in nccl-tests' default pattern
    return p - 1, 1.0 * n, 0 * n


def _hypercube_recursive_doubling(n, p, k):
    # all_gather by recursive doubling; n = count × (p-1), the bytes that
    # reach each rank: ⌈lg p⌉α + nβ, the lower bound itself
    return _lg(p), 1.0 * n, 0 * n


def _broadcast_binomial(n, p, k):
    s = _lg(p)
    return s, s * n, 0 * n


def _broadcast_scatter_allgather(n, p, k):
    return _lg(p) + p - 1, 2 * _frac(p) * n, 0 * n


def _chain(n, p, k):
    # Pipelined chain, k segments: (p + k - 2)(α + nβ/k)
    k = np.maximum(np.asarray(k, dtype=float), 1.0)
    steps = p + k - 2 if p > 1 else 0 * k
    return steps, steps * n / k, 0 * n


def _nccl_broadcast_ring(n, p, k):
    # NCCL pipelines the ring in small chunks: ≈ (p-1)α + nβ
    return p - 1, 1.0 * n, 0 * n


def _reduce_binomial(n, p, k):
    s = _lg(p)
    return s, s * n, s * n


def _nccl_reduce_ring(n, p, k):
    return p - 1, 1.0 * n, 1.0 * n


def _rooted_linear(n, p, k):
    # gather / scatter: the root talks to each of the p-1 others in turn
    return p - 1, _frac(p) * n, 0 * n


def _rooted_binomial(n, p, k):
    return _lg(p), _frac(p) * n, 0 * n


MODELS = {
    "all_reduce": {
        "ring": _allreduce_ring,
        "recursive_doubling": _allreduce_recursive_doubling,
        "rabenseifner": _allreduce_rabenseifner,
        "tree": _allreduce_tree,
        "direct": _allreduce_direct,
        "nccl:ring": _nccl_allreduce_ring,
        "nccl:tree": _nccl_allreduce_tree,
    },
    "all_gather": {
        "ring": _allgather_ring,
        "recursive_doubling": _allgather_log,
        "bruck": _allgather_log,
        "direct": _allgather_ring,
        "nccl:ring": _allgather_ring,
        "nccl:pat": _allgather_log,
    },
    "reduce_scatter": {
        "ring": _reducescatter_ring,
        "recursive_halving": _reducescatter_recursive_halving,
        "direct": _reducescatter_ring,
        "nccl:ring": _reducescatter_ring,
        "nccl:pat": _reducescatter_pat,
    },
    "alltoall": {
        "pairwise": _alltoall_linear,
        "bruck": _alltoall_bruck,
        "direct": _alltoall_linear,
    },
    "alltoallv": {
        "pairwise": _alltoallv_linear,
        "direct": _alltoallv_linear,
    },
    "hypercube": {"recursive_doubling": _hypercube_recursive_doubling},
    "broadcast": {
        "binomial": _broadcast_binomial,
        "scatter_allgather": _broadcast_scatter_allgather,
        "chain": _chain,
        "nccl:ring": _nccl_broadcast_ring,
    },
    "reduce": {
        "binomial": _reduce_binomial,
        "nccl:ring": _nccl_reduce_ring,
    },
    "gather": {"linear": _rooted_linear, "binomial": _rooted_binomial},
    "scatter": {"linear": _rooted_linear, "binomial": _rooted_binomial},
}

# Spellings people use for the same algorithm.
ALIASES = {
    "rd": "recursive_doubling", "recursive_doubling": "recursive_doubling",
    "rhd": "rabenseifner", "halving_doubling": "rabenseifner",
    "recursive_halving_doubling": "rabenseifner",
    "rh": "recursive_halving", "binary": "binomial", "binomial_tree": "binomial",
    "mesh": "direct", "pipeline": "chain", "pipelined_chain": "chain",
    "scatter_ring_allgather": "scatter_allgather",
}

# Algorithms with a `segments` parameter.
SEGMENTED = {("broadcast", "chain")}
# The MPI engine's pipelining segment when a run sets none (ext/coll.h).
ENGINE_SEGMENT_DEFAULT = 256 << 10


def canonical_collective(name):
    """The collective's canonical name (``allr`` -> ``all_reduce``).

    The collectives' registry is the one source of names and spellings
    (`ccbench_kit.collectives.get`); `MODELS` is keyed by its names.
    """
    return collectives.get(name).name


def split_algorithm(algorithm):
    """(base, protocol) of an algorithm name: ``nccl:ring/ll`` -> (``nccl:ring``, ``ll``)."""
    a = str(algorithm).strip().lower().replace("-", "_")
    proto = ""
    if "/" in a:
        a, proto = a.split("/", 1)
    if a.startswith("nccl:"):
        return a, proto
    return ALIASES.get(a, a), proto


def has_model(collective, algorithm):
    """True when (collective, algorithm) has an α-β model here.

    The library's own choices (``mpi``, ``nccl``) and in-switch reductions
    (NVLS, CollNet) have none; `curve` then uses the generic A + F·S/B form.
    """
    try:
        coll = canonical_collective(collective)
    except ConfigError:
        return False
    base, proto = split_algorithm(algorithm)
    return base in MODELS.get(coll, {}) and (not proto or proto in NCCL_PROTOCOL_EFFICIENCY)


def algorithms(collective):
    """Algorithm names with a model for `collective`."""
    return sorted(MODELS.get(canonical_collective(collective), {}))


def _model(collective, algorithm):
    coll = canonical_collective(collective)
    base, proto = split_algorithm(algorithm)
    table = MODELS.get(coll)
    if table is None:
        raise ConfigError(f"no α-β models for collective {coll!r}; models exist for "
                          + ", ".join(MODELS), "collective")
    if base not in table:
        raise ConfigError(f"no α-β model for {coll} algorithm {algorithm!r}; models exist for "
                          + ", ".join(sorted(table)), "algorithm")
    if proto and proto not in NCCL_PROTOCOL_EFFICIENCY:
        raise ConfigError(f"unknown NCCL protocol {proto!r} in {algorithm!r}; use "
                          + ", ".join(NCCL_PROTOCOL_EFFICIENCY), "algorithm")
    return coll, base, table[base], NCCL_PROTOCOL_EFFICIENCY.get(proto, 1.0)


def _check_ranks(nranks):
    p = int(nranks)
    if p < 1 or p != nranks:
        raise ConfigError(f"rank count must be a positive integer, got {nranks!r}", "nranks")
    return p


def segments_for(nbytes, segment_bytes):
    """Segments of a pipelined algorithm: ⌈n / segment_bytes⌉ (≥ 1)."""
    n = np.asarray(nbytes, dtype=float)
    if not segment_bytes or segment_bytes <= 0:
        return np.ones_like(n)
    return np.maximum(np.ceil(n / float(segment_bytes)), 1.0)


def best_segments(nbytes, nranks, alpha, beta):
    """k minimising the pipelined chain's (p + k − 2)(α + nβ/k): √((p−2)nβ/α)."""
    n = np.asarray(nbytes, dtype=float)
    if alpha <= 0:
        return np.maximum(n, 1.0)
    k = np.sqrt(max(nranks - 2, 0) * n * beta / alpha)
    lo, hi = np.maximum(np.floor(k), 1.0), np.maximum(np.ceil(k), 1.0)
    # the optimum over integers is one of the two neighbours
    t = lambda kk: (nranks + kk - 2) * (alpha + n * beta / kk)  # noqa: E731
    return np.minimum(np.where(t(lo) <= t(hi), lo, hi), np.maximum(n, 1.0))


def cost(collective, algorithm, nbytes, nranks, segments=None):
    """The α, β, γ coefficients (`Cost`) of one algorithm at size(s) `nbytes`.

    Parameters
    ----------
    collective : str
        ``all_reduce``, ``all_gather``, ... (aliases accepted).
    algorithm : str
        ``ring``, ``recursive_doubling``, ``nccl:ring/ll128``...
    nbytes : int or array
        Size in the collective's nccl-tests convention.
    nranks : int
    segments : int or array, optional
        Pipeline segments (chain broadcast); 1 when not given.
    """
    coll, base, fn, eff = _model(collective, algorithm)
    p = _check_ranks(nranks)
    n = np.asarray(nbytes, dtype=float)
    if p == 1:
        z = 0 * n
        return Cost(z, z, z)
    k = np.ones_like(n) if segments is None else np.asarray(segments, dtype=float)
    lat, bw, red = fn(n, p, k)
    lat = np.asarray(lat, dtype=float) + 0 * n
    return Cost(lat, np.asarray(bw, dtype=float) / eff, np.asarray(red, dtype=float) + 0 * n)


def predict_time(collective, algorithm, nbytes, nranks, alpha, beta, gamma=0.0,
                 segments=None, segment_bytes=None):
    """Predicted seconds of one call, by the algorithm's α-β(-γ) model.

    Parameters
    ----------
    collective, algorithm : str
    nbytes : int or array
        Size in the collective's nccl-tests convention (docs/theory.md).
    nranks : int
    alpha : float
        Per-message latency, seconds.
    beta : float
        Seconds per byte (1 / link bandwidth in B/s).
    gamma : float
        Seconds per byte reduced (reductions only).
    segments : int or array, optional
        Pipeline segments for segmented algorithms; default: `segment_bytes`
        if given, else the k that minimises the time.
    segment_bytes : int, optional

    Returns
    -------
    float or ndarray
        Seconds, the shape of `nbytes`.

    Examples
    --------
    >>> predict_time("all_reduce", "ring", 1 << 20, 4, alpha=5e-6, beta=1e-10)
    """
    coll, base, _, _ = _model(collective, algorithm)
    if segments is None and (coll, base) in SEGMENTED:
        segments = (segments_for(nbytes, segment_bytes) if segment_bytes
                    else best_segments(nbytes, int(nranks), alpha, beta))
    t = cost(coll, algorithm, nbytes, nranks, segments).time(alpha, beta, gamma)
    return float(t) if np.ndim(t) == 0 else t


def lower_bound_cost(collective, nbytes, nranks):
    """`Cost` of the lower bound for any point-to-point algorithm.

    ⌈lg p⌉ α (a message reaches at most twice as many ranks per step) plus
    F·n β, the bus factor's bytes (so busbw ≤ B), plus (p−1)/p·n γ for
    reductions (Chan et al. 2007; Patarasuk & Yuan 2009).  Every term is a
    bound on its own.  Sendrecv-like collectives (F = 1, one step) take one α.
    """
    coll = canonical_collective(collective)
    p = _check_ranks(nranks)
    n = np.asarray(nbytes, dtype=float)
    if p == 1:
        z = 0 * n
        return Cost(z, z, z)
    factor = bus_factor(coll, p)
    steps = 1 if coll in ("sendrecv", "permute") else _lg(p)
    red = _frac(p) * n if coll in REDUCING else 0 * n
    return Cost(steps + 0 * n, factor * n, red)


def lower_bound(collective, nbytes, nranks, alpha, beta, gamma=0.0):
    """Seconds no point-to-point algorithm can beat (see `lower_bound_cost`)."""
    t = lower_bound_cost(collective, nbytes, nranks).time(alpha, beta, gamma)
    return float(t) if np.ndim(t) == 0 else t


def bus_factor(collective, nranks):
    """busbw / algbw for `collective` on `nranks`: the collective module's own."""
    return collectives.get(collective, "collective").bus_factor(_check_ranks(nranks))
