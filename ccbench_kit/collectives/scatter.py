"""scatter: rank j ends with block j of the root's buffer.

Buffers, size, count and bus factor as reduce_scatter's: size = the root's
total (p × per-rank receive), busbw factor (p-1)/p; in-place, the receive
buffer is block r of the send buffer (nccl-tests' layout).
"""
from .base import exact
from .reduce_scatter import ReduceScatter


class Scatter(ReduceScatter):
    name = "scatter"
    aliases = ("scat",)
    rooted = True
    reduces = False

    def golden(self, inputs, rank, nranks, op, root, dtype):
        n = len(inputs[root]) // nranks
        return exact(dtype, inputs[root][rank * n:(rank + 1) * n])


COLLECTIVE = Scatter()
