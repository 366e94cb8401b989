"""nccom-test's columns, command line and bandwidth unit, for its table and JSON.

Old outputs print ``time(us)`` (the older guide calls it the P50 of the
measured iterations), new ones ``time:avg(us)`` and ``time:pNN(us)``.  The
guide says algbw is in GiB/s; older examples are, newer ones are in 1e9 B/s.
The importer recomputes both ways and records which one the file used.

``count(elems)`` is, per the guide, the elements of ``size(B)``: size over
the item size, the total for all_gather, reduce_scatter and alltoall.  The
kit's ``count`` is the count argument of one rank's call, as nccl-tests
prints it; `to_kit_counts` converts on import (keeping the printed column
as ``reported_count``), `nccom_count` back on export.
"""
import re
import shlex

import numpy as np

from ...collectives import get as get_collective
from ...dtypes import get_dtype
from ...errors import ConfigError
from ..common.build import Table, canonical_dtype, check_reported, find_collective

TOOL = "nccom-test"
SIZE, COUNT, TYPE = "size(b)", "count(elems)", "type"
IN_SIZE, OUT_SIZE = "total_input_size(b)", "total_output_size(b)"
ALGBW, BUSBW, ALGO = "algbw(gb/s)", "busbw(gb/s)", "algorithm"
_TIME = re.compile(r"^time(?::(avg|p\d+(?:\.\d+)?))?\(us\)$")
# the <cc operation> argument, as nccom-test's guide lists it (each is a
# collective's name or alias: the registry says which collective)
OPS = ("all_reduce", "allr", "all_gather", "allg", "reduce_scatter", "redsct", "sendrecv",
       "alltoall", "permute", "alltoallv")
GIB = float(1 << 30)
COUNT_MEANING = ("count(elems) as nccom-test defines it: the elements of size(B) "
                 "(size over the item size; the total for all_gather, reduce_scatter, alltoall)")


def nccom_count(size, dtype):
    """nccom-test's count(elems) of `size` bytes of `dtype`."""
    return int(size) // get_dtype(dtype).itemsize


def to_kit_counts(ds):
    """`ds` with its ``count`` coordinate in the kit's meaning (one rank's
    call count, as nccl-tests prints it) and nccom-test's printed column
    kept as ``reported_count``.  A size the collective cannot lay out as
    printed (an odd size, an unknown dtype) keeps the printed count, and
    ``count_note`` says so."""
    a = ds.attrs
    printed = ds["count"].values.copy()
    counts, kept = printed.copy(), 0
    try:
        coll, itemsize = get_collective(a["collective"]), get_dtype(a["dtype"]).itemsize
    except (ConfigError, KeyError):  # an unknown collective or dtype: keep what was printed
        coll = itemsize = None
    p = int(a.get("group_size") or a.get("nranks") or 0)
    for i, size in enumerate(ds["size"].values):
        lay = coll.layout(int(size), itemsize, p) if coll is not None and p > 0 else None
        if lay is not None and lay.size == int(size) and printed[i] in (-1, int(size) // itemsize):
            counts[i] = lay.count
        else:
            kept += 1
    ds = ds.assign_coords(count=("size", counts.astype(np.int64), ds["count"].attrs))
    ds["reported_count"] = ("size", printed, {"long_name": COUNT_MEANING})
    if kept:
        ds.attrs["count_note"] = (f"{kept} of {len(counts)} sizes keep nccom-test's printed "
                                  "count(elems): the collective cannot lay them out as printed")
    return ds


def time_columns(cols):
    """{column: stat} of the time columns; stat is None for plain time(us)."""
    out = {}
    for c in cols:
        m = _TIME.match(c)
        if m:
            out[c] = m.group(1)
    return out


def main_time(cols):
    times = time_columns(cols)
    for want in ("avg", None):
        for c, st in times.items():
            if st == want:
                return c
    return next(iter(times), None)


def aggregated_text(column):
    st = time_columns([column])[column]
    if st is None:
        return ("nccom-test time(us): per the older guide the P50, per the newer the mean, "
                "of the measured iterations' durations")
    if st == "avg":
        return "nccom-test time:avg(us): the mean of the measured iterations' durations"
    return f"nccom-test time:{st}(us): the {st} of the measured iterations' durations"


def parse_command(line):
    """Facts from an ``nccom-test -r 32 ... allg`` command line."""
    try:
        words = shlex.split(line[line.index("nccom-test"):])[1:]
    except ValueError:
        words = line[line.index("nccom-test"):].split()[1:]
    out, i = {}, 0
    with_value = {"-r": "nranks", "--nworkers": "nranks", "-N": "nnodes", "--nnodes": "nnodes",
                  "-d": "dtype", "--datatype": "dtype", "-n": "iters", "--iters": "iters",
                  "-w": "warmup", "--warmup_iters": "warmup",
                  "--data-parallel-dimension": "group_size"}
    while i < len(words):
        w = words[i]
        key, val = (w.split("=", 1) + [None])[:2] if w.startswith("--") and "=" in w else (w, None)
        if key in with_value:
            if val is None and i + 1 < len(words):
                val, i = words[i + 1], i + 1
            out[with_value[key]] = val
        elif not w.startswith("-") and "collective" not in out and w.lower() in OPS:
            out["collective"] = find_collective(w).name
        i += 1
    for k in ("nranks", "nnodes", "iters", "warmup", "group_size"):
        if k in out:
            try:
                out[k] = int(out[k])
            except (TypeError, ValueError):
                out.pop(k)
    out["command"] = line[line.index("nccom-test"):].strip()
    return out


def pick_unit(t, time_col):
    """(bytes per GB, note): the unit algbw was printed in, judged row by row."""
    agree = {}
    for unit in (1e9, GIB):
        t.bw_unit = unit
        alg_bad = check_reported(t, 1.0)[0]
        judged = np.isfinite(np.broadcast_to(t.algbw, alg_bad.shape))
        agree[unit] = int((judged & ~alg_bad).sum())
    n = int(np.isfinite(t.algbw).sum())
    if agree[1e9] != agree[GIB]:
        unit = 1e9 if agree[1e9] > agree[GIB] else GIB
        how = "recomputed from size/time"
    else:   # every row fits both (tiny bandwidths) or neither: the columns' vintage decides
        unit = GIB if time_columns([time_col])[time_col] is None else 1e9
        how = "undecided by size/time; assumed from the column names' vintage"
    t.bw_unit = unit
    name = "GiB/s (2^30 B/s)" if unit == GIB else "GB/s (1e9 B/s)"
    return (f"{name}: {agree[unit]} of {n} printed algbw fit it, "
            f"{agree[GIB if unit == 1e9 else 1e9]} fit "
            f"{'1e9' if unit == GIB else '2^30'} ({how})")


def build_table(src, line, fmt, cols, rows, lines, cmd, extra_attrs):
    """A Table from nccom-test columns (lower-case names) and row dicts of
    (value, half) pairs."""
    # why long: columns, sizes, algorithms and statistics are checked and
    # placed into one (algorithm, size) grid; each step needs the grid so far.
    time_col = main_time(cols)
    need = "nccom-test columns size(B), time(us) or time:avg(us), algbw(GB/s), busbw(GB/s)"
    missing = [c for c in (SIZE, ALGBW, BUSBW) if c not in cols] + ([] if time_col else ["time"])
    if missing:
        raise src.error(line, need + " (missing " + ", ".join(missing) + ")", " ".join(cols))
    sizes = np.array([r[SIZE][0] for r in rows], dtype=float)
    wrong = ~np.isfinite(sizes) | (sizes < 0) | (sizes != np.round(sizes)) | (sizes >= 2.0 ** 62)
    if wrong.any():
        bad = int(np.flatnonzero(wrong)[0])
        raise src.error(lines[bad], "a whole number of bytes in size(B)", rows[bad][SIZE][0])
    sizes = sizes.astype(np.int64)
    algs = [str(r[ALGO][0]) if ALGO in r else "" for r in rows]
    # --show-algorithm names the one algorithm nccom-test chose per size; the
    # kit's own nccom-style JSON repeats each size once per algorithm it ran
    as_dim = ALGO in cols and len(set(zip(sizes.tolist(), algs))) == len(rows) \
        and len(set(sizes.tolist())) < len(rows)
    names = list(dict.fromkeys(algs)) if as_dim else [cmd.get("algorithm") or "nccom"]
    uniq = np.unique(sizes)
    A, S = len(names), len(uniq)
    pick = np.full((A, S), -1, dtype=np.int64)      # row of (algorithm, size), first wins
    for k in range(len(rows)):
        a = names.index(algs[k]) if as_dim else 0
        s_ = int(np.searchsorted(uniq, sizes[k]))
        if pick[a, s_] < 0:
            pick[a, s_] = k
    dups = len(rows) - int((pick >= 0).sum())

    def col(name, default=np.nan):
        out = np.full((A, S), np.nan)
        for a, s_ in zip(*np.nonzero(pick >= 0)):
            out[a, s_] = rows[pick[a, s_]][name][0] if name in rows[pick[a, s_]] else default
        return out

    def half(name):
        return np.nan_to_num(np.where(pick >= 0, col_half(name), 0.0))

    def col_half(name):
        out = np.zeros((A, S))
        for a, s_ in zip(*np.nonzero(pick >= 0)):
            out[a, s_] = rows[pick[a, s_]][name][1] if name in rows[pick[a, s_]] else 0.0
        return out

    def shaped(x):
        return x[:, None, :, None]

    def per_size(x, default):
        x = np.nanmax(np.where(np.isfinite(x), x, -np.inf), axis=0)
        ok = np.isfinite(x) & (np.abs(x) < 2.0 ** 62)
        return np.where(ok, x, default).astype(np.int64)

    stats = {st: shaped(col(c)) for c, st in time_columns(cols).items()
             if c != time_col and st not in (None, "avg")}
    t = Table(src=src, line=line, fmt=fmt, sizes=uniq, counts=per_size(col(COUNT), -1),
              time=shaped(col(time_col)), algbw=shaped(col(ALGBW)), busbw=shaped(col(BUSBW)),
              time_hu=shaped(half(time_col)), algbw_hu=shaped(half(ALGBW)),
              busbw_hu=shaped(half(BUSBW)),
              collective=cmd.get("collective"), nranks=cmd.get("nranks"),
              group_size=cmd.get("group_size"), op_root_known=False,
              op=cmd.get("op") or "none", root=int(cmd.get("root", -1)),
              algorithms=tuple(names), placements=(cmd.get("placement") or "out_of_place",),
              lines=np.where(pick >= 0, np.asarray(lines, dtype=np.int64)[np.maximum(pick, 0)], 0)[:, :, None],
              stats=stats, aggregated=aggregated_text(time_col))
    types = {str(r[TYPE][0]) for r in rows if TYPE in r}
    t.dtype = canonical_dtype(cmd.get("dtype") or (types.pop() if len(types) == 1 else ""))
    if IN_SIZE in cols and OUT_SIZE in cols:
        t.in_bytes, t.out_bytes = per_size(col(IN_SIZE), -1), per_size(col(OUT_SIZE), -1)
    if ALGO in cols and not as_dim:
        t.coords["algorithm_used"] = ("size", np.array(
            [str(rows[k][ALGO][0]) if k >= 0 and ALGO in rows[k] else "" for k in pick[0]], dtype=str))
    if dups:
        t.attrs["duplicate_sizes"] = f"{dups} repeated rows; kept the first of each"
    t.bw_unit_note = pick_unit(t, time_col)
    attrs = {"backend": "neuron", "command": cmd.get("command", ""),
             "warmup": cmd.get("warmup", ""), "iters": cmd.get("iters", "")}
    if "nnodes" in cmd:
        attrs["nnodes"] = cmd["nnodes"]
    if stats:
        attrs["reported_time_stats"] = "nccom-test -t/--stats percentiles of the measured iterations"
    attrs.update(extra_attrs)
    t.attrs.update(attrs)
    return t
