"""scatter: rank j ends with block j of the root's buffer.

size = the root's total (p × per-rank receive); busbw factor (p-1)/p;
count = the per-rank receive.  In-place: the receive buffer is block r of
the send buffer (nccl-tests' layout).
"""
from .base import Collective, exact, recv_inside_send, split_layout


class Scatter(Collective):
    name = "scatter"
    aliases = ("scat",)
    rooted = True

    def bus_factor(self, nranks):
        return (nranks - 1) / nranks

    def layout(self, size, itemsize, nranks):
        return split_layout(self, size, itemsize, nranks, nranks, 1)

    def inplace_buffers(self, alloc, dtype, rank, layout):
        return recv_inside_send(alloc, dtype, rank, layout)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        n = len(inputs[root]) // nranks
        return exact(dtype, inputs[root][rank * n:(rank + 1) * n])


COLLECTIVE = Scatter()
