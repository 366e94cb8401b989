"""What every collective module provides to the harness, the importers and
the theory: how a size maps to buffers, the bus factor, and the golden result.

Sizes follow nccl-tests (docs/theory.md, "Sizes and bus factors"): each collective says what its size
means, rounds it down to whole elements (and to a multiple of the rank count
where it splits the buffer), and the Dataset keeps the actual size.
"""
from dataclasses import dataclass

import numpy as np

from ..dataset.schema import PLACEMENTS
from ..errors import ConfigError
from . import registry


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
    placements = PLACEMENTS  # the placements it can run
    nccl_in_place = True  # False: NCCL has no in-place form (or it would race)
    doc = ""

    @property
    def nccl(self):
        """How the nccl backend runs it, as collectives.def says (opt-in per
        collective): "native" (an NCCL collective), "native_since_2_28"
        (ncclAlltoAll/Gather/Scatter, else grouped send/recv), "p2p" (grouped
        ncclSend/ncclRecv only) or None (no NCCL form: refused)."""
        return registry.NCCL.get(self.name)

    def configure(self, cfg, members):
        """This collective set up for one run (`cfg`: the run's
        `config.InputConfig`) on a communicator whose ranks are the world
        ranks `members`, in rank order (a replica group, or every rank):
        alltoallv and permute read their metadata here.  Returns a Collective."""
        return self

    def engine_vectors(self, rank, nranks, layout):
        """Per-rank vectors for the engine (``sendcounts``, ``sdispls``,
        ``recvcounts``, ``rdispls``, ``peers``), as keyword arguments."""
        return {}

    def inplace_buffers(self, alloc, dtype, rank, layout):
        """(send, recv) of an in-place run, one allocation made by
        ``alloc(nelems, dtype)``; by default send is a view into recv
        (`inplace_send`)."""
        recv = alloc(layout.recv_elems, dtype)
        return self.inplace_send(recv, rank, layout), recv

    def bus_factor(self, nranks):
        """busbw = algbw × this (docs/theory.md, "Sizes and bus factors")."""
        raise NotImplementedError

    def layout(self, size, itemsize, nranks):
        """`Layout` for a requested size in bytes (rounded down)."""
        raise NotImplementedError

    def inplace_send(self, recv, rank, layout):
        """The send buffer of an in-place run: a view into `recv`."""
        return recv

    def golden(self, inputs, rank, nranks, op, root, dtype):
        """Expected output of `rank`, float64 for floats, storage dtype else;
        None where the rank's output is not defined (a rooted collective's
        non-root ranks).

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
        elif dtype.storage.kind == "u":
            out = (out // n).astype(dtype.storage)
        else:  # the wrapped sum, divided truncating toward zero as C does
            wide = out.astype(np.int64)
            q = wide // n
            out = (q + ((wide < 0) & (q * n != wide))).astype(dtype.storage)
    return out


def send_inside_recv(recv, rank, layout):
    """In-place send of a gathering collective: block r of recv (nccl-tests)."""
    n = layout.send_elems
    return recv[rank * n:(rank + 1) * n]


def recv_inside_send(alloc, dtype, rank, layout):
    """In-place (send, recv) of a scattering collective: recv is block r of
    send (nccl-tests)."""
    send = alloc(layout.send_elems, dtype)
    n = layout.recv_elems
    return send, send[rank * n:(rank + 1) * n]


def exact(dtype, values):
    """Golden values of a collective that only moves data, in golden form
    (float64 for floats)."""
    return dtype.to_float(values) if dtype.is_float else np.asarray(values)


def per_rank_layout(coll, size, itemsize, nranks):
    """Layout of a collective whose size is one rank's buffer (all_reduce,
    broadcast, reduce, sendrecv, permute): whole elements only."""
    count = size // itemsize
    if count < 1:
        coll._too_small(size, itemsize)
    return Layout(count * itemsize, count, count, count, count)


def split_layout(coll, size, itemsize, nranks, send_blocks, recv_blocks):
    """Layout of a collective whose size is p blocks of `count` elements
    (all_gather, reduce_scatter, alltoall, gather, scatter): rounded down to a
    multiple of p elements, as nccl-tests does; `count` is one block (the
    count nccl-tests prints and the MPI call takes)."""
    per = size // itemsize // nranks
    if per < 1:
        coll._too_small(size, itemsize * nranks)
    return Layout(per * nranks * itemsize, per, per, per * send_blocks, per * recv_blocks)
