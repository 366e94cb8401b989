"""gather: the root ends with every rank's buffer, in rank order.

Buffers, size, count and bus factor as all_gather's: size = the root's total
(p × per-rank send), busbw factor (p-1)/p; in-place, rank r's send buffer is
block r of its receive buffer (nccl-tests' layout).  Only the root's output
is defined.
"""
import numpy as np

from .all_gather import AllGather
from .base import exact


class Gather(AllGather):
    name = "gather"
    aliases = ("gath",)
    rooted = True
    same_result = False

    def golden(self, inputs, rank, nranks, op, root, dtype):
        return exact(dtype, np.concatenate(inputs)) if rank == root else None


COLLECTIVE = Gather()
