"""What every collective module provides to the harness, the importers and
the theory: how a size maps to buffers, the bus factor, and the golden result.

Sizes follow nccl-tests (THEORY.md): each collective says what its size
means, rounds it down to whole elements (and to a multiple of the rank count
where it splits the buffer), and the Dataset keeps the actual size.
"""
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError


@dataclass(frozen=True)
class Layout:
    """Buffers of one rank for one size."""

    size: int         # bytes, nccl-tests' convention (the `size` coord)
    count: int        # elements, as nccl-tests prints `count`
    engine_count: int  # elements, as the MPI call for this collective counts them
    send_elems: int   # this rank's send buffer
    recv_elems: int   # this rank's receive buffer

    def in_bytes(self, itemsize):
        return self.send_elems * itemsize

    def out_bytes(self, itemsize):
        return self.recv_elems * itemsize


class Collective:
    """One collective; subclasses live one per module in this package."""

    name = ""
    aliases = ()
    reduces = False     # takes an op
    rooted = False      # takes a root
    same_result = False  # every rank ends with identical output (checked)
    doc = ""

    def bus_factor(self, nranks):
        """busbw = algbw × this (THEORY.md)."""
        raise NotImplementedError

    def layout(self, size, itemsize, nranks):
        """`Layout` for a requested size in bytes (rounded down)."""
        raise NotImplementedError

    def inplace_send(self, recv, rank, layout):
        """The send buffer of an in-place run: a view into `recv`."""
        return recv

    def golden(self, inputs, rank, nranks, op, root, dtype):
        """Expected output of `rank`, float64 for floats, storage dtype else.

        `inputs[r]` is rank r's send buffer as `make_input` made it.
        """
        raise NotImplementedError

    def _too_small(self, size, minimum):
        raise ConfigError(
            f"{self.name} size {size} B is too small to give every rank one "
            f"element; the smallest is {minimum} B", "-b/--minbytes")


def reduce_arrays(stack, op, dtype):
    """Reduce rank inputs (axis 0) as the engine does, in float64 for floats."""
    if dtype.is_float:
        x = dtype.to_float(stack)
    else:
        x = np.asarray(stack)
    if op in ("sum", "avg"):
        out = np.add.reduce(x, axis=0, dtype=x.dtype)
    elif op == "prod":
        out = np.multiply.reduce(x, axis=0, dtype=x.dtype)
    elif op == "min":
        out = x.min(axis=0)
    elif op == "max":
        out = x.max(axis=0)
    else:
        raise ValueError(op)
    if op == "avg":
        n = len(stack)
        if dtype.is_float:
            out = out / n
        else:  # C division truncates toward zero
            out = np.trunc(out.astype(np.float64) / n).astype(dtype.storage)
    return out
