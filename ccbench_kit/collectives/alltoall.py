"""alltoall: block j of rank i's send buffer becomes block i of rank j's
receive buffer.

size = each rank's total send (p × per-peer count); busbw factor (p-1)/p;
count = the per-peer count, as nccl-tests prints it.  In-place: send is
recv (MPI_IN_PLACE's meaning).
"""
import numpy as np

from .base import Collective, exact, split_layout


class AllToAll(Collective):
    name = "alltoall"
    nccl_in_place = False  # NCCL moves it between distinct buffers only
    aliases = ("all_to_all", "all-to-all", "a2a")

    def bus_factor(self, nranks):
        return (nranks - 1) / nranks

    def layout(self, size, itemsize, nranks):
        return split_layout(self, size, itemsize, nranks, nranks, nranks)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        n = len(inputs[0]) // nranks
        return exact(dtype, np.concatenate([x[rank * n:(rank + 1) * n] for x in inputs]))


COLLECTIVE = AllToAll()
