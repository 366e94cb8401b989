"""Skewed alltoallv traffic for MoE-like workloads: ``--alltoallv-pattern``.

Every rank sends the same total T elements per size (T = size / itemsize,
rounded down to a multiple of the rank count, as the default pattern), split
among the ranks (itself included, as an expert-parallel dispatch is) by
weights:

- ``uniform``: each pair's weight drawn uniformly from [0, 1), per sender;
- ``zipf:S`` (S > 0): the ranks ordered by a random popularity (one order for
  every sender, as tokens favour the same experts); the k-th most popular
  gets weight 1/k^S, so a few ranks receive most of the traffic;
- ``hot:R[:F]``: rank R gets F times the weight of every other rank
  (default F = the rank count), a single hot expert.

Draws come from ``numpy.random.default_rng(seed)`` (``--seed``), so every
rank builds the same matrix.  Counts are the weights scaled to T and rounded
down, the remainder handed out by largest fraction, so each row sums to T
exactly.  The Dataset's size is then the largest total a rank receives.
"""
import math

import numpy as np

from ..errors import ConfigError

FLAG = "--alltoallv-pattern"
KINDS = ("uniform", "zipf", "hot")


def parse_pattern(spec, nranks=None, flag=FLAG):
    """(kind, parameter) from ``uniform``, ``zipf:1.2`` or ``hot:3[:8]``."""
    words = str(spec).strip().lower().split(":")
    kind, args = words[0], words[1:]
    try:
        numbers = [float(a) for a in args]
    except ValueError:
        numbers = None
    if numbers and not all(math.isfinite(n) for n in numbers):
        raise ConfigError(f"{spec!r}: the numbers of a pattern must be finite", flag)
    if kind == "uniform" and not args:
        return ("uniform",)
    if kind == "zipf" and numbers and len(numbers) == 1 and numbers[0] > 0:
        return ("zipf", numbers[0])
    if kind == "hot" and numbers and len(numbers) <= 2 and numbers[0] == int(numbers[0]):
        rank = int(numbers[0])
        factor = numbers[1] if len(numbers) == 2 else None
        if rank < 0 or (nranks is not None and rank >= nranks):
            raise ConfigError(f"hot rank {rank} is not one of the ranks 0..{nranks - 1}", flag)
        if factor is not None and not factor > 0:
            raise ConfigError(f"the hot rank's factor must be > 0, got {factor:g}", flag)
        return ("hot", rank, factor)
    raise ConfigError(f"unknown pattern {spec!r}; use uniform, zipf:S (S > 0) or hot:RANK[:FACTOR]",
                      flag)


def weights(pattern, nranks, seed):
    """(nranks, nranks) weights, each row summing to 1."""
    rng = np.random.default_rng(seed)
    p = nranks
    kind = pattern[0]
    if kind == "uniform":
        w = rng.random((p, p))
    elif kind == "zipf":
        popularity = rng.permutation(p)              # popularity[j]: rank j's place, 0 = most
        w = np.broadcast_to(1.0 / (popularity + 1.0) ** pattern[1], (p, p)).copy()
    else:
        _, hot, factor = pattern
        w = np.ones((p, p))
        w[:, hot] = float(p if factor is None else factor)
    w = np.where(w.sum(axis=1, keepdims=True) > 0, w, 1.0)
    return w / w.sum(axis=1, keepdims=True)


def skewed_counts(pattern, total, nranks, seed):
    """Integer counts[i][j] (elements from i to j), each row summing to `total`."""
    exact = weights(pattern, nranks, seed) * total
    counts = np.floor(exact).astype(np.int64)
    short = total - counts.sum(axis=1)
    order = np.argsort(-(exact - counts), axis=1, kind="stable")
    for i in range(nranks):
        counts[i, order[i, :short[i]]] += 1
    return counts
