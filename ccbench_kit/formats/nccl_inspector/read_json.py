"""NCCL Inspector output: every collective a production job ran, per rank.

The Inspector (NVIDIA/nccl ``plugins/profiler/inspector``, a profiler
plugin) writes one file per process, ``<hostname>-pid<pid>.log``, into
``NCCL_INSPECTOR_DUMP_DIR``.  Each line is one JSON object (``jsonNewline``
after each; the README shows them indented, which reads the same here)::

    {"header":   {"id", "comm_name", "rank", "n_ranks", "nnodes"},
     "metadata": {"inspector_output_format_version", "git_rev",
                  "rec_mechanism", "dump_timestamp_us", "hostname", "pid"},
     "coll_perf": {"coll", "coll_sn", "coll_msg_size_bytes",
                   "coll_exec_time_us", "coll_timing_source",
                   "coll_algobw_gbs", "coll_busbw_gbs"[, "event_trace_*"]}}

or ``"p2p_perf"`` in place of ``coll_perf`` for sends and receives.

What becomes what:

- one Dataset per (communicator ``id``, collective): ``nranks`` is
  ``n_ranks``, the `rank` coordinate the ``rank`` values recorded, `host` the
  ``hostname`` of each rank's file;
- ``coll_msg_size_bytes`` is type size × the call's count (the per-rank
  count: a rank's contribution for all_gather, its result for
  reduce_scatter).  The Dataset's `size` follows nccl-tests (total output of
  all_gather, total input of reduce_scatter), so those two are multiplied
  by ``n_ranks`` -- the same traffic the Inspector divides by its time;
- a collective call has one ``coll_sn`` on every rank of the communicator,
  so the calls of one size, in ``coll_sn`` order, are the `iteration`s, and
  ``latency[size, rank, iteration]`` is that rank's ``coll_exec_time_us``
  (whole µs: the longest kernel channel by the GPU's global timer, or a CPU
  fallback -- counted in attr ``timing_sources``); ``coll_sn`` is kept;
- ``coll_algobw_gbs``/``coll_busbw_gbs`` are checked against size/time and
  the kit's bus factor (they agree by construction: the Inspector uses
  nccl-tests' factors) and kept as ``inspector_algbw``/``inspector_busbw``.

Not imported, and counted in attr ``skipped``: ``p2p_perf`` records,
``All2All`` and ``AllGatherV`` (whose traffic the Inspector does not define:
it prints bandwidth 0).  The Inspector records no data type, so `dtype` is
empty and `count` -1; it skips calls under NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES
(8 KiB by default).
"""
import datetime
import json
import warnings
from collections import Counter

import numpy as np

from ..._version import __version__
from ...collectives import get as get_collective
from ...dataset.schema import make_dataset
from ..common.errors import ReportedMismatchWarning
from ..common.source import PrintedFloat, half_of

NAME = "NCCL Inspector JSON"

# ncclFuncToString (inspector.cc) -> (kit collective, size = msg × n_ranks?)
_COLLS = {"AllReduce": ("all_reduce", False), "AllGather": ("all_gather", True),
          "ReduceScatter": ("reduce_scatter", True), "Broadcast": ("broadcast", False),
          "Reduce": ("reduce", False)}
_HEADER = ("id", "rank", "n_ranks", "nnodes")
_PERF = ("coll", "coll_sn", "coll_msg_size_bytes", "coll_exec_time_us",
         "coll_algobw_gbs", "coll_busbw_gbs")
_REL = 1e-9


def sniff(src, head):
    s = head.lstrip()
    return s.startswith("{") and '"header"' in s[:4096] and (
        '"coll_perf"' in head or '"p2p_perf"' in head)


def _records(src):
    """(line, record) of the JSON objects in `src`, one per line or indented.

    Line numbers are counted as the text is walked (once), not from the
    start of the file for every record: that made a dump's import time grow
    with the square of its size."""
    dec = json.JSONDecoder(parse_float=PrintedFloat)
    text, pos, line, counted = src.text, 0, 1, 0
    end = len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            return
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            rec, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            if e.pos >= len(text.rstrip()):     # name the record, not the end of the file
                raise src.error(line, "the rest of the record (the file ends early: truncated?)",
                                text[pos:pos + 40]) from None
            raise src.error(line + text.count("\n", counted, e.pos),
                            f"an Inspector JSON record ({e.msg})",
                            text[e.pos:e.pos + 40]) from None
        if not isinstance(rec, dict) or not isinstance(rec.get("header"), dict) \
                or not isinstance(rec.get("metadata"), dict):
            raise src.error(line, "an Inspector record with 'header' and 'metadata' objects",
                            text[src.text.rfind("\n", 0, pos) + 1:][:40])
        yield line, rec


def _int(src, line, obj, key, where):
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise src.error(line, f"a whole number for {where}.{key}", v)
    return v


def _number(src, line, obj, key, where):
    v = obj.get(key)
    if isinstance(v, str) and v == "nan":       # jsonDouble writes NaN as "nan"
        return float("nan")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise src.error(line, f"a number for {where}.{key}", v)
    return float(v)


class _Comm:
    """The records of one (communicator, collective)."""

    def __init__(self, comm_id, coll, size_times_ranks):
        self.id, self.coll, self.scale = comm_id, coll, size_times_ranks
        self.calls = {}                 # (rank, sn) -> (msg, time, alg, bus, halves, source)
        self.sizes = {}                 # sn -> (msg, rank, path, line) of its first record
        self.hosts, self.names, self.nranks, self.nnodes = {}, set(), set(), set()
        self.sources, self.meta = set(), set()


def _add_call(src, line, comm, rank, sn, call):
    """Record one rank's call; a record dumped twice counts once, two that
    disagree about one call, or ranks that give one call different sizes,
    are refused naming both places."""
    old = comm.calls.get((rank, sn))
    if old is not None:
        if old[:4] != call[:4] and not (old[:2] == call[:2] and _same_nan(old[2:4], call[2:4])):
            raise src.error(line, f"one record per rank and coll_sn (rank {rank} coll_sn {sn} "
                                  f"is also at {old[6]}:{old[7]} with other values)",
                            f"size {call[0]} time {call[1]} µs")
        return
    first = comm.sizes.setdefault(sn, (call[0], rank, call[6], call[7]))
    if first[0] != call[0]:
        raise src.error(line, f"one size for coll_sn {sn} of communicator {comm.id} on every "
                              f"rank (rank {first[1]} gives {first[0]} B at {first[2]}:{first[3]})",
                        f"rank {rank}: {call[0]} B")
    comm.calls[(rank, sn)] = call


def _same_nan(a, b):
    return all(x == y or (x != x and y != y) for x, y in zip(a, b))


def parse_many(srcs, hints=None):
    """Datasets from the Inspector files of one job (any number of ranks and
    communicators; records dumped twice count once)."""
    comms, skipped, paths = {}, Counter(), []
    for src in srcs:
        paths.append(src.path)
        for line, rec in _records(src):
            head, meta = rec["header"], rec["metadata"]
            if "coll_perf" not in rec:
                kind = "p2p_perf" if "p2p_perf" in rec else None
                if kind is None:
                    raise src.error(line, "'coll_perf' or 'p2p_perf' in an Inspector record",
                                    ", ".join(map(str, rec)))
                skipped["p2p_perf records"] += 1
                continue
            perf = rec["coll_perf"]
            if not isinstance(perf, dict):
                raise src.error(line, "an object for coll_perf", type(perf).__name__)
            for key in _HEADER:
                if key not in head:
                    raise src.error(line, f"header.{key} (Inspector format v4.0)",
                                    ", ".join(map(str, head)))
            for key in _PERF:
                if key not in perf:
                    raise src.error(line, f"coll_perf.{key} (Inspector format v4.0)",
                                    ", ".join(map(str, perf)))
            name = perf["coll"]
            if name not in _COLLS:
                if name in ("All2All", "AllGatherV"):
                    skipped[f"{name} records"] += 1
                    continue
                raise src.error(line, "an Inspector collective (" + ", ".join(_COLLS)
                                + ", All2All, AllGatherV)", name)
            coll, scale = _COLLS[name]
            comm_id = str(head["id"])
            c = comms.setdefault((comm_id, coll), _Comm(comm_id, coll, scale))
            rank = _int(src, line, head, "rank", "header")
            n = _int(src, line, head, "n_ranks", "header")
            sn = _int(src, line, perf, "coll_sn", "coll_perf")
            msg = _int(src, line, perf, "coll_msg_size_bytes", "coll_perf")
            t = _int(src, line, perf, "coll_exec_time_us", "coll_perf")
            alg = _number(src, line, perf, "coll_algobw_gbs", "coll_perf")
            bus = _number(src, line, perf, "coll_busbw_gbs", "coll_perf")
            if n < 1 or rank >= n:
                raise src.error(line, f"header.rank below header.n_ranks ({n})", rank)
            if t <= 0:   # a time of 0 µs would become an infinite bandwidth
                raise src.error(line, "a positive coll_exec_time_us (whole µs)", t)
            call = (msg, t, alg, bus,
                    (half_of(perf["coll_algobw_gbs"]), half_of(perf["coll_busbw_gbs"])),
                    str(perf.get("coll_timing_source", "unknown")), src.path, line)
            _add_call(src, line, c, rank, sn, call)
            c.hosts[rank] = str(meta.get("hostname", ""))
            c.names.add(str(head.get("comm_name", "")))
            c.nranks.add(n)
            c.nnodes.add(head.get("nnodes"))
            c.sources.add(src.path)
            c.meta.add((str(meta.get("inspector_output_format_version", "")),
                        str(meta.get("git_rev", "")), str(meta.get("rec_mechanism", ""))))
    if not comms:
        what = ", ".join(f"{n} {k}" for k, n in skipped.items()) or "no records"
        raise srcs[0].error(None, "collective records (coll_perf of AllReduce, AllGather, "
                            f"ReduceScatter, Broadcast or Reduce); found {what}")
    return [_dataset(c, skipped, srcs[0]) for _, c in sorted(comms.items())]


def parse(src, hints=None):
    return parse_many([src], hints)


def _dataset(c, skipped, src0):
    if len(c.nranks) != 1:
        raise src0.error(None, f"one n_ranks for communicator {c.id}", sorted(c.nranks))
    p = c.nranks.pop()
    coll = get_collective(c.coll)
    factor = float(coll.bus_factor(p))
    ranks = sorted({r for r, _ in c.calls})
    msgs = sorted({v[0] for v in c.sizes.values()})
    sns = {m: [] for m in msgs}             # grouped in one pass (not one per size)
    for sn, v in sorted(c.sizes.items()):
        sns[v[0]].append(sn)
    iters = max(len(s) for s in sns.values())
    S, R = len(msgs), len(ranks)
    lat = np.full((1, 1, S, R, iters), np.nan)
    alg = np.full_like(lat, np.nan)
    bus = np.full_like(lat, np.nan)
    sn_arr = np.full((S, iters), -1, dtype=np.int64)
    sizes = np.array([m * p if c.scale else m for m in msgs], dtype=np.int64)
    at_size = {m: i for i, m in enumerate(msgs)}
    at_rank = {r: i for i, r in enumerate(ranks)}
    at_sn = {m: {sn: i for i, sn in enumerate(s)} for m, s in sns.items()}
    for m, s in sns.items():
        sn_arr[at_size[m], :len(s)] = s
    bad, sources = [], Counter()
    for (rank, sn), (msg, t, a, b, (ah, bh), how, path, line) in c.calls.items():
        si, ri, ii = at_size[msg], at_rank[rank], at_sn[msg][sn]
        lat[0, 0, si, ri, ii], alg[0, 0, si, ri, ii], bus[0, 0, si, ri, ii] = t, a, b
        sources[how] += 1
        # the Inspector divides the same traffic by the same whole µs: its
        # %lf rounding is all the difference allowed
        want_a = sizes[si] / 1e3 / t
        # a nan (jsonDouble's "nan") is not a bandwidth that agrees
        if not (abs(a - want_a) <= ah + _REL * want_a
                and abs(b - want_a * factor) <= bh + _REL * want_a):
            bad.append(f"{path}:{line}: size {sizes[si]} rank {rank} coll_sn {sn}: printed "
                       f"algbw {a:g} busbw {b:g}, size/time gives {want_a:.6f} and "
                       f"{want_a * factor:.6f}")
    judged = 2 * len(c.calls)
    if bad:
        check = (f"MISMATCH: {len(bad)} of {len(c.calls)} records' bandwidths disagree with "
                 f"size/time and the bus factor {factor:.6g} ({coll.name}, {p} ranks); first: "
                 + bad[0])
        warnings.warn(check, ReportedMismatchWarning, stacklevel=3)
    else:
        check = (f"ok: {judged} printed bandwidths agree with size/time and the bus factor "
                 f"{factor:.6g} ({coll.name}, {p} ranks) within rounding")
    ins = np.array([m * p if c.coll == "reduce_scatter" else m for m in msgs], dtype=np.int64)
    outs = np.array([m * p if c.coll == "all_gather" else m for m in msgs], dtype=np.int64)
    versions = sorted(c.meta)
    names = sorted(n for n in c.names if n)
    attrs = {
        "collective": coll.name, "dtype": "", "op": "", "root": -1, "nranks": p,
        "backend": "nccl", "library": "", "timing": "imported", "warmup": "", "iters": iters,
        "kit_version": __version__, "created": "", "command": "",
        "hosts": sorted(set(c.hosts.values())), "env": {},
        "source": ", ".join(sorted(c.sources)), "format": NAME, "aggregated": "",
        "imported": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "complete": len(ranks) == p,
        "comm_id": c.id, "comm_name": ", ".join(names), "nnodes": int(next(iter(c.nnodes)) or 0),
        "inspector_format": ", ".join(sorted({v[0] for v in versions})),
        "inspector_git_rev": ", ".join(sorted({v[1] for v in versions})),
        "timing_sources": dict(sources), "skipped": dict(skipped),
        "reported_check": check,
    }
    if len(ranks) != p:
        attrs["incomplete_reason"] = (f"records of {len(ranks)} of the communicator's {p} ranks "
                                      "(the other ranks' files were not given)")
    if bad:
        attrs["reported_mismatch"] = bad[:20]
    ds = make_dataset(algorithms=["nccl"], placements=["out_of_place"], sizes=sizes,
                      counts=np.full(S, -1), in_bytes=ins, out_bytes=outs, latency=lat,
                      wrong=np.full((1, 1, S), -1), ranks=ranks,
                      hosts=[c.hosts[r] for r in ranks], devices=[""] * R, attrs=attrs)
    dims = ("algorithm", "placement", "size", "rank", "iteration")
    ds["inspector_algbw"] = (dims, alg, {"units": "GB/s", "long_name": "coll_algobw_gbs as printed"})
    ds["inspector_busbw"] = (dims, bus, {"units": "GB/s", "long_name": "coll_busbw_gbs as printed"})
    ds["coll_sn"] = (("size", "iteration"), sn_arr,
                     {"long_name": "the Inspector's collective sequence number; -1 = none"})
    return ds


def comm_label(ds):
    """``all_reduce-0x7f8c496ae9f661``: a name for one communicator's collective."""
    return f"{ds.attrs.get('collective')}-{ds.attrs.get('comm_id')}"
