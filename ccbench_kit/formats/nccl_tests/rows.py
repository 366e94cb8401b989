"""nccl-tests result rows (from its text or its JSON) into Tables.

Rows of one test are split by (type, redop, root), which ``-d all``,
``-o all`` and ``-r all`` sweep in turn; within each, a whole sweep repeated
by ``-N`` becomes the `cycle` axis (and the `iteration` dim of `latency`).
"""
from dataclasses import dataclass, field

import numpy as np

from ..common.build import Table, canonical_dtype, canonical_op

PLACEMENTS = ("out_of_place", "in_place")


@dataclass
class Rows:
    """Column-wise rows; dict values are keyed by placement."""

    size: np.ndarray
    count: np.ndarray
    type: np.ndarray
    redop: np.ndarray
    root: np.ndarray
    line: np.ndarray
    time: dict
    algbw: dict
    busbw: dict
    time_hu: dict
    algbw_hu: dict
    busbw_hu: dict
    wrong: dict
    error: dict = field(default_factory=dict)     # old "error" column (max error)
    stats: dict = field(default_factory=dict)     # placement -> {name: array}
    cv: dict = field(default_factory=dict)        # placement -> i_cv% array
    per_iter: dict = field(default_factory=dict)  # placement -> [ (R, I) array per row ]
    algorithm: np.ndarray = None                  # per row, when the file names it


@dataclass
class Meta:
    """What the log or JSON says about the run."""

    fmt: str
    line: int = 1
    collective: str = None
    nranks: int = None
    group_size: int = None
    sweep: list = None            # expected sizes requested in one sweep, if known
    algorithm: str = "nccl"
    aggregated: str = ""
    check_time: bool = True
    ranks: list = None            # per-process rows of per-iteration data
    hosts: list = None
    devices: list = None
    rank_meaning: str = ""
    attrs: dict = field(default_factory=dict)
    complete: bool = True
    incomplete_reason: str = ""


def sweep_length(minbytes, maxbytes, factor=None, step=None, limit=100000):
    """How many sizes nccl-tests runs for -b/-e/-f or -i, or None."""
    try:
        lo, hi = int(minbytes), int(maxbytes)
        if lo > hi:
            return None
        n, s = 0, lo
        if factor and int(factor) > 1:
            if lo == 0:
                return None
            while s <= hi and n < limit:
                n, s = n + 1, s * int(factor)
        elif step and int(step) > 0:
            n = (hi - lo) // int(step) + 1
        else:
            return None
        return n if n < limit else None
    except (TypeError, ValueError):
        return None


def _period(sz):
    L = len(sz)
    for k in range(1, L):
        if L % k == 0 and np.array_equal(sz, np.tile(sz[:k], L // k)):
            return k
    return L


def fold_cycles(sz, n_sweep):
    """Row indices as a (cycle, position) matrix, -1 where a row is missing."""
    L = len(sz)
    k = None
    if n_sweep and L > n_sweep:
        k = n_sweep
        C = -(-L // k)
        pad = np.full(C * k, -1, dtype=np.int64)
        pad[:L] = np.arange(L)
        idx = pad.reshape(C, k)
        # every cycle prints the first cycle's sizes, in order (the last may stop early)
        full = np.full(C * k, -1, dtype=np.int64)
        full[:L] = sz
        grid = full.reshape(C, k)
        if np.all((grid == sz[:k][None, :]) | (idx < 0)):
            return idx
    if not n_sweep:
        k = _period(sz)
        if k < L:
            return np.arange(L).reshape(L // k, k)
    return np.arange(L).reshape(1, L)


def _text(v):
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def _group_keys(rows):
    """[((type, redop, root), row indices)] in order of first appearance."""
    if len(rows.size) == 0:
        return []
    codes = []
    for col in (rows.type, rows.redop, rows.root):
        col = np.asarray(col)
        if np.all(col == col[0]):          # one type, op and root: the common case, no sort
            codes.append(np.zeros(len(col), dtype=np.int64))
            continue
        _, inv = np.unique(col, return_inverse=True)
        codes.append(inv.ravel().astype(np.int64))
    key = (codes[0] * (codes[1].max() + 1) + codes[1]) * (codes[2].max() + 1) + codes[2]
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    out = []
    for g in np.argsort(first):
        members = np.flatnonzero(inv.ravel() == g)
        i = members[0]
        out.append(((_text(rows.type[i]), _text(rows.redop[i]), int(rows.root[i])), members))
    return out


def _positions(sz, n_sweep):
    """(cycle, size) row positions of one algorithm's rows, sizes ascending;
    requested sizes that round to a size already printed (all_gather's 8 and
    16 B on 2 ranks both print 0) keep their first row."""
    idx = fold_cycles(sz, n_sweep)
    first = idx[0][idx[0] >= 0]
    uniq, pos = np.unique(sz[first], return_index=True)
    dup = len(first) - len(uniq)
    cols = idx[:, np.sort(pos)] if dup else idx[:, :len(first)]
    return cols[:, np.argsort(sz[cols[0]], kind="stable")], dup


def tables_from_rows(src, rows, meta):
    """One Table per (type, redop, root) in `rows`; the kit's own nccl-tests
    JSON names each row's algorithm (``experiment_name``), which becomes the
    `algorithm` dim."""
    n_sweep = len(meta.sweep) if meta.sweep else None
    placements = [p for p in PLACEMENTS if p in rows.time]
    P = len(placements)
    tables = []
    for (dtype, redop, root), gi in _group_keys(rows):
        if rows.algorithm is None:
            names, algs = np.full(len(gi), "", dtype=object), [""]
        else:
            names = rows.algorithm[gi]
            algs = list(dict.fromkeys(str(a) for a in names))
        per_alg, dup = [], 0
        for a in algs:
            ai = gi[names == a]
            cols, d = _positions(rows.size[ai], n_sweep)
            per_alg.append((ai, cols))
            dup += d
        sizes = np.unique(np.concatenate([rows.size[ai][cols[0]] for ai, cols in per_alg]))
        A, S = len(algs), len(sizes)
        C = max(cols.shape[0] for _, cols in per_alg)
        rowsel = np.zeros((A, S, C), dtype=np.int64)      # row of (algorithm, size, cycle)
        present = np.zeros((A, S, C), dtype=bool)
        counts = np.full(S, -1, dtype=np.int64)
        for k, (ai, cols) in enumerate(per_alg):
            at = np.searchsorted(sizes, rows.size[ai][cols[0]])
            for c in range(cols.shape[0]):
                ok = cols[c] >= 0
                rowsel[k, at[ok], c] = ai[cols[c][ok]]
                present[k, at[ok], c] = True
            counts[at] = rows.count[ai][cols[0]]

        def grab(d, fill=np.nan, dtype=float):
            out = np.full((A, P, S, C), fill, dtype=dtype)
            for pi, p in enumerate(placements):
                if d.get(p) is not None:
                    v = np.broadcast_to(np.asarray(d[p]), rows.size.shape)[rowsel]
                    out[:, pi] = np.where(present, v, fill)
            return out

        wrong_all = grab(rows.wrong, -1, np.int64)
        t = Table(src=src, line=meta.line, fmt=meta.fmt, sizes=sizes.astype(np.int64),
                  counts=counts, time=grab(rows.time), algbw=grab(rows.algbw),
                  busbw=grab(rows.busbw), time_hu=np.nan_to_num(grab(rows.time_hu)),
                  algbw_hu=np.nan_to_num(grab(rows.algbw_hu)),
                  busbw_hu=np.nan_to_num(grab(rows.busbw_hu)),
                  collective=meta.collective, nranks=meta.nranks, group_size=meta.group_size,
                  dtype=canonical_dtype(dtype), op=canonical_op(redop), root=int(root),
                  algorithms=tuple(a or meta.algorithm for a in algs),
                  placements=tuple(placements), wrong=wrong_all.max(axis=-1),
                  lines=np.where(present, rows.line[rowsel], 0),
                  check_time=meta.check_time, aggregated=meta.aggregated,
                  attrs=dict(meta.attrs), complete=meta.complete,
                  incomplete_reason=meta.incomplete_reason)
        if dup:
            t.attrs["duplicate_sizes"] = (
                f"{dup} requested sizes gave a size already printed (rounded down to whole "
                "elements per rank); kept the first row of each")
        if not present.all():
            t.attrs["missing_rows"] = int((~present).sum())
        dims = ("algorithm", "placement", "size") + (("cycle",) if C > 1 else ())
        if C > 1:
            t.attrs["cycles"] = C
            t.aggregated += f"; the whole sweep ran {C} times (-N): cycle c is iteration c"
        if rows.error:
            err = grab(rows.error)
            t.extra["reported_error"] = (dims, err if C > 1 else err[..., 0],
                                         {"long_name": "max error as nccl-tests printed it"})
        for name in dict.fromkeys(n for p in placements for n in rows.stats.get(p, {})):
            t.stats[name] = grab({p: rows.stats.get(p, {}).get(name) for p in placements})
        if rows.cv:
            cv = grab(rows.cv)
            t.extra["reported_time_cv"] = (dims, cv if C > 1 else cv[..., 0],
                                           {"units": "%", "long_name": "coefficient of variation "
                                            "of per-iteration times (nccl-tests -I i_cv%)"})
        if rows.per_iter:
            _attach_per_iter(t, rows, placements, rowsel, present, meta)
        tables.append(t)
    return tables


def _attach_per_iter(t, rows, placements, rowsel, present, meta):
    """Per-iteration (and per-process) times become `latency`; a sweep
    repeated C times lays its cycles one after another along `iteration`."""
    A, S, C = rowsel.shape
    P = len(placements)
    shapes = [np.shape(a) for p in placements for a in (rows.per_iter.get(p) or [])
              if a is not None]
    if not shapes:
        return
    R = max(s[0] for s in shapes)
    I = max(s[1] for s in shapes)
    lat = np.full((A, P, S, R, C * I), np.nan)
    for pi, p in enumerate(placements):
        arrs = rows.per_iter.get(p)
        if not arrs:
            continue
        for a, s, c in zip(*np.nonzero(present)):
            block = arrs[rowsel[a, s, c]]
            if block is not None:
                block = np.asarray(block, dtype=float)
                lat[a, pi, s, :block.shape[0], c * I:c * I + block.shape[1]] = block
    t.latency = lat
    if R > 1 and meta.ranks and len(meta.ranks) == R:
        t.ranks, t.hosts, t.devices = meta.ranks, meta.hosts, meta.devices
    elif R == 1:
        t.ranks, t.hosts, t.devices = [-1], [""], [""]
    else:
        t.ranks, t.hosts, t.devices = list(range(R)), [""] * R, [""] * R
    if meta.rank_meaning:
        t.attrs["rank_meaning"] = meta.rank_meaning
