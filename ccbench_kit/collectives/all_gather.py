"""all_gather: every rank ends with all ranks' buffers, in rank order.

size = the whole output (p × per-rank send); busbw factor (p-1)/p.
In-place: rank r's send buffer is block r of its receive buffer.
"""
import numpy as np

from .base import Collective, Layout


class AllGather(Collective):
    name = "all_gather"
    aliases = ("allg", "allgather", "all-gather", "ag")
    same_result = True

    def bus_factor(self, nranks):
        return (nranks - 1) / nranks

    def layout(self, size, itemsize, nranks):
        per_rank = size // itemsize // nranks
        if per_rank < 1:
            self._too_small(size, itemsize * nranks)
        return Layout(per_rank * nranks * itemsize, per_rank, per_rank, per_rank, per_rank * nranks)

    def inplace_send(self, recv, rank, layout):
        n = layout.send_elems
        return recv[rank * n:(rank + 1) * n]

    def golden(self, inputs, rank, nranks, op, root, dtype):
        out = np.concatenate(inputs)
        return dtype.to_float(out) if dtype.is_float else out


COLLECTIVE = AllGather()
