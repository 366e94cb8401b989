"""reduce_scatter: rank r ends with block r of the reduction of all ranks'
buffers.

size = the whole input (p × per-rank receive); busbw factor (p-1)/p; count =
the per-rank receive.  In-place: the receive buffer is block r of the send
buffer (nccl-tests' layout).
"""
import numpy as np

from .base import Collective, recv_inside_send, reduce_arrays, split_layout


class ReduceScatter(Collective):
    name = "reduce_scatter"
    aliases = ("redsct", "reducescatter", "reduce-scatter", "rs")
    reduces = True

    def bus_factor(self, nranks):
        return (nranks - 1) / nranks

    def layout(self, size, itemsize, nranks):
        return split_layout(self, size, itemsize, nranks, nranks, 1)

    def inplace_buffers(self, alloc, dtype, rank, layout):
        return recv_inside_send(alloc, dtype, rank, layout)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        n = len(inputs[0]) // nranks
        return reduce_arrays(np.stack([x[rank * n:(rank + 1) * n] for x in inputs]), op, dtype)


COLLECTIVE = ReduceScatter()
