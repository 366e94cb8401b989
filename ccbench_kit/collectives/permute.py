"""permute (nccom-test): every rank sends its buffer to a target and receives
from a source, as ``--custom-src-target-pairs`` lists them ([source, target]
pairs of ranks within the replica group, a permutation; [r, r] keeps a
rank's data).  Without pairs, the ring shift r -> r+1.

size = the per-rank buffer; busbw factor 1.  In-place: send is recv.
"""
import numpy as np

from ..inputs.pairs import peers
from .base import Collective, exact, per_rank_layout


class Permute(Collective):
    name = "permute"
    nccl_in_place = False  # NCCL moves it between distinct buffers only
    aliases = ("perm", "collective_permute", "collective-permute")

    def __init__(self, pairs=()):
        self.pairs = [(int(s), int(t)) for s, t in pairs]

    def configure(self, cfg, members):
        # pairs come validated (inputs.pairs): a permutation of group ranks
        return Permute(cfg.pairs) if cfg.pairs else self

    def peers(self, rank, nranks):
        """(target, source) of `rank`."""
        if not self.pairs:
            return (rank + 1) % nranks, (rank - 1) % nranks
        return peers(self.pairs, rank)

    def bus_factor(self, nranks):
        return 1.0

    def layout(self, size, itemsize, nranks):
        return per_rank_layout(self, size, itemsize, nranks)

    def engine_vectors(self, rank, nranks, layout):
        return {"peers": np.array(self.peers(rank, nranks), dtype=np.int32)} if self.pairs else {}

    def golden(self, inputs, rank, nranks, op, root, dtype):
        return exact(dtype, inputs[self.peers(rank, nranks)[1]])


COLLECTIVE = Permute()
