"""Meta's AllgatherP bench table (comms/ctran/benchmarks/allgatherp_bench).

::

    Algorithm        Size(B)   Count   Avg(ms)   Min(ms)   Max(ms) AlgoBW(GB/s)  BusBW(GB/s)
    AllGatherP_Direct  32768   16384     0.125     0.118     0.132        2.104        1.841

Size(B) is each rank's send buffer, p times smaller than nccl-tests' all_gather
size (the whole output), so sizes are multiplied by the rank count here.
Avg is the mean over ranks of each rank's mean over back-to-back iterations;
Min/Max are the fastest and slowest rank (kept in ``reported_time_stats``).
Its algorithms (AllGatherP_Direct, AllGatherP_Pipeline, NCCL_AllGather) are
the `algorithm` dim.  The bench always runs bf16.
"""
import re

import numpy as np

from ..common.build import Table, to_dataset
from ..common.source import half_ulp
import xarray as xr

NAME = "AllgatherP bench"
_TITLE = "AllgatherP Performance Benchmark"
_HEADER = re.compile(r"Algorithm\s+Size\(B\)\s+Count\s+Avg\(ms\)", re.I)
_CONF = re.compile(r"^(Ranks|Min Size|Max Size|Warmup Iterations|Benchmark Iterations|"
                   r"Memory Type|In-Place)\s*:\s*(.*?)\s*$")
_COLS = {"algorithm": "alg", "size(b)": "size", "count": "count", "avg(ms)": "avg",
         "min(ms)": "min", "max(ms)": "max", "algobw(gb/s)": "algbw", "busbw(gb/s)": "busbw"}


def sniff(src, head):
    return _TITLE in head or bool(_HEADER.search(head))


class _Block:
    def __init__(self, line):
        self.line = line
        self.conf = {}
        self.cols = None
        self.header_line = None
        self.rows = []      # (line, {col: token})


def _scan(src, hints):
    blocks = [_Block(1)]
    blk = blocks[0]
    lines = src.lines
    for i, raw in enumerate(lines):
        s = raw.strip()
        if not s:
            continue
        if _TITLE in s:
            if blk.cols is not None or blk.conf:
                blk = _Block(i + 1)
                blocks.append(blk)
            continue
        m = _CONF.match(s)
        if m:
            if blk.cols is not None:
                blk = _Block(i + 1)
                blocks.append(blk)
            blk.conf[m.group(1)] = m.group(2)
            continue
        if _HEADER.search(s):
            if blk.cols is not None:
                nb = _Block(i + 1)
                nb.conf = dict(blk.conf)
                blk = nb
                blocks.append(blk)
            toks = [t.lower() for t in s.split()]
            missing = [c for c in ("algorithm", "size(b)", "avg(ms)", "algobw(gb/s)", "busbw(gb/s)")
                       if c not in toks]
            if missing:
                raise src.error(i + 1, "the AllgatherP header with Algorithm, Size(B), Avg(ms), "
                                "AlgoBW(GB/s) and BusBW(GB/s)", s)
            blk.cols = [_COLS.get(t, t) for t in toks]
            blk.header_line = i + 1
            continue
        if blk.cols is None:
            continue
        toks = s.split()
        if len(toks) < 2 or not (toks[1].isascii() and toks[1].isdigit()) or toks[0].startswith(("[", "#")):
            continue                      # dashes, "...", test-runner chatter
        if len(toks) != len(blk.cols):
            ends = not any(x.strip() for x in lines[i + 1:])
            if ends and hints.partial:
                continue
            raise src.error(i + 1, f"{len(blk.cols)} columns as the header at line "
                            f"{blk.header_line} says"
                            + (" (the file ends inside this row: truncated?)" if ends else ""), s)
        blk.rows.append((i + 1, dict(zip(blk.cols, toks))))
    return [b for b in blocks if b.cols is not None]


def _number(src, line, tok, what, integer=False):
    try:
        v = float(tok)
    except ValueError:
        raise src.error(line, f"a number in the {what} column", tok) from None
    if integer and (not np.isfinite(v) or v < 0 or v >= 2.0 ** 53 or v != int(v)):
        raise src.error(line, f"a whole number in the {what} column", tok)
    return v


def _ranks(src, blk, hints):
    r = blk.conf.get("Ranks")
    if r is not None:
        try:
            if 0 < int(r) < 1 << 24:
                return int(r)
        except ValueError:
            pass
        raise src.error(blk.line, "a positive rank count after 'Ranks:'", r)
    if hints.nranks:
        return int(hints.nranks)
    # AlgoBW = Size(B) * p / time: the most precise row says p
    best = None
    for line, row in blk.rows:
        try:
            size, t, bw = float(row["size"]), float(row["avg"]) * 1e-3, float(row["algbw"])
        except (KeyError, ValueError):
            continue
        if size > 0 and t > 0 and bw > 0 and (best is None or bw > best[0]):
            best = (bw, bw * 1e9 * t / size)
    if best and 1.5 <= best[1] < 1 << 24 and abs(best[1] - round(best[1])) < 0.05 * best[1]:
        return int(round(best[1]))
    raise src.error(blk.line, "the rank count: no 'Ranks:' line; pass --nranks")


def _table(src, blk, hints):
    p = _ranks(src, blk, hints)
    algs, sizes = [], []
    parsed = []
    for line, row in blk.rows:
        alg = row["alg"]
        size = int(_number(src, line, row["size"], "Size(B)", integer=True))
        vals = {k: (_number(src, line, row[k], k), row[k])
                for k in ("avg", "min", "max", "algbw", "busbw") if k in row}
        count = int(_number(src, line, row["count"], "Count", integer=True)) if "count" in row else -1
        parsed.append((line, alg, size, count, vals))
        if alg not in algs:
            algs.append(alg)
        if size not in sizes:
            sizes.append(size)
    sizes = sorted(sizes)
    A, S = len(algs), len(sizes)
    shape = (A, 1, S, 1)
    arr = {k: np.full(shape, np.nan) for k in ("avg", "min", "max", "algbw", "busbw")}
    hu = {k: np.zeros(shape) for k in arr}
    lines = np.zeros((A, S, 1), dtype=np.int64)
    counts = np.full(S, -1, dtype=np.int64)
    dup = 0
    for line, alg, size, count, vals in parsed:
        a, s = algs.index(alg), sizes.index(size)
        if lines[a, s, 0]:
            dup += 1
            continue
        lines[a, s, 0] = line
        counts[s] = count
        scale = {"avg": 1e3, "min": 1e3, "max": 1e3, "algbw": 1.0, "busbw": 1.0}
        for k, (v, tok) in vals.items():
            arr[k][a, 0, s, 0] = v * scale[k]
            hu[k][a, 0, s, 0] = float(half_ulp(np.array([tok]))[0]) * scale[k]
    per_rank = np.array(sizes, dtype=np.int64)
    itemsizes = {size // c for _, _, size, c, _ in parsed if c > 0}
    in_place = blk.conf.get("In-Place", "No").strip().lower() in ("yes", "true", "1")
    t = Table(src=src, line=blk.header_line, fmt=NAME, sizes=per_rank * p, counts=counts,
              time=arr["avg"], algbw=arr["algbw"], busbw=arr["busbw"],
              time_hu=hu["avg"], algbw_hu=hu["algbw"], busbw_hu=hu["busbw"],
              collective="all_gather", nranks=p, dtype="bf16" if itemsizes == {2} else "",
              op="none", root=-1, algorithms=tuple(algs),
              placements=("in_place",) if in_place else ("out_of_place",),
              lines=lines, in_bytes=per_rank, out_bytes=per_rank * p,
              aggregated="AllgatherP bench Avg(ms): each rank's wall time of back-to-back "
              "iterations divided by their number, averaged over ranks")
    if "min" in blk.cols and "max" in blk.cols:
        t.stats = {"rank_min": arr["min"], "rank_max": arr["max"]}
        t.attrs["reported_time_stats"] = ("AllgatherP bench Min(ms)/Max(ms): the fastest and "
                                          "slowest rank's mean time")
    if dup:
        t.attrs["duplicate_rows"] = f"{dup} repeated (algorithm, size) rows; kept the first"
    if itemsizes and itemsizes != {2}:
        t.attrs["itemsize"] = sorted(itemsizes)
    t.attrs.update({"backend": "nccl+ctran", "size_convention":
                    "Size(B) printed per rank; size = Size(B) x ranks (nccl-tests' all_gather size)",
                    "warmup": blk.conf.get("Warmup Iterations", ""),
                    "iters": blk.conf.get("Benchmark Iterations", ""),
                    "mem_type": blk.conf.get("Memory Type", "")})
    return t


def parse(src, hints):
    blocks = _scan(src, hints)
    if not blocks:
        raise src.error(None, "an AllgatherP bench table (an 'Algorithm Size(B) Count Avg(ms) "
                        "...' header)")
    out = []
    for blk in blocks:
        if blk.rows:
            out.append(to_dataset(_table(src, blk, hints), hints))
    if not out:
        raise src.error(blocks[0].header_line + 1, "at least one result row under the header")
    return _merge_placements(out)


def _merge_placements(datasets):
    """An in-place and an out-of-place run of one configuration become one
    Dataset with both placements, as nccl-tests prints them."""

    merged, used = [], set()
    for i, a in enumerate(datasets):
        if i in used:
            continue
        for j in range(i + 1, len(datasets)):
            b = datasets[j]
            if j in used or a.attrs["nranks"] != b.attrs["nranks"] \
                    or set(a.placement.values) & set(b.placement.values) \
                    or list(a.algorithm.values) != list(b.algorithm.values) \
                    or not np.array_equal(a["size"].values, b["size"].values):
                continue
            try:
                a = xr.concat([a, b], dim="placement", data_vars="all", coords="minimal",
                              compat="override", combine_attrs="override")
            except ValueError:
                continue
            used.add(j)
        merged.append(a)
    return merged
