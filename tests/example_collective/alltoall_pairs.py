"""alltoall_pairs: the worked example of a new collective (docs/architecture.md,
"A new collective").  Every rank swaps its buffer with its partner r ^ 1 (a
rank without one, the last of an odd count, keeps its own).

The three files a new collective takes: this module (as
``ccbench_kit/collectives/alltoall_pairs.py``), ``coll_alltoall_pairs.c``
beside it (as ``ext/``'s), and the line in ``DEF_LINE`` appended to
``ccbench_kit/collectives/collectives.def``.  tests/test_collective_registry.py
compiles the C side with that line and checks what each reader makes of it.
"""
from ccbench_kit.collectives.base import Collective, exact, per_rank_layout

# NONE: no NCCL form yet, so --backend nccl refuses it in one line
DEF_LINE = "CCB_COLL(ALLTOALL_PAIRS, alltoall_pairs, NONE)"


class AlltoallPairs(Collective):
    name = "alltoall_pairs"
    aliases = ("pairs",)

    def bus_factor(self, nranks):
        return 1.0

    def layout(self, size, itemsize, nranks):
        return per_rank_layout(self, size, itemsize, nranks)

    def golden(self, inputs, rank, nranks, op, root, dtype):
        partner = rank ^ 1
        return exact(dtype, inputs[partner if partner < nranks else rank])


COLLECTIVE = AlltoallPairs()
