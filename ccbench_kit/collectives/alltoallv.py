"""alltoallv: alltoall with a count and displacement per peer.

The pattern comes from ``--alltoallv-metadata`` (nccom-test's format,
`RunConfig.alltoallv`: per world rank send_counts, send_displs, recv_counts,
recv_displs, in elements, one value per rank of its replica group).  Those counts are absolute, so every requested
size gives the same run.  Without metadata the pattern is nccl-tests'
default (alltoallv_perf, spread 1): from the requested size S, a total of
T = S/itemsize elements per rank, rank i sends rank j ⌊d·T/(p(p-1)/2)⌋
elements with d = (j - i) mod p, packed in peer order: more to farther
ranks, none to itself, every rank sending and receiving the same total.

size = the largest over ranks of one rank's send or receive bytes; busbw
factor (p-1)/p; count = the per-peer count T/p that nccl-tests prints
(metadata: size / itemsize, as nccom-test).  Out-of-place only: in place,
MPI's form needs a symmetric count matrix.
"""
import numpy as np

from ..errors import ConfigError
from .base import Collective, Layout
from ..inputs.skew import parse_pattern, skewed_counts

FLAG = "--alltoallv-metadata"
KEYS = ("send_counts", "send_displs", "recv_counts", "recv_displs")


def distance_weighted(per, nranks):
    """nccl-tests' generated pattern: counts[i][j] elements from i to j."""
    p = nranks
    if p == 1:
        return np.array([[per]], dtype=np.int64)
    total, sumd = per * p, p * (p - 1) // 2
    d = (np.arange(p)[None, :] - np.arange(p)[:, None]) % p
    return d * total // sumd


def from_counts(counts):
    """Per-rank metadata (send/recv counts and packed displacements) of a
    count matrix."""
    counts = np.asarray(counts, dtype=np.int64)
    meta = []
    for r in range(len(counts)):
        send, recv = counts[r], counts[:, r]
        meta.append({"send_counts": send, "send_displs": np.cumsum(send) - send,
                     "recv_counts": recv, "recv_displs": np.cumsum(recv) - recv})
    return meta


class AllToAllV(Collective):
    name = "alltoallv"
    nccl_in_place = False  # NCCL moves it between distinct buffers only
    aliases = ("all_to_allv", "all-to-allv", "a2av")
    placements = ("out_of_place",)

    def __init__(self, meta=None, pattern=None, seed=0):
        self.meta = meta
        self.pattern, self.seed = pattern, seed   # inputs.skew, in place of nccl-tests' pattern

    def configure(self, cfg, members):
        # metadata comes validated (inputs.alltoallv): one entry per world
        # rank, counts that match pairwise within every group
        spec = cfg.alltoallv_pattern
        if spec and not cfg.alltoallv:
            return AllToAllV(pattern=parse_pattern(spec, len(members)), seed=cfg.seed)
        if not cfg.alltoallv:
            return self
        return AllToAllV([{k: np.asarray(cfg.alltoallv[w][k], dtype=np.int64) for k in KEYS}
                          for w in members])

    def bus_factor(self, nranks):
        return (nranks - 1) / nranks

    def _meta(self, per, nranks):
        if self.meta is not None:
            return self.meta
        if self.pattern is not None:
            return from_counts(skewed_counts(self.pattern, per * nranks, nranks, self.seed))
        return from_counts(distance_weighted(per, nranks))

    def layout(self, size, itemsize, nranks):
        if self.meta is None:
            per = size // itemsize // nranks
            if per < 1:
                self._too_small(size, itemsize * nranks)
            meta = self._meta(per, nranks)
            send = recv = per * nranks  # nccl-tests' buffers: T elements
            if self.pattern is not None:   # a hot rank receives more than T
                recv = max(int(m["recv_counts"].sum()) for m in meta)
        else:
            meta, per = self.meta, None
            send, recv = _extent(meta, "send"), _extent(meta, "recv")
        most = max(max(int(m["send_counts"].sum()), int(m["recv_counts"].sum())) for m in meta)
        if most < 1:
            raise ConfigError("the pattern moves no data at all", FLAG)
        count = per if per is not None else most
        return Layout(most * itemsize, count, count, send, recv)

    def engine_vectors(self, rank, nranks, layout):
        m = self._meta(layout.send_elems // nranks, nranks)[rank]
        return {"sendcounts": m["send_counts"], "sdispls": m["send_displs"],
                "recvcounts": m["recv_counts"], "rdispls": m["recv_displs"]}

    def golden(self, inputs, rank, nranks, op, root, dtype):
        meta = self._meta(len(inputs[0]) // nranks, nranks)
        size = len(inputs[0]) if self.meta is None and self.pattern is None \
            else _extent(meta, "recv")
        out = np.zeros(size, dtype=inputs[0].dtype)
        me = meta[rank]
        for src in range(nranks):
            n, at = int(me["recv_counts"][src]), int(me["recv_displs"][src])
            frm = int(meta[src]["send_displs"][rank])
            out[at:at + n] = inputs[src][frm:frm + n]
        return dtype.to_float(out) if dtype.is_float else out


def _extent(meta, side):
    """Elements a buffer needs on every rank to hold any rank's `side`."""
    return max(int(np.max(m[f"{side}_displs"] + m[f"{side}_counts"], initial=0)) for m in meta)


COLLECTIVE = AllToAllV()
