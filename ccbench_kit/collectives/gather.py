"""gather: the root ends with every rank's buffer, in rank order.

size = the root's total (p × per-rank send); busbw factor (p-1)/p; count =
the per-rank send.  In-place: rank r's send buffer is block r of its receive
buffer (nccl-tests' layout).  Only the root's output is defined.
"""
import numpy as np

from .base import Collective, exact, send_inside_recv, split_layout


class Gather(Collective):
    name = "gather"
    aliases = ("gath",)
    rooted = True

    def bus_factor(self, nranks):
        return (nranks - 1) / nranks

    def layout(self, size, itemsize, nranks):
        return split_layout(self, size, itemsize, nranks, 1, nranks)

    def inplace_send(self, recv, rank, layout):
        return send_inside_recv(recv, rank, layout)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        return exact(dtype, np.concatenate(inputs)) if rank == root else None


COLLECTIVE = Gather()
