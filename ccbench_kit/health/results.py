"""What a health check measured: the raw records rank 0 keeps, and the
``ccbench/1`` Datasets made from them.

Raw records are JSON, rewritten whole after every step (a run that hangs
keeps every step before).  The results file has two parts of the usual
schema, so `ccbench show`, `ds.ccb.busbw()` and `ccbench compare` read it:

``pairs`` (the root group): a sendrecv "collective" whose `algorithm` is
    the node pair (``node1-node3``, with coords `node_a`, `node_b`); `size`
    8 B (ping-pong: one-way latency) and the bandwidth message (a two-way
    exchange: busbw is each direction's rate); `rank` the pair's two ends
    (the same time on both: the exchange ends when both ends are done);
    `iteration` every repeat's iterations in turn (coord `repeat`).
``local``: an all_reduce per node (`algorithm` is the node) on the node's
    own ranks, 8 B and a large size; one `rank` entry, the node's slowest
    rank; coord `peak_GBps`: the node's memory copy rate, its own peak.
"""
import datetime
import json
import os

import numpy as np

from .. import collectives
from .._version import __version__
from .._files import atomic_write_text
from ..dataset.schema import make_dataset
from ..dtypes import DTYPES
from .collective import TCP

class Raw:
    """The records of one run (rank 0's, or read back from its file)."""

    def __init__(self, nodes, ranks, node_of, plan):
        self.nodes, self.ranks, self.node_of, self.plan = list(nodes), list(ranks), \
            list(node_of), plan
        self.peaks = []
        self.started = None  # time.time() when the measuring started
        self.local, self.pair = [], []
        self.host = []  # --per-gpu: the host's all_reduce over all its GPUs, a repeat each
        self.bisect, self.bisect_note = [], ""  # the descent's path (`bisect.Descent`)
        self.complete = False

    def add(self, kind, rep, record):
        {"local": self.local, "pair": self.pair, "host": self.host}[kind].append(
            {"rep": rep, **record})

    def to_json(self):
        return json.dumps({"nodes": self.nodes, "ranks": self.ranks, "node_of": self.node_of,
                           "plan": self.plan, "peaks": self.peaks, "started": self.started, "local": self.local,
                           "pair": self.pair, "host": self.host, "bisect": self.bisect,
                           "bisect_note": self.bisect_note, "complete": self.complete})

    def write(self, path):
        atomic_write_text(path, self.to_json())

    @classmethod
    def read(cls, path):
        with open(path) as f:
            d = json.load(f)
        raw = cls(d["nodes"], d["ranks"], d["node_of"], d["plan"])
        raw.peaks, raw.local, raw.pair = d["peaks"], d["local"], d["pair"]
        raw.started = d.get("started")
        raw.host = d.get("host", [])
        raw.bisect, raw.bisect_note = d.get("bisect", []), d.get("bisect_note", "")
        raw.complete = d.get("complete", False)
        return raw

    # -- arrays the verdict works on -------------------------------------
    def pair_matrix(self, field):
        """(repeat, node, node) array of a pair statistic, NaN where not measured:
        field "lat" (median one-way latency, s) or "bw" (median rate, B/s)."""
        n, reps = len(self.nodes), self.plan["repeats"]
        out = np.full((reps, n, n), np.nan)
        for r in self.pair:
            v = _median_stat(r, field)
            out[r["rep"], r["a"], r["b"]] = out[r["rep"], r["b"], r["a"]] = v
        return out

    def local_matrix(self, field):
        """(repeat, node) array of the local check's median times (s): "lat"
        (8 B all_reduce), "bw" (the large one) or "cpu" (the fixed work)."""
        out = np.full((self.plan["repeats"], len(self.nodes)), np.nan)
        for r in self.local:
            out[r["rep"], r["node"]] = float(np.median(r[f"{field}_s"]))
        return out


def host_allreduce(raw):
    """The host's all_reduce over all its GPUs (``--per-gpu``), or None:
    {"gpus", "bytes", "busbw_gbps": one median a repeat} (busbw as
    ``ccbench run all_reduce`` reports it: 2 (n - 1) / n of the size over
    the time)."""
    if not raw.host:
        return None
    n, nb = raw.host[0]["gpus"], raw.host[0]["bw_bytes"]
    factor = collectives.get("all_reduce").bus_factor(n)
    return {"gpus": n, "bytes": nb,
            "busbw_gbps": [_round_gbps(factor * nb / float(np.median(r["bw_s"])) / 1e9)
                           for r in sorted(raw.host, key=lambda r: r["rep"])]}


def _round_gbps(value):
    """GB/s to 3 decimals, and to 5 significant digits where that is finer:
    a slow host's 0.00027 GB/s (a 4 KiB all_reduce over TCP on a crowded
    node) is not 0.0, as if nothing had moved."""
    if not (np.isfinite(value) and value > 0):
        return value
    return round(value, max(3, 4 - int(np.floor(np.log10(value)))))


def _median_stat(rec, field):
    if field == "lat":
        return float(np.median(rec["lat_s"]))
    return rec["bw_bytes"] / float(np.median(rec["bw_s"]))


def to_datasets(raw, attrs):
    """{"pairs": Dataset, "local": Dataset} in the ``ccbench/1`` schema."""
    n, reps, plan = len(raw.nodes), plan_reps(raw), raw.plan
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    labels = [f"{raw.nodes[a]}-{raw.nodes[b]}" for a, b in pairs]
    it = max(plan["lat_iters"], plan["bw_iters"])
    sizes = [8, plan["bw_bytes"]]
    lat = np.full((len(pairs), 1, 2, 2, reps * it), np.nan)
    for rec in raw.pair:
        k = pairs.index((rec["a"], rec["b"]))
        for si, key in ((0, "lat_s"), (1, "bw_s")):
            v = np.asarray(rec[key]) * 1e6
            lat[k, 0, si, :, rec["rep"] * it: rec["rep"] * it + len(v)] = v
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    backend = plan.get("backend", TCP)
    common = {"dtype": "uint8", "op": "none", "backend": backend, "library": backend,
              "timing": "host", "kit_version": __version__, "created": stamp,
              "hosts": raw.nodes, "complete": "true" if raw.complete else "false", **attrs}
    repeat = ("iteration", np.repeat(np.arange(reps), it))
    ds_pairs = make_dataset(
        algorithms=labels, placements=["out_of_place"], sizes=sizes, counts=sizes,
        in_bytes=sizes, out_bytes=sizes, latency=lat, wrong=np.full((len(pairs), 1, 2), -1),
        ranks=[0, 1], hosts=["end a", "end b"], devices=["cpu", "cpu"],
        attrs={**common, "collective": "sendrecv", "nranks": 2, "iters": it},
        extra_coords={"node_a": ("algorithm", [raw.nodes[a] for a, _ in pairs]),
                      "node_b": ("algorithm", [raw.nodes[b] for _, b in pairs]),
                      "repeat": repeat})
    lit = max(plan["lat_iters"], plan["bw_iters"])
    lsizes = [8, plan["local_bytes"]]
    # the type the local all_reduce ran in (records of kits before this one
    # do not say: "", and counts of 8-byte elements, as they showed)
    dtype = next((r["dtype"] for r in raw.local if "dtype" in r), "")
    itemsize = DTYPES[dtype].itemsize if dtype in DTYPES else 8
    llat = np.full((n, 1, 2, 1, reps * lit), np.nan)
    rpn = 1
    for rec in raw.local:
        rpn = max(rpn, rec["ranks"])
        for si, key in ((0, "lat_s"), (1, "bw_s")):
            v = np.asarray(rec[key]) * 1e6
            llat[rec["node"], 0, si, 0, rec["rep"] * lit: rec["rep"] * lit + len(v)] = v
    compute = np.full((n, reps * lit), np.nan)  # lat_iters // 2 a repeat
    for rec in raw.local:
        v = np.asarray(rec.get("cpu_s", [])) * 1e6
        compute[rec["node"], rec["rep"] * lit: rec["rep"] * lit + len(v)] = v
    peaks = [_node_peak(raw, k) for k in range(n)]
    ds_local = make_dataset(
        algorithms=raw.nodes, placements=["out_of_place"], sizes=lsizes,
        counts=[s // itemsize for s in lsizes], in_bytes=lsizes, out_bytes=lsizes, latency=llat,
        wrong=np.full((n, 1, 2), -1), ranks=[0], hosts=["slowest rank of the node"],
        devices=["cpu"], attrs={**common, "collective": "all_reduce",
                                "dtype": dtype,
                                "op": "sum", "nranks": rpn, "iters": lit},
        extra_coords={"peak_GBps": ("algorithm", peaks),
                      "repeat": ("iteration", np.repeat(np.arange(reps), lit))})
    ds_local["compute"] = (("algorithm", "iteration"), compute,
                           {"units": "us", "long_name": "a fixed piece of work on the node's "
                                                       "ranks (the slowest rank's time)"})
    return {"pairs": ds_pairs, "local": ds_local}


def pair_figure(backend):
    """The baseline figure of the pairs' rates measured through `backend`
    (one per transport: rates through different ones do not compare)."""
    return f"pair_busbw_{backend}"


def figures(raw):
    """The pairs' rates as a baseline's figures (`baseline.save`): B/s
    each way, (node, peer, repeat), both orders of every pair filled."""
    import xarray as xr  # lazy: the ranks use this module's records, not its Datasets
    bw = np.moveaxis(raw.pair_matrix("bw"), 0, -1)
    name = pair_figure(raw.plan.get("backend", TCP))
    return xr.Dataset({name: (("node", "peer", "repeat"), bw,
                              {"better": "higher", "units": "B/s",
                               "long_name": "pair rate each way (busbw of the sendrecv)"})},
                      coords={"node": raw.nodes, "peer": raw.nodes,
                              "repeat": np.arange(bw.shape[-1])})


def plan_reps(raw):
    return int(raw.plan["repeats"])


def _node_peak(raw, node):
    """The node's memory copy rate (GB/s): the median of its ranks'."""
    vals = [p for p, k in zip(raw.peaks, raw.node_of) if k == node]
    return float(np.median(vals)) if vals else float("nan")


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
