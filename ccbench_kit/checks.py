"""Input data and golden-result checks (``--check random|all_ones``).

Every rank can make every rank's input from the seed, so each rank computes
its own golden output locally: no data crosses ranks for the check, except
a digest per rank for collectives whose ranks must end identical.

``random``: seeded inputs (floats of magnitude 0.5-1.5 with random signs,
small integers; fp8: ±1 and ±2), golden results in float64 with numpy, compared with a
tolerance that depends on dtype, op and rank count (`tolerance`).
``all_ones``: every input is 1, so every output element must be the single
golden value G of the collective and op (p for a sum over p ranks, 1 for
data movement, prod, min, max and avg).
"""
import hashlib
import os
import tempfile

import numpy as np

from .dtypes import FP8, get_dtype

# elements compared at a time (`count_wrong`): float64 temporaries of 8 MiB,
# which the allocator reuses instead of mapping and zeroing new pages
COMPARE_BLOCK = 1 << 20


def make_input(dtype, nelems, rank, mode, seed):
    """Rank `rank`'s send buffer contents (storage dtype)."""
    if mode == "all_ones":
        return dtype.from_float(np.ones(nelems))
    rng = np.random.default_rng([seed, rank])
    if dtype.name in FP8:
        # small integers: fp8 sums of a few of them are exact (e4m3 up to 16,
        # e5m2 up to 8), so a lost or doubled contribution stands out from
        # fp8's coarse rounding
        return dtype.from_float(rng.integers(1, 3, nelems) * rng.choice([-1, 1], nelems))
    if dtype.is_float:
        # small magnitudes keep prod finite and sums well inside fp16's range;
        # no zeros, so the sign of a zero never matters
        return dtype.from_float(rng.uniform(0.5, 1.5, nelems) * rng.choice([-1, 1], nelems))
    if dtype.storage.kind == "u":
        return rng.integers(0, 4, nelems, dtype=dtype.storage)
    return rng.integers(-3, 4, nelems, dtype=dtype.storage)


def golden_value(collective, op, nranks):
    """G, the value every output element has when every input is 1."""
    if collective.reduces and op == "sum":
        return float(nranks)
    return 1.0


def tolerance(dtype, op, nranks):
    """Relative tolerance of a reduction of `nranks` inputs, against `scale`.

    Any order of p - 1 pairwise operations, each rounded once to the dtype
    (fp16/bf16 combine in float32 and round back), is within (p - 1)·u of
    the exact result, relative to Σ|x| for sums and |Π x| for products
    (u = unit roundoff); avg adds one rounding of the division.  min, max,
    data movement and integers are exact.  A factor 2 covers the float32
    rounding inside fp16/bf16 operations; fp8 operands combine exactly in
    float32, so fp8 is rounded once per operation.
    """
    if not dtype.is_float or op in ("min", "max", "none", None):
        return 0.0
    steps = max(nranks - 1, 1) + (op == "avg")
    return (1.0 if dtype.name in FP8 else 2.0) * steps * dtype.eps


def expected(collective, inputs, rank, nranks, op, root, dtype):
    """(golden, scale) of `rank`'s output: the golden result (None where the
    output is undefined) and, for float reductions, the magnitude the
    tolerance is relative to (the same reduction of |inputs|)."""
    golden = collective.golden(inputs, rank, nranks, op, root, dtype)
    scale = None
    if golden is not None and collective.reduces and dtype.is_float and op in ("sum", "avg", "prod"):
        mags = [np.abs(dtype.to_float(x)) for x in inputs]
        scale = collective.golden(mags, rank, nranks, op, root, get_dtype("fp64"))
    return golden, scale


def count_wrong(output, golden, dtype, op, nranks, scale=None):
    """Elements of `output` (storage dtype) that differ from `golden`; 0 when
    golden is None (output undefined).

    Floats compare within `tolerance`, relative to `scale` (defaults to
    |golden|); NaN must match NaN.
    """
    if golden is None:
        return 0
    output = np.asarray(output).reshape(-1)
    golden = np.asarray(golden).reshape(-1)
    if output.shape != golden.shape:
        return max(output.size, golden.size)
    if not dtype.is_float:
        return int(np.count_nonzero(output != golden.astype(dtype.storage)))
    scale = None if scale is None else np.asarray(scale).reshape(-1)
    tol = tolerance(dtype, op, nranks)
    # block by block: a GiB output made float64 temporaries of 4 GiB each,
    # every one of them a fresh mapping the kernel had to zero (3.5 s for
    # 256 MiB of bf16 on 2 cores; a size compares once per algorithm and
    # placement; bench/check_compare.py)
    wrong = 0
    for at in range(0, output.size, COMPARE_BLOCK):
        cut = slice(at, at + COMPARE_BLOCK)
        got = dtype.to_float(output[cut])
        ref = golden[cut].astype(np.float64)
        mag = np.abs(ref) if scale is None else scale[cut].astype(np.float64)
        with np.errstate(invalid="ignore"):
            ok = np.abs(got - ref) <= tol * mag
        ok |= (np.isnan(got) & np.isnan(ref)) | (np.isinf(ref) & (got == ref))
        wrong += int(np.count_nonzero(~ok))
    return wrong


def failure_path(out, collective, algorithm, placement, size, rank):
    """Where a failed check saves its tensors: beside the results file."""
    if out:
        stem = os.path.splitext(os.path.abspath(out))[0]
    else:
        stem = os.path.join(tempfile.gettempdir(), "ccbench")
    return f"{stem}.check-{collective}-{algorithm}-{placement}-{size}B-rank{rank}.npz"


def verify(comm, collective, output, golden, dtype, op, nranks, scale=None, *,
           own=None, save_as=None, say=print):
    """Check one rank's output; returns its wrong-element count.

    Collective over `comm` when the collective's ranks must end identical
    (``same_result``): ranks compare a digest of their output, and a rank
    whose output differs from rank 0's counts the differing elements as
    wrong, even where each is within tolerance of the golden result.  On a
    failure the rank saves input, output and golden to `save_as` (npz) and
    says where.
    """
    wrong = count_wrong(output, golden, dtype, op, nranks, scale)
    differ = 0
    if collective.same_result and comm is not None and comm.Get_size() > 1:
        data = np.ascontiguousarray(output).reshape(-1)
        digests = comm.allgather(hashlib.sha256(data.view(np.uint8)).hexdigest())
        if len(set(digests)) > 1:
            ref = comm.bcast(data if comm.Get_rank() == 0 else None, root=0)
            if ref.shape != data.shape or ref.dtype != data.dtype:
                differ = max(data.size, ref.size)
            elif data.size:  # bitwise, element by element
                rows = lambda a: a.view(np.uint8).reshape(a.size, a.itemsize)  # noqa: E731
                differ = int(np.count_nonzero((rows(data) != rows(ref)).any(axis=1)))
    if (wrong or differ) and save_as:
        os.makedirs(os.path.dirname(save_as) or ".", exist_ok=True)
        arrays = {"output": np.asarray(output)}
        if own is not None:
            arrays["input"] = np.asarray(own)
        if golden is not None:
            arrays["golden"] = np.asarray(golden)
        if scale is not None:
            arrays["scale"] = np.asarray(scale)
        np.savez_compressed(save_as, **arrays)
        what = []
        if wrong:
            what.append(f"{wrong} of {np.size(output)} elements wrong")
        if differ:
            what.append(f"{differ} elements differ from rank 0's")
        say(f"# check FAILED on rank {comm.Get_rank() if comm is not None else 0}: "
            f"{', '.join(what)}; input, output and golden saved to {save_as}", flush=True)
    return wrong + differ


def total_wrong(comm, wrong):
    """Wrong elements summed over ranks, at rank 0; -1 (not checked) where
    any rank did not check (a placement the collective cannot run)."""
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs

    wrong = np.ascontiguousarray(wrong, dtype=np.int64)
    root = comm.Get_rank() == 0
    total, least = (np.empty_like(wrong), np.empty_like(wrong)) if root else (None, None)
    comm.Reduce(np.maximum(wrong, 0), total, op=MPI.SUM, root=0)
    comm.Reduce(wrong, least, op=MPI.MIN, root=0)
    return np.where(least < 0, -1, total) if root else None

