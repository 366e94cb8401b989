"""all_gather: every rank ends with all ranks' buffers, in rank order.

size = the whole output (p × per-rank send); busbw factor (p-1)/p; count =
the per-rank send, as nccl-tests prints it.  In-place: rank r's send buffer
is block r of its receive buffer.
"""
import numpy as np

from .base import Collective, exact, send_inside_recv, split_layout


class AllGather(Collective):
    name = "all_gather"
    aliases = ("allg", "allgather", "all-gather", "ag")
    same_result = True

    def bus_factor(self, nranks):
        return (nranks - 1) / nranks

    def layout(self, size, itemsize, nranks):
        return split_layout(self, size, itemsize, nranks, 1, nranks)

    def inplace_send(self, recv, rank, layout):
        return send_inside_recv(recv, rank, layout)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        return exact(dtype, np.concatenate(inputs))


COLLECTIVE = AllGather()
