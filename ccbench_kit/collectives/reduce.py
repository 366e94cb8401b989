"""reduce: the root ends with the reduction of all ranks' buffers.

size = the buffer; busbw factor 1.  In-place: send is recv on every rank.
Only the root's output is defined (and checked).
"""
import numpy as np

from .base import Collective, per_rank_layout, reduce_arrays


class Reduce(Collective):
    name = "reduce"
    aliases = ("red",)
    reduces = True
    rooted = True

    def bus_factor(self, nranks):
        return 1.0

    def layout(self, size, itemsize, nranks):
        return per_rank_layout(self, size, itemsize, nranks)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        return reduce_arrays(np.stack(inputs), op, dtype) if rank == root else None


COLLECTIVE = Reduce()
