"""broadcast: every rank ends with the root's buffer.

size = the buffer; busbw factor 1.  Out-of-place as ncclBroadcast: the root
sends from its send buffer and every rank, the root included, ends with the
data in its receive buffer.  In-place: send is recv.
"""
from .base import Collective, exact, per_rank_layout


class Broadcast(Collective):
    name = "broadcast"
    aliases = ("bcast",)
    rooted = True
    same_result = True

    def bus_factor(self, nranks):
        return 1.0

    def layout(self, size, itemsize, nranks):
        return per_rank_layout(self, size, itemsize, nranks)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        return exact(dtype, inputs[root])


COLLECTIVE = Broadcast()
