"""Input data and golden-result checks (``--check random|all_ones``).

Every rank can make every rank's input from the seed, so each rank computes
its own golden output locally: no data crosses ranks for the check.
"""
import numpy as np


def make_input(dtype, nelems, rank, mode, seed):
    """Rank `rank`'s send buffer contents (storage dtype)."""
    if mode == "all_ones":
        return dtype.from_float(np.ones(nelems))
    rng = np.random.default_rng([seed, rank])
    if dtype.is_float:
        # small magnitudes keep prod finite and sums well inside fp16's range
        return dtype.from_float(rng.uniform(0.5, 1.5, nelems) * rng.choice([-1, 1], nelems))
    if dtype.storage.kind == "u":
        return rng.integers(0, 4, nelems, dtype=dtype.storage)
    return rng.integers(-3, 4, nelems, dtype=dtype.storage)


def tolerance(dtype, op, nranks):
    """Relative tolerance for a reduction of `nranks` inputs.

    Each of the p - 1 combining steps rounds once; the order differs between
    algorithms, so allow p rounding errors of the result's size plus one.
    """
    if not dtype.is_float:
        return 0.0
    return 4.0 * (nranks + 1) * dtype.eps


def count_wrong(output, golden, dtype, op, nranks, scale=None):
    """Elements of `output` (storage dtype) that differ from `golden`.

    Floats compare within `tolerance`, relative to `scale` (the sum of the
    magnitudes that were combined; defaults to |golden|).
    """
    output = np.asarray(output).reshape(-1)
    golden = np.asarray(golden).reshape(-1)
    if output.shape != golden.shape:
        return max(output.size, golden.size)
    if not dtype.is_float:
        return int(np.count_nonzero(output != golden.astype(dtype.storage)))
    got = dtype.to_float(output)
    ref = golden.astype(np.float64)
    scale = np.abs(ref) if scale is None else np.asarray(scale).reshape(-1)
    bad = np.abs(got - ref) > tolerance(dtype, op, nranks) * np.maximum(scale, 1e-30)
    bad |= np.isnan(got) != np.isnan(ref)
    return int(np.count_nonzero(bad))
