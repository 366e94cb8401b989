"""hypercube: nccl-tests' hypercube_perf, an all-gather done as lg p
exchanges with rank r ^ mask.

Buffers as all_gather's (p blocks of `count`, block r in place).  size =
count × (p-1) elements, the data that reaches each rank; busbw factor 1 (so
algbw = busbw as nccl-tests reports them; nccl-tests' size column shows the
whole buffer, p × count).  nccl-tests runs it on powers of two only; here
non-powers of two fold the extra ranks in.
"""
import numpy as np

from .base import Collective, Layout, exact, send_inside_recv


class HyperCube(Collective):
    name = "hypercube"
    aliases = ("hc", "hyper_cube")
    same_result = True

    def bus_factor(self, nranks):
        return 1.0

    def layout(self, size, itemsize, nranks):
        per = size // itemsize // nranks
        if per < 1:
            self._too_small(size, itemsize * nranks)
        return Layout(per * (nranks - 1) * itemsize, per, per, per, per * nranks)

    def inplace_send(self, recv, rank, layout):
        return send_inside_recv(recv, rank, layout)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        return exact(dtype, np.concatenate(inputs))


COLLECTIVE = HyperCube()
