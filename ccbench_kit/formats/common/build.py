"""From a parsed table to a results Dataset (docs/data-contract.md).

Every importer parses its format into a `Table` (the tool's printed numbers,
their rounding, and what the file says about the run); `to_dataset` then does
what is common: find the collective and the rank count when the file does not
say them, recompute algbw and busbw with the collective's own bus factor
(``ccbench_kit.collectives``, the single source of truth), flag disagreement
beyond rounding, and assemble the Dataset.
"""
import datetime
import json
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..._version import __version__
from ...collectives import all_collectives, get as get_collective
from ...dataset.schema import make_dataset
from ...dtypes import get_dtype, get_op
from ...errors import ConfigError
from .errors import BrokenTimesWarning, ReportedMismatchWarning

_REL = 1e-9          # float noise allowed on top of printed rounding
_MAX_RANKS = 1 << 17  # rank counts the inference considers
_MAX_LISTED = 20      # mismatching values listed in the attr


@dataclass
class Table:
    """One result set as a tool printed it.

    Arrays are indexed (algorithm, placement, size, cycle); `cycle` > 1
    when the tool repeated the whole sweep (nccl-tests ``-N``).
    Missing values are NaN; ``*_hu`` are the printed half-units.
    """

    src: object
    line: int
    fmt: str
    sizes: np.ndarray
    counts: np.ndarray
    time: np.ndarray
    algbw: np.ndarray
    busbw: np.ndarray
    time_hu: np.ndarray = 0.0
    algbw_hu: np.ndarray = 0.0
    busbw_hu: np.ndarray = 0.0
    collective: str = None
    nranks: int = None
    group_size: int = None
    dtype: str = ""
    op: str = "none"
    root: int = -1
    op_root_known: bool = True
    algorithms: tuple = ("nccl",)
    placements: tuple = ("out_of_place", "in_place")
    wrong: np.ndarray = None
    lines: np.ndarray = None            # (algorithm, size, cycle) source lines
    latency: np.ndarray = None          # (algorithm, placement, size, rank, iteration)
    ranks: list = None
    hosts: list = None
    devices: list = None
    stats: dict = field(default_factory=dict)   # name -> (A, P, S[, C]) µs
    extra: dict = field(default_factory=dict)   # var -> (dims, values, attrs)
    coords: dict = field(default_factory=dict)
    in_bytes: np.ndarray = None
    out_bytes: np.ndarray = None
    bw_unit: float = 1e9
    bw_unit_note: str = ""
    check_time: bool = True             # False when the time column is not what bw used
    aggregated: str = ""
    attrs: dict = field(default_factory=dict)
    complete: bool = True
    incomplete_reason: str = ""


# -- names -----------------------------------------------------------------

def canonical_dtype(name):
    """The kit's dtype name for a printed one (``float`` -> ``fp32``)."""
    try:
        return get_dtype(str(name).strip()).name
    except ConfigError:
        return str(name).strip().lower()


def canonical_op(name):
    s = str(name).strip().lower()
    if s in ("", "none", "-", "n/a"):
        return "none"
    try:
        return get_op(s)
    except ConfigError:
        return s


def find_collective(name):
    """The collective module for any spelling (a collective's name or one of
    its aliases, which hold nccom-test's and the AWS recipe's spellings; with
    nccl-tests' ``_perf`` suffix or without underscores), or None."""
    key = str(name).strip().lower().replace("-", "_")
    key = re.sub(r"_perf(_mpi)?$", "", key)
    for k in (key, key.replace("_", "")):
        try:
            return get_collective(k)
        except ConfigError:
            continue
    return None


def collective_in_name(text, among=None):
    """The one collective a file name spells out (``1_1_LOG_all_reduce_env1``,
    ``nccl_16_ami_allreduce_0x0``), or None."""
    low = str(text).lower()
    hits = []
    for coll in (among or all_collectives()):
        spellings = {coll.name, *coll.aliases}
        for s in spellings:
            if len(s) < 4:
                continue
            for m in re.finditer(r"(?<![a-z])%s(?![a-z])" % re.escape(s), low):
                hits.append((m.start(), m.end(), coll.name))
    # a name inside a longer one ("reduce" in "all_reduce") does not count
    kept = {h[2] for h in hits
            if not any(o[0] <= h[0] and h[1] <= o[1] and (o[1] - o[0]) > (h[1] - h[0])
                       for o in hits)}
    return kept.pop() if len(kept) == 1 else None


def _factors(coll, ps):
    try:
        f = np.asarray(coll.bus_factor(ps), dtype=float)
        return np.broadcast_to(f, ps.shape)
    except Exception:  # a factor written for scalars only
        return np.array([float(coll.bus_factor(int(p))) for p in ps[:4096]] +
                        [np.nan] * max(0, len(ps) - 4096))


def factor_text(coll, p):
    return f"{coll.bus_factor(p):.6g} ({coll.name}, {p} ranks)" if p else \
        f"{coll.bus_factor(2):.6g} ({coll.name})"


# -- inference --------------------------------------------------------------

def _ratio_bounds(t):
    """busbw/algbw as printed, as an interval [lo, hi] over every row, or None."""
    a, b = np.broadcast_arrays(t.algbw, t.busbw)
    ah, bh = np.broadcast_arrays(t.algbw_hu, t.busbw_hu, a)[:2]
    with np.errstate(all="ignore"):
        ok = np.isfinite(a) & np.isfinite(b) & (a - ah > 0) & (b - bh > 0)
        if not ok.any():
            return None
        lo = ((b - bh) / (a + ah))[ok]
        hi = ((b + bh) / (a - ah))[ok]
    lo_all, hi_all = lo.max(), hi.min()
    if lo_all <= hi_all * (1 + _REL):
        return lo_all, hi_all
    best = np.argmax(a[ok])       # rows disagree: trust the most precise one
    return lo[best], hi[best]


def _fitting_ranks(coll, bounds):
    ps = np.arange(2, _MAX_RANKS, dtype=np.int64)
    f = _factors(coll, ps)
    lo, hi = bounds
    return ps[(f >= lo * (1 - _REL)) & (f <= hi * (1 + _REL))]


def _pick_collective(t, hints):
    src = t.src
    if t.collective:
        coll = find_collective(t.collective)
        if coll is None:
            raise src.error(t.line, "a collective ccbench_kit knows ("
                            + ", ".join(c.name for c in all_collectives()) + ")", t.collective)
        return coll
    if hints.collective:
        coll = find_collective(hints.collective)
        if coll is None:
            raise src.error(None, "a collective ccbench_kit knows for --collective ("
                            + ", ".join(c.name for c in all_collectives()) + ")",
                            hints.collective)
        return coll
    cands = list(all_collectives())
    if t.op_root_known:
        # "none" rules out reductions; an op does not rule them in, since
        # nccl-tests' sendrecv and hypercube print one too
        cands = [c for c in cands if c.rooted == (t.root >= 0)
                 and (t.op != "none" or not c.reduces)]
    bounds = _ratio_bounds(t)
    if bounds is not None:
        fitting = [c for c in cands if len(_fitting_ranks(c, bounds))]
        if t.nranks or hints.nranks:
            p = t.group_size or t.nranks or hints.nranks
            fitting = [c for c in fitting
                       if bounds[0] * (1 - _REL) <= c.bus_factor(p) <= bounds[1] * (1 + _REL)]
        cands = fitting
    if len(cands) > 1:
        named = collective_in_name(src.name, cands)
        if named:
            return get_collective(named)
    if len(cands) == 1:
        return cands[0]
    why = "busbw/algbw = %.6g..%.6g" % bounds if bounds else "no bandwidth to go by"
    raise src.error(t.line, "the collective: the file does not name it; pass --collective "
                    "(" + why + (", which fits " + ", ".join(c.name for c in cands)
                                 if cands else ", which fits none the kit knows") + ")")


def _pick_nranks(t, coll, hints):
    if t.nranks:
        return t.nranks
    if hints.nranks:
        return int(hints.nranks)
    ps = np.arange(2, 64)
    if np.ptp(_factors(coll, ps)) == 0:
        return 0          # busbw does not depend on p: nothing to infer, nothing lost
    bounds = _ratio_bounds(t)
    fits = _fitting_ranks(coll, bounds) if bounds else np.array([])
    if len(fits) == 1:
        return int(fits[0])
    what = ("the number of ranks: the file lists no devices; pass --nranks")
    if bounds is None:
        raise t.src.error(t.line, what + " (no bandwidth to infer it from)")
    span = f"{fits[0]} to {fits[-1]} ranks" if len(fits) else "no rank count"
    raise t.src.error(t.line, what + " (busbw/algbw = %.6g..%.6g fits %s for %s)"
                      % (bounds[0], bounds[1], span, coll.name))


# -- the bandwidth check ------------------------------------------------------

def drop_broken_times(t):
    """Set to missing (NaN) the times that are no times: NaN on a row that
    printed numbers, ±inf, negative or zero; also in the per-iteration
    latencies.  Returns what was dropped, for the warning and the
    ``reported_check`` attr ("" when nothing)."""
    time = np.asarray(t.time, dtype=float)
    printed = (np.isfinite(np.broadcast_to(np.asarray(t.algbw, dtype=float), time.shape))
               | np.isfinite(np.broadcast_to(np.asarray(t.busbw, dtype=float), time.shape)))
    with np.errstate(invalid="ignore"):
        bad = np.isinf(time) | (time <= 0) | (np.isnan(time) & printed)
    n = int(bad.sum())
    lines = set()
    if n:
        t.time = np.where(bad, np.nan, time)
        if t.lines is not None:
            rows = np.asarray(t.lines)[bad.any(axis=1)] if np.ndim(t.lines) == 3 else []
            lines = {int(x) for x in np.ravel(rows) if x}
    n_iter = 0
    if t.latency is not None:
        lat = np.asarray(t.latency, dtype=float)
        with np.errstate(invalid="ignore"):
            bad_iter = np.isinf(lat) | (lat <= 0)
        n_iter = int(bad_iter.sum())
        if n_iter:
            t.latency = np.where(bad_iter, np.nan, lat)
    if not n and not n_iter:
        return ""
    what = []
    if n:
        where = f" (line{'s' if len(lines) != 1 else ''} " \
            f"{', '.join(map(str, sorted(lines)[:10]))}{', ...' if len(lines) > 10 else ''})" \
            if lines else ""
        what.append(f"{n} time{'s' if n != 1 else ''}{where}")
    if n_iter:
        what.append(f"{n_iter} per-iteration time{'s' if n_iter != 1 else ''}")
    return (f"BROKEN: {' and '.join(what)} not a positive finite number (nan, inf, negative "
            "or zero); kept as missing")


def check_reported(t, factor):
    """Masks of printed algbw and busbw values that disagree with size/time
    and `factor` beyond their printed rounding (NaN values are not judged)."""
    shape = np.broadcast_shapes(np.shape(t.time), np.shape(t.algbw), np.shape(t.busbw))
    time, alg, bus = (np.broadcast_to(x, shape) for x in (t.time, t.algbw, t.busbw))
    th, ah, bh = (np.broadcast_to(np.asarray(x, dtype=float), shape)
                  for x in (t.time_hu, t.algbw_hu, t.busbw_hu))
    size = np.asarray(t.sizes, dtype=float)[None, None, :, None]
    unit = t.bw_unit
    with np.errstate(all="ignore"):
        if t.check_time:
            t_hi, t_lo = time + th, time - th
            alg_lo = np.where(size == 0, 0.0, size / (t_hi * 1e-6) / unit)
            alg_hi = np.where(size == 0, 0.0,
                              np.where(t_lo > 0, size / (t_lo * 1e-6) / unit, np.inf))
            alg_bad = np.isfinite(time) & np.isfinite(alg) & (
                (alg + ah < alg_lo * (1 - _REL)) | (alg - ah > alg_hi * (1 + _REL)))
            lo = np.where(alg_bad, alg_lo, np.maximum(alg_lo, alg - ah))
            hi = np.where(alg_bad, alg_hi, np.minimum(alg_hi, alg + ah))
            lo = np.where(np.isfinite(alg), lo, alg_lo)
            hi = np.where(np.isfinite(alg), hi, alg_hi)
            lo = np.where(np.isfinite(time), lo, alg - ah)
            hi = np.where(np.isfinite(time), hi, alg + ah)
        else:
            alg_bad = np.zeros(shape, dtype=bool)
            alg_lo, alg_hi = alg - ah, alg + ah
            lo, hi = alg_lo, alg_hi
        bus_lo, bus_hi = lo * factor, hi * factor
        bus_bad = np.isfinite(bus) & np.isfinite(bus_lo) & (
            (bus + bh < bus_lo * (1 - _REL)) | (bus - bh > bus_hi * (1 + _REL)))
    return alg_bad, bus_bad, (alg_lo, alg_hi), (bus_lo, bus_hi)


def _mismatch_report(t, alg_bad, bus_bad, alg_rng, bus_rng):
    items = []
    for name, bad, printed, rng in (("algbw", alg_bad, t.algbw, alg_rng),
                                    ("busbw", bus_bad, t.busbw, bus_rng)):
        printed = np.broadcast_to(printed, bad.shape)
        for a, pl, s, c in zip(*np.nonzero(bad)):
            line = None
            if t.lines is not None:
                line = int(np.broadcast_to(t.lines, (bad.shape[0], bad.shape[2], bad.shape[3]))[a, s, c])
            items.append({"line": line, "algorithm": str(t.algorithms[a]),
                          "placement": str(t.placements[pl]), "size": int(t.sizes[s]),
                          "column": name, "printed": float(printed[a, pl, s, c]),
                          "expected": [float(rng[0][a, pl, s, c]), float(rng[1][a, pl, s, c])]})
    items.sort(key=lambda d: (d["line"] or 0, d["column"]))
    judged = int(np.isfinite(np.broadcast_to(t.busbw, bus_bad.shape)).sum()
                 + np.isfinite(np.broadcast_to(t.algbw, alg_bad.shape)).sum())
    return items, judged


def _describe(item, unit_name):
    lo, hi = item["expected"]
    where = f"line {item['line']}: " if item["line"] else ""
    return (f"{where}size {item['size']} {item['placement']} {item['algorithm']}: "
            f"{item['column']} printed {item['printed']:g}, size/time gives "
            f"{lo:.4g}..{hi:.4g} {unit_name}")


# -- the Dataset ---------------------------------------------------------------

# Sizes a tool prints otherwise than the kit: (tool, collective) -> (the
# kit's size of a printed size on p ranks, the printed size of the kit's,
# what the size_convention attr says).
_PRINTED_SIZES = {
    ("nccl-tests", "hypercube"): (
        lambda size, p: size // p * (p - 1), lambda size, p: size // (p - 1) * p,
        "nccl-tests prints hypercube's size as p x count x item size; size here is "
        "count x (p-1) x item size, the bytes each rank receives, which nccl-tests' own "
        "algbw divides by the time (the printed sizes are reported_size)"),
}


def _to_kit_sizes(t, coll, p):
    """`t.sizes` in the kit's convention where the tool's differs, the
    printed ones kept as ``reported_size``."""
    rule = _PRINTED_SIZES.get((t.fmt.split(" ")[0], coll.name))
    if rule is None or not p or p < 2:  # one rank moves nothing: no size to convert
        return
    to_kit, _, note = rule
    t.extra["reported_size"] = (("size",), np.asarray(t.sizes, dtype=np.int64).copy(),
                                {"units": "B", "long_name": f"size as {t.fmt} printed it"})
    t.sizes = np.array([to_kit(int(s), int(p)) for s in t.sizes], dtype=np.int64)
    t.attrs["size_convention"] = note


def tool_size(tool, collective, size, p):
    """The size `tool` prints for the kit's `size` of `collective` on `p`
    ranks (the same but where `_PRINTED_SIZES` says otherwise)."""
    rule = _PRINTED_SIZES.get((tool, collective))
    return int(size) if rule is None or p < 2 else rule[1](int(size), int(p))


def _io_bytes(coll, sizes, dtype, p):
    try:
        itemsize = get_dtype(dtype).itemsize
    except ConfigError:
        itemsize = None
    ins, outs = [], []
    for s in sizes:
        s = int(s)
        i = o = -1
        if s == 0:
            i = o = 0
        elif itemsize and p:
            try:
                lay = coll.layout(s, itemsize, p)
                if lay.size == s:
                    i, o = lay.in_bytes(itemsize), lay.out_bytes(itemsize)
            except (ConfigError, ArithmeticError, ValueError):
                pass
        ins.append(i)
        outs.append(o)
    return np.array(ins, dtype=np.int64), np.array(outs, dtype=np.int64)


def _cycles(x):
    x = np.asarray(x, dtype=float)
    return x if x.ndim == 4 else x[..., None]


def _created(src):
    """When the results were made, as well as the file tells: its mtime."""
    when = datetime.datetime.fromtimestamp(src.mtime, datetime.timezone.utc) if src.mtime \
        else datetime.datetime.now(datetime.timezone.utc)
    return when.isoformat(timespec="seconds")


def to_dataset(t, hints):
    """The results Dataset of `t`, with ``reported_*`` variables."""
    # why long: the checks of the printed numbers, the attrs that report them
    # and the Dataset are built from the same dozen locals, in one order.
    src = t.src
    t.time, t.algbw, t.busbw = _cycles(t.time), _cycles(t.algbw), _cycles(t.busbw)
    coll = _pick_collective(t, hints)
    p = _pick_nranks(t, coll, hints)
    _to_kit_sizes(t, coll, p)
    group = t.group_size or p
    factor = float(coll.bus_factor(group)) if group else float(coll.bus_factor(2))
    A, P, S, C = t.time.shape
    unit_name = "GiB/s" if t.bw_unit == float(1 << 30) else "GB/s"

    broken = drop_broken_times(t)
    alg_bad, bus_bad, alg_rng, bus_rng = check_reported(t, factor)
    items, judged = _mismatch_report(t, alg_bad, bus_bad, alg_rng, bus_rng)
    attrs = {}
    if items:
        head = _describe(items[0], unit_name)
        attrs["reported_check"] = (
            f"MISMATCH: {len(items)} of {judged} printed bandwidths disagree with size/time "
            f"and the bus factor {factor_text(coll, group)} beyond rounding; first: {head}")
        attrs["reported_mismatch"] = json.dumps(items[:_MAX_LISTED])
        warnings.warn(f"{src.path}: {attrs['reported_check']}", ReportedMismatchWarning,
                      stacklevel=3)
    else:
        attrs["reported_check"] = (
            f"ok: {judged} printed bandwidths agree with size/time and the bus factor "
            f"{factor_text(coll, group)} within rounding")
    if broken:  # never "ok" over times that are no times
        attrs["reported_check"] = f"{broken}; {attrs['reported_check']}"
        warnings.warn(f"{src.path}: {broken}", BrokenTimesWarning, stacklevel=3)

    if t.latency is None:
        latency = t.time[:, :, :, None, :]
        ranks, hosts, devices = [-1], [""], [""]
    else:
        latency = np.asarray(t.latency, dtype=float)
        ranks, hosts, devices = t.ranks, t.hosts, t.devices
    wrong = t.wrong if t.wrong is not None else np.full((A, P, S), -1, dtype=np.int64)
    if t.in_bytes is not None:
        in_b, out_b = t.in_bytes, t.out_bytes
    else:
        in_b, out_b = _io_bytes(coll, t.sizes, t.dtype, p)

    base = {
        "collective": coll.name, "dtype": t.dtype, "op": t.op, "root": int(t.root),
        "nranks": int(p), "backend": "", "library": "", "timing": "imported",
        "warmup": "", "iters": "", "kit_version": __version__,
        "created": _created(src),
        "command": "", "hosts": [], "env": {}, "source": src.path,
        "format": t.fmt, "aggregated": t.aggregated,
        "imported": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "complete": t.complete,
    }
    if t.group_size and t.group_size != p:
        base["group_size"] = int(t.group_size)
    if not t.complete:
        base["incomplete_reason"] = t.incomplete_reason
    if t.bw_unit_note:
        base["reported_bw_unit"] = t.bw_unit_note
    base.update(t.attrs)
    base.update(attrs)
    ds = make_dataset(algorithms=list(t.algorithms), placements=list(t.placements),
                      sizes=t.sizes, counts=t.counts, in_bytes=in_b, out_bytes=out_b,
                      latency=latency, wrong=wrong, ranks=ranks, hosts=hosts,
                      devices=devices, attrs=base, extra_coords=t.coords)

    dims = ("algorithm", "placement", "size") + (("cycle",) if C > 1 else ())

    def fold(x):
        x = np.broadcast_to(np.asarray(x, dtype=float), (A, P, S, C))
        return x if C > 1 else x[..., 0]

    what = t.fmt.split(" ")[0]
    ds["reported_time"] = (dims, fold(t.time), {"units": "us", "long_name": f"time as {what} printed it"})
    ds["reported_algbw"] = (dims, fold(t.algbw), {"units": unit_name, "long_name": f"algbw as {what} printed it"})
    ds["reported_busbw"] = (dims, fold(t.busbw), {"units": unit_name, "long_name": f"busbw as {what} printed it"})
    if t.stats:
        names = list(t.stats)
        vals = np.stack([fold(t.stats[n]) for n in names], axis=-1)
        ds["reported_time_stats"] = (dims + ("stat",), vals,
                                     {"units": "us", "long_name": f"time statistics {what} printed"})
        ds = ds.assign_coords(stat=np.array(names, dtype=str))
    for name, (vdims, values, vattrs) in t.extra.items():
        ds[name] = (vdims, values, vattrs)
    if C > 1:
        ds = ds.assign_coords(cycle=np.arange(C, dtype=np.int64))
    return ds
