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
import os
import sys
import time
import warnings
from array import array
from collections import Counter

import numpy as np

from ..._version import __version__
from ...collectives import get as get_collective
from ...dataset.schema import make_dataset
from ...output_path import open_regular
from ..common.errors import ImporterError, ReportedMismatchWarning
from ..common.source import PrintedFloat, half_of

NAME = "NCCL Inspector JSON"

# ncclFuncToString (inspector.cc) -> (kit collective, size = msg × n_ranks?)
_COLLS = {"AllReduce": ("all_reduce", False), "AllGather": ("all_gather", True),
          "ReduceScatter": ("reduce_scatter", True), "Broadcast": ("broadcast", False),
          "Reduce": ("reduce", False)}
_HEADER = ("id", "rank", "n_ranks", "nnodes")
_PERF = ("coll", "coll_sn", "coll_msg_size_bytes", "coll_exec_time_us",
         "coll_algobw_gbs", "coll_busbw_gbs")
_HEADER_SET, _PERF_SET = frozenset(_HEADER), frozenset(_PERF)
_REL = 1e-9


def sniff(src, head):
    s = head.lstrip()
    return s.startswith("{") and '"header"' in s[:4096] and (
        '"coll_perf"' in head or '"p2p_perf"' in head)


def _lines(src):
    """The lines of `src`, each with its ``\n``: read from the file as they
    are parsed when the caller left `src.text` unset (a dump of a GB is never
    held whole), else walked in `src.text`."""
    if src.text is not None:
        text, pos, end = src.text, 0, len(src.text)
        while pos < end:
            nl = text.find("\n", pos)
            nl = end if nl < 0 else nl + 1
            yield text[pos:nl]
            pos = nl
        return
    try:
        f = open_regular(src.path)
    except OSError as e:
        raise ImporterError(src.path, None, "a readable file", e.strerror) from e
    with f:
        progress = _Progress(src.path, os.fstat(f.fileno()).st_size)
        for n, raw in enumerate(f):
            if not n & 0xFFFF:
                progress.tell(f.tell())
            yield raw.decode("utf-8", errors="replace")


class _Progress:
    """One stderr line every few seconds while a large file is read (a GB
    dump takes minutes; a small one says nothing)."""

    EVERY_S, LARGE = 5.0, 64 << 20

    def __init__(self, path, total):
        self.path, self.total = path, total
        self.next = time.monotonic() + self.EVERY_S if total >= self.LARGE else float("inf")

    def tell(self, done):
        now = time.monotonic()
        if now >= self.next:
            self.next = now + self.EVERY_S
            print(f"importing {self.path}: {done >> 20} of {self.total >> 20} MB",
                  file=sys.stderr, flush=True)


def _records(src):
    """(line, record) of the JSON objects in `src`, one per line or indented.

    The text is taken a line at a time; a record that goes on over several
    lines (the README's indented form) is decoded again on a buffer that at
    least doubles each time, so a long one costs linear time."""
    dec = json.JSONDecoder(parse_float=PrintedFloat)
    lines = _lines(src)
    buf, pos, end, line, counted, read = "", 0, 0, 1, 0, 0
    while True:
        while pos < end and buf[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            buf = next(lines, None)
            if buf is None:
                return
            read += 1
            pos, end, line, counted = 0, len(buf), read, 0
            continue
        line += buf.count("\n", counted, pos)
        counted = pos
        try:
            rec, pos = dec.raw_decode(buf, pos)
        except json.JSONDecodeError as e:
            if e.pos >= len(buf.rstrip()):      # the record may go on in the next lines
                more = []
                for more_line in lines:
                    more.append(more_line)
                    read += 1
                    if sum(map(len, more)) >= end - pos:
                        break
                if more:
                    buf += "".join(more)
                    end = len(buf)
                    continue
                # name the record, not the end of the file
                raise src.error(line, "the rest of the record (the file ends early: truncated?)",
                                buf[pos:pos + 40]) from None
            raise src.error(line + buf.count("\n", counted, e.pos),
                            f"an Inspector JSON record ({e.msg})",
                            buf[e.pos:e.pos + 40]) from None
        if not isinstance(rec, dict) or not isinstance(rec.get("header"), dict) \
                or not isinstance(rec.get("metadata"), dict):
            raise src.error(line, "an Inspector record with 'header' and 'metadata' objects",
                            buf[buf.rfind("\n", 0, pos) + 1:][:40])
        yield line, rec


_INT64 = 1 << 63


def _int(src, line, obj, key, where):
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise src.error(line, f"a whole number for {where}.{key}", v)
    if v >= _INT64:     # the columns (and the Dataset) hold 64-bit integers
        raise src.error(line, f"a whole number below 2**63 for {where}.{key}", v)
    return v


def _number(src, line, obj, key, where):
    v = obj.get(key)
    if isinstance(v, str) and v == "nan":       # jsonDouble writes NaN as "nan"
        return float("nan")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise src.error(line, f"a number for {where}.{key}", v)
    return float(v)


def _missing(src, line, head, perf):
    """Raise the error of the first field a record lacks."""
    for key in _HEADER:
        if key not in head:
            raise src.error(line, f"header.{key} (Inspector format v4.0)",
                            ", ".join(map(str, head)))
    for key in _PERF:
        if key not in perf:
            raise src.error(line, f"coll_perf.{key} (Inspector format v4.0)",
                            ", ".join(map(str, perf)))


def _figures(src, line, head, perf):
    """(rank, n_ranks, coll_sn, size, time, algbw, busbw, their rounding
    halves) of a record, checked."""
    rank, n = head["rank"], head["n_ranks"]
    sn, msg, t = perf["coll_sn"], perf["coll_msg_size_bytes"], perf["coll_exec_time_us"]
    alg, bus = perf["coll_algobw_gbs"], perf["coll_busbw_gbs"]
    # every record the Inspector writes passes this one test (a few µs a
    # record less on a dump of millions); anything else takes the checks
    # one by one, in the order that names the first problem
    if type(rank) is type(n) is type(sn) is type(msg) is type(t) is int \
            and type(alg) is type(bus) is PrintedFloat \
            and 0 <= rank < n < _INT64 and 0 <= sn < _INT64 and 0 <= msg < _INT64 \
            and 0 < t < _INT64:
        return rank, n, sn, msg, t, alg, bus, alg.half, bus.half
    rank = _int(src, line, head, "rank", "header")
    n = _int(src, line, head, "n_ranks", "header")
    sn = _int(src, line, perf, "coll_sn", "coll_perf")
    msg = _int(src, line, perf, "coll_msg_size_bytes", "coll_perf")
    t = _int(src, line, perf, "coll_exec_time_us", "coll_perf")
    alg_v = _number(src, line, perf, "coll_algobw_gbs", "coll_perf")
    bus_v = _number(src, line, perf, "coll_busbw_gbs", "coll_perf")
    if n < 1 or rank >= n:
        raise src.error(line, f"header.rank below header.n_ranks ({n})", rank)
    if t <= 0:   # a time of 0 µs would become an infinite bandwidth
        raise src.error(line, "a positive coll_exec_time_us (whole µs)", t)
    return rank, n, sn, msg, t, alg_v, bus_v, half_of(alg), half_of(bus)


# one column per figure of a call: 8 bytes each, not a tuple of objects, so
# that a dump of millions of records fits in a few hundred MB
_COLUMNS = (("rank", "q"), ("sn", "q"), ("msg", "q"), ("time", "q"), ("alg", "d"),
            ("bus", "d"), ("alg_half", "d"), ("bus_half", "d"), ("how", "l"), ("file", "l"),
            ("line", "q"))


class _Comm:
    """The records of one (communicator, collective), as columns in reading
    order; duplicates and conflicts are sorted out once all are read."""

    def __init__(self, comm_id, coll, size_times_ranks):
        self.id, self.coll, self.scale = comm_id, coll, size_times_ranks
        self.columns = tuple(array(code) for _, code in _COLUMNS)
        self.appends = tuple(col.append for col in self.columns)
        self.hosts, self.names, self.nranks, self.nnodes = {}, set(), set(), set()
        self.sources, self.meta = set(), set()

    def column(self, name):
        i = [n for n, _ in _COLUMNS].index(name)
        return np.frombuffer(self.columns[i], dtype=_COLUMNS[i][1])


def _calls(c):
    """(rows kept, first conflict) of a communicator's records.

    A record dumped twice counts once (the first is kept); two that disagree
    about one (rank, coll_sn), or ranks that give one coll_sn different sizes,
    are a conflict: (row, other row, kind) of the one met first in reading
    order, as a reader that checked each record on arrival would find it."""
    rank, sn, msg, t = (c.column(k) for k in ("rank", "sn", "msg", "time"))
    alg, bus = c.column("alg"), c.column("bus")
    rows = np.arange(len(rank))
    by_call = np.lexsort((rows, sn, rank))
    new = np.ones(len(rows), bool)
    new[1:] = (rank[by_call][1:] != rank[by_call][:-1]) | (sn[by_call][1:] != sn[by_call][:-1])
    first = by_call[np.maximum.accumulate(np.where(new, rows, 0))]
    again, was = by_call[~new], first[~new]
    differs = (msg[again] != msg[was]) | (t[again] != t[was]) \
        | ~_same_or_nan(alg[again], alg[was]) | ~_same_or_nan(bus[again], bus[was])
    conflicts = [(again[differs], was[differs], "again")]
    kept = np.sort(by_call[new])
    by_sn = kept[np.lexsort((kept, sn[kept]))]
    new_sn = np.ones(len(by_sn), bool)
    new_sn[1:] = sn[by_sn][1:] != sn[by_sn][:-1]
    first_sn = by_sn[np.maximum.accumulate(np.where(new_sn, np.arange(len(by_sn)), 0))]
    other = msg[by_sn] != msg[first_sn]
    conflicts.append((by_sn[other], first_sn[other], "size"))
    found = [(int(rows_[np.argmin(rows_)]), int(prior[np.argmin(rows_)]), kind)
             for rows_, prior, kind in conflicts if len(rows_)]
    return kept, min(found, default=None)


def _same_or_nan(a, b):
    return (a == b) | (np.isnan(a) & np.isnan(b))


def _conflict_error(c, srcs, row, prior, kind):
    """The one-line error of a conflict between two records of `c`."""
    rank, sn, msg, t = (c.column(k) for k in ("rank", "sn", "msg", "time"))
    file, line = c.column("file"), c.column("line")
    src, where = srcs[file[row]], f"{srcs[file[prior]].path}:{line[prior]}"
    if kind == "again":
        return src.error(int(line[row]), f"one record per rank and coll_sn (rank {rank[row]} "
                         f"coll_sn {sn[row]} is also at {where} with other values)",
                         f"size {msg[row]} time {t[row]} µs")
    return src.error(int(line[row]), f"one size for coll_sn {sn[row]} of communicator {c.id} "
                     f"on every rank (rank {rank[prior]} gives {msg[prior]} B at {where})",
                     f"rank {rank[row]}: {msg[row]} B")


def parse_many(srcs, hints=None):
    """Datasets from the Inspector files of one job (any number of ranks and
    communicators; records dumped twice count once).

    A `Source` whose ``text`` is None is read from its file as it is parsed,
    in bounded memory; a progress line goes to stderr every few seconds
    while a large file is read."""
    comms, skipped, hows = {}, Counter(), {}
    for at, src in enumerate(srcs):
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
            if not (_HEADER_SET <= head.keys() and _PERF_SET <= perf.keys()):
                _missing(src, line, head, perf)
            name = perf["coll"]
            if not isinstance(name, str) or name not in _COLLS:   # a list is unhashable
                if name in ("All2All", "AllGatherV"):
                    skipped[f"{name} records"] += 1
                    continue
                raise src.error(line, "an Inspector collective (" + ", ".join(_COLLS)
                                + ", All2All, AllGatherV)", name)
            coll, scale = _COLLS[name]
            comm_id = str(head["id"])
            c = comms.get((comm_id, coll))
            if c is None:
                c = comms[comm_id, coll] = _Comm(comm_id, coll, scale)
            rank, n, sn, msg, t, alg, bus, alg_half, bus_half = _figures(src, line, head, perf)
            how = str(perf.get("coll_timing_source", "unknown"))
            how = hows.setdefault(how, len(hows))
            for append, value in zip(c.appends, (rank, sn, msg, t, alg, bus, alg_half,
                                                 bus_half, how, at, line)):
                append(value)
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
    kept, first = {}, None
    for key, c in sorted(comms.items()):
        kept[key], conflict = _calls(c)
        if conflict is not None:
            row = conflict[0]
            place = (int(c.column("file")[row]), int(c.column("line")[row]))
            if first is None or place < first[0]:
                first = (place, c, conflict)
    if first is not None:
        raise _conflict_error(first[1], srcs, *first[2])
    names = list(hows)
    return [_dataset(c, kept[key], names, skipped, srcs) for key, c in sorted(comms.items())]


def parse(src, hints=None):
    return parse_many([src], hints)


def _dataset(c, kept, how_names, skipped, srcs):
    if len(c.nranks) != 1:
        raise srcs[0].error(None, f"one n_ranks for communicator {c.id}", sorted(c.nranks))
    p = c.nranks.pop()
    coll = get_collective(c.coll)
    rank, sn, msg, t = (c.column(k)[kept] for k in ("rank", "sn", "msg", "time"))
    a, b = c.column("alg")[kept], c.column("bus")[kept]
    ah, bh = c.column("alg_half")[kept], c.column("bus_half")[kept]
    ranks, ri = np.unique(rank, return_inverse=True)
    msgs, si = np.unique(msg, return_inverse=True)
    # the calls of one size in coll_sn order are its iterations
    sns, at_sn = np.unique(sn, return_inverse=True)
    sn_size = np.searchsorted(msgs, msg[np.unique(sn, return_index=True)[1]])
    per_size = np.bincount(sn_size, minlength=len(msgs))
    order = np.lexsort((sns, sn_size))
    sn_iter = np.empty(len(sns), np.int64)
    sn_iter[order] = np.arange(len(sns)) - np.repeat(np.cumsum(per_size) - per_size, per_size)
    ii = sn_iter[at_sn]
    iters = int(per_size.max())
    S, R = len(msgs), len(ranks)
    lat = np.full((1, 1, S, R, iters), np.nan)
    alg = np.full_like(lat, np.nan)
    bus = np.full_like(lat, np.nan)
    lat[0, 0, si, ri, ii], alg[0, 0, si, ri, ii], bus[0, 0, si, ri, ii] = t, a, b
    sn_arr = np.full((S, iters), -1, dtype=np.int64)
    sn_arr[sn_size, sn_iter] = sns
    sizes = msgs * p if c.scale else msgs.copy()
    check, bad = _reported_check(c, kept, srcs, sizes[si], (t, a, b, ah, bh), (rank, sn),
                                 coll, p)
    ins = msgs * p if c.coll == "reduce_scatter" else msgs.copy()
    outs = msgs * p if c.coll == "all_gather" else msgs.copy()
    versions = sorted(c.meta)
    names = sorted(n for n in c.names if n)
    ranks = [int(r) for r in ranks]
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
        "timing_sources": _counted(c.column("how")[kept], how_names), "skipped": dict(skipped),
        "reported_check": check,
    }
    if len(ranks) != p:
        attrs["incomplete_reason"] = (f"records of {len(ranks)} of the communicator's {p} ranks "
                                      "(the other ranks' files were not given)")
    if bad:
        attrs["reported_mismatch"] = bad
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


def _counted(codes, names):
    """{name: how many} of coded values, in the order they first appear."""
    used, first_use, counts = np.unique(codes, return_index=True, return_counts=True)
    return {names[used[k]]: int(counts[k]) for k in np.argsort(first_use)}


def _reported_check(c, kept, srcs, size, figures, calls, coll, p):
    """(attr reported_check, first 20 disagreements) of the printed bandwidths."""
    (t, a, b, ah, bh), (rank, sn) = figures, calls
    factor = float(coll.bus_factor(p))
    # the Inspector divides the same traffic by the same whole µs: its %lf
    # rounding is all the difference allowed; a nan (jsonDouble's "nan") is
    # not a bandwidth that agrees
    want_a = size / 1e3 / t
    ok = (np.abs(a - want_a) <= ah + _REL * want_a) \
        & (np.abs(b - want_a * factor) <= bh + _REL * want_a)
    bad_rows = np.flatnonzero(~ok)
    files, lines = c.column("file")[kept], c.column("line")[kept]
    bad = [f"{srcs[files[i]].path}:{lines[i]}: size {size[i]} rank {rank[i]} coll_sn "
           f"{sn[i]}: printed algbw {float(a[i]):g} busbw {float(b[i]):g}, size/time gives "
           f"{float(want_a[i]):.6f} and {float(want_a[i]) * factor:.6f}" for i in bad_rows[:20]]
    if len(bad_rows):
        check = (f"MISMATCH: {len(bad_rows)} of {len(kept)} records' bandwidths disagree with "
                 f"size/time and the bus factor {factor:.6g} ({coll.name}, {p} ranks); first: "
                 + bad[0])
        warnings.warn(check, ReportedMismatchWarning, stacklevel=4)
    else:
        check = (f"ok: {2 * len(kept)} printed bandwidths agree with size/time and the bus "
                 f"factor {factor:.6g} ({coll.name}, {p} ranks) within rounding")
    return check, bad


def comm_label(ds):
    """``all_reduce-0x7f8c496ae9f661``: a name for one communicator's collective."""
    return f"{ds.attrs.get('collective')}-{ds.attrs.get('comm_id')}"
