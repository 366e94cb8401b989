"""all_reduce: every rank ends with the reduction of all ranks' buffers.

size = the per-rank buffer; busbw factor 2(p-1)/p.  In-place: send is recv.
"""
import numpy as np

from .base import Collective, per_rank_layout, reduce_arrays


class AllReduce(Collective):
    name = "all_reduce"
    aliases = ("allr", "allreduce", "all-reduce", "ar")
    reduces = True
    same_result = True

    def bus_factor(self, nranks):
        return 2 * (nranks - 1) / nranks

    def layout(self, size, itemsize, nranks):
        return per_rank_layout(self, size, itemsize, nranks)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        return reduce_arrays(np.stack(inputs), op, dtype)


COLLECTIVE = AllReduce()
