"""sendrecv: a ring shift, as nccl-tests' sendrecv_perf: every rank sends
its buffer to rank r+1 and receives rank r-1's.

size = the per-rank send; busbw factor 1.  In-place: send is recv (done with
MPI_Sendrecv_replace; nccl-tests runs but does not check it).
"""
from .base import Collective, exact, per_rank_layout


class SendRecv(Collective):
    name = "sendrecv"
    nccl_in_place = False  # NCCL moves it between distinct buffers only
    aliases = ("send_recv", "send-recv", "sr")

    def bus_factor(self, nranks):
        return 1.0

    def layout(self, size, itemsize, nranks):
        return per_rank_layout(self, size, itemsize, nranks)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        return exact(dtype, inputs[(rank - 1) % nranks])


COLLECTIVE = SendRecv()
