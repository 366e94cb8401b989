"""nccl-tests' printed output (``all_reduce_perf ... | tee log``), any recent version.

Columns are found by the header (``# size count type redop root time algbw
busbw #wrong ...``), not by position, so tables with or without redop/root,
``#wrong`` or the old ``error``, ``-I``'s per-iteration columns, ``-C``'s
cputime and ``-T``'s timestamps all read.  mpirun/srun line prefixes, NCCL
INFO lines in the middle of a table, and several tests in one log are fine.
"""
import re

import numpy as np

from . import meta as meta_
from .rows import PLACEMENTS, Meta, Rows, sweep_length, tables_from_rows
from ..common.source import half_ulp
from ..common.build import to_dataset

NAME = "nccl-tests text"
_SNIFF = re.compile(r"^[ \t]*#[ \t]*size[ \t]+count[ \t]+type|nccl-tests version|"
                    r"Collective test starting:", re.M)
_PARAMS = {k: re.compile(p) for k, p in {
    "nthreads": r"nThread\s+(\d+)", "ngpus": r"nGpus\s+(\d+)", "minbytes": r"minBytes\s+(\d+)",
    "maxbytes": r"maxBytes\s+(\d+)", "step": r"step:\s*(\d+)\((factor|bytes)\)",
    "warmup": r"warmup iters:\s*(\d+)", "iters": r"(?<!warmup )(?<!agg )iters:\s*(\d+)",
    "agg_iters": r"agg iters:\s*(\d+)", "validation": r"validation:\s*(\d+)",
    "graph": r"graph:\s*(\d+)"}.items()}
_FOOT_OOB = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_FOOT_AVG = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_STATS = {"i_min": "min", "i_max": "max", "i_p99": "p99"}


def sniff(src, head):
    return bool(_SNIFF.search(head))


class _Block:
    """One test in the log: from its parameters to its footer."""

    def __init__(self, line):
        self.line = line
        self.name = None
        self.version = ""
        self.library = ""
        self.params = {}
        self.devices = []
        self.title = None
        self.header = None          # (line, tokens)
        self.row_text = []
        self.row_line = []
        self.footer = False
        self.oob = None
        self.avg = None
        self.notes = []
        self.per_iter_skip = 0

    @property
    def started(self):
        return self.header is not None


def _parse_comment(body, blk, lineno, blocks):
    """Handle one ``#`` line; returns the current block (maybe a new one)."""
    toks = body.split()
    if not toks:
        return blk
    if "nccl-tests version" in body or "Collective test starting:" in body \
            or body.startswith("nThread"):
        if blk.started:
            blk = _Block(lineno)
            blocks.append(blk)
        m = re.search(r"nccl-tests version (\S+)", body)
        if m:
            blk.version = m.group(1)
        m = re.search(r"nccl-library=(\d+)", body)
        if m:
            blk.library = meta_.nccl_version(m.group(1))
        m = re.search(r"Collective test starting:\s*(\S+)", body)
        if m:
            blk.name = meta_.collective_of_program(m.group(1)) or m.group(1)
        if body.startswith("nThread"):
            for k, rx in _PARAMS.items():
                m = rx.search(body)
                if m:
                    blk.params[k] = m.groups() if k == "step" else int(m.group(1))
        return blk
    if toks[0] == "Rank":
        dev = meta_.parse_device(body)
        if dev:
            if blk.started:
                blk = _Block(lineno)
                blocks.append(blk)
            blk.devices.append(dev)
        return blk
    if toks[0] == "size" and "count" in toks:
        if blk.started:               # a second table with no parameter line
            nb = _Block(lineno)
            nb.name, nb.version, nb.library = blk.name, blk.version, blk.library
            nb.params, nb.devices = dict(blk.params), list(blk.devices)
            blk = nb
            blocks.append(blk)
        blk.header = (lineno, toks)
        return blk
    if "out-of-place" in body or "in-place" in body:
        blk.title = [p for p in re.findall(r"(out-of-place|in-place)", body)]
        return blk
    m = _FOOT_OOB.search(body)
    if m:
        blk.oob = (int(m.group(1)), m.group(2) or "")
        return blk
    m = _FOOT_AVG.search(body)
    if m:
        blk.avg = (m.group(1), m.group(2) or "")
        blk.footer = True
        return blk
    m = re.search(r"Reducing maxBytes to (\d+)", body)
    if m:
        blk.params["maxbytes"] = int(m.group(1))
        blk.notes.append(body)
        return blk
    m = re.search(r"summary skips first (\d+) iterations", body)
    if m:
        blk.per_iter_skip = int(m.group(1))
    if body.startswith(("Blocking Enabled", "Per-Iteration Report", "error:",
                        "Parallel Init")):
        blk.notes.append(body)
    return blk


def _scan(src):
    """Blocks of the log, plus the NCCL INFO facts found between lines."""
    blocks = [_Block(1)]
    blk = blocks[0]
    env, nccl_lib = {}, ""
    for i, line in enumerate(src.lines):
        s = line.lstrip()
        if not s:
            continue
        c = s[0]
        if "0" <= c <= "9":
            if blk.started and not blk.footer:
                blk.row_text.append(s)
                blk.row_line.append(i + 1)
        elif c == "#":
            blk = _parse_comment(s[1:].strip(), blk, i + 1, blocks)
        elif "NCCL INFO" in s and ("set by environment" in s or "NCCL version" in s):
            m = re.search(r"NCCL INFO (NCCL_\w+) set by environment to (\S+)", s)
            if m:
                env[m.group(1)] = m.group(2)
            m = re.search(r"NCCL INFO NCCL version (\S+)", s)
            if m and not nccl_lib:
                nccl_lib = m.group(1).split("+")[0]
    return [b for b in blocks if b.started], env, nccl_lib


# -- columns -----------------------------------------------------------------

def _layout(src, blk):
    """(lead columns, [group columns...], placements, trailing tokens)."""
    line, toks = blk.header
    toks = [t.lower() for t in toks]
    starts = [i for i, t in enumerate(toks) if t in ("time", "cputime")]
    need = "a header naming size, count, type, then time, algbw, busbw per placement"
    if not starts or "size" not in toks[:starts[0]]:
        raise src.error(line, need, " ".join(blk.header[1]))
    lead = toks[:starts[0]]
    groups = [toks[a:b] for a, b in zip(starts, starts[1:] + [len(toks)])]
    trail = 0
    if groups[-1] and groups[-1][-1] == "timestamp":
        groups[-1] = groups[-1][:-1]
        trail = 2                      # "2026-11-22 05:59:10"
    for g in groups:
        if "algbw" not in g or "busbw" not in g:
            raise src.error(line, need + " (a placement lacks algbw or busbw)",
                            " ".join(blk.header[1]))
    if len(groups) > 2:
        raise src.error(line, need + " (at most two placements)", " ".join(blk.header[1]))
    if blk.title and len(blk.title) == len(groups):
        placements = [p.replace("-", "_") for p in blk.title]
    else:
        placements = list(PLACEMENTS[:len(groups)])
    return lead, groups, placements, trail


def _tokens(src, blk, ncols, lead_n, null_cols, partial, redop_at=None):
    """Rows as an (n, ncols) bytes array; rows whose out-of-place part is
    blank (trace replay) get NaN tokens there, rows whose redop is blank
    (hypercube passes opName "") get ``none`` at `redop_at`."""
    text, lines = blk.row_text, blk.row_line
    if not text:
        return np.zeros((0, ncols), dtype="S24"), np.zeros(0, dtype=np.int64), False
    try:
        if not all(map(str.isascii, text)):
            raise ValueError("non-ASCII rows: checked one by one below")
        arr = np.loadtxt(text, dtype="S24", comments=None, ndmin=2)
        # a token that filled all 24 bytes may have been cut: read those rows one by one
        if arr.shape[1] == ncols and not (np.strings.str_len(arr) >= 24).any():
            return arr, np.asarray(lines, dtype=np.int64), False
    except (ValueError, UnicodeError):
        pass
    rows, keep, cut = [], [], False
    for k, (s, ln) in enumerate(zip(text, lines)):
        t = s.split()
        if not (t[0].isascii() and t[0].isdigit()):
            continue                  # a log line that starts with a digit
        if not s.isascii():
            raise src.error(ln, "a result row of plain ASCII numbers", s)
        if len(t) == ncols:
            rows.append(t)
        elif null_cols and len(t) == ncols - null_cols:
            rows.append(t[:lead_n] + ["nan"] * null_cols + t[lead_n:])
        elif redop_at is not None and len(t) == ncols - 1 and _is_int(t[redop_at]):
            rows.append(t[:redop_at] + ["none"] + t[redop_at:])
        elif k == len(text) - 1 and not blk.footer and partial:
            cut = True                # the log stops inside this row
            continue
        else:
            hint = " (the log ends inside this row: truncated? --partial keeps the rows before)" \
                if k == len(text) - 1 and not blk.footer else ""
            raise src.error(ln, f"{ncols} columns as the header at line {blk.header[0]} "
                            f"says{hint}", s)
        keep.append(ln)
    if not rows:
        return np.zeros((0, ncols), dtype="S24"), np.zeros(0, dtype=np.int64), cut
    return np.array(rows, dtype=bytes), np.asarray(keep, dtype=np.int64), cut


def _is_int(token):
    return token.lstrip("-").isdigit()


def _floats(src, col, lines, what):
    na = col == b"N/A"
    if na.any():
        col = np.where(na, b"nan", col)
    try:
        return col.astype(float)
    except ValueError:
        for v, ln in zip(col, lines):
            try:
                float(v)
            except ValueError:
                raise src.error(int(ln), f"a number in the {what} column",
                                v.decode(errors="replace")) from None
        raise


def _ints(src, col, lines, what, na=None):
    if na is not None:
        is_na = col == b"N/A"
        col = np.where(is_na, b"0", col)
    try:
        out = col.astype(np.int64)
    except (ValueError, OverflowError):
        try:                                   # "%6g" prints big counts as 1e+06
            f = col.astype(float)
            if not np.all(np.isfinite(f)) or np.any(f != np.round(f)) or np.any(np.abs(f) >= 2.0 ** 62):
                raise ValueError
            out = f.astype(np.int64)
        except (ValueError, OverflowError):
            for v, ln in zip(col, lines):
                try:
                    int(float(v))
                except (ValueError, OverflowError):
                    raise src.error(int(ln), f"a whole number in the {what} column",
                                    v.decode(errors="replace")) from None
            raise src.error(int(lines[0]) if len(lines) else None,
                            f"whole numbers in the {what} column") from None
    if na is not None:
        out = np.where(is_na, na, out)
    if np.any(np.abs(out) >= 1 << 62):
        bad = int(np.flatnonzero(np.abs(out) >= 1 << 62)[0])
        raise src.error(int(lines[bad]), f"a whole number in the {what} column",
                        col[bad].decode(errors="replace"))
    return out


def _rows(src, blk, partial):
    lead, groups, placements, trail = _layout(src, blk)
    ncols = len(lead) + sum(len(g) for g in groups) + trail
    null_cols = len(groups[0]) if len(groups) == 2 else 0
    arr, lines, cut = _tokens(src, blk, ncols, len(lead), null_cols, partial,
                              redop_at=lead.index("redop") if "redop" in lead else None)
    n = len(arr)

    def col(name):
        return arr[:, lead.index(name)]

    def text_col(name, default):
        return col(name) if name in lead else np.full(n, default.encode(), dtype="S8")

    rows = Rows(size=_ints(src, col("size"), lines, "size"),
                count=_ints(src, col("count"), lines, "count") if "count" in lead
                else np.full(n, -1, dtype=np.int64),
                type=text_col("type", ""), redop=text_col("redop", "none"),
                root=_ints(src, col("root"), lines, "root") if "root" in lead
                else np.full(n, -1, dtype=np.int64),
                line=lines, time={}, algbw={}, busbw={}, time_hu={}, algbw_hu={},
                busbw_hu={}, wrong={})
    at = len(lead)
    for p, g in zip(placements, groups):
        cols = {name: arr[:, at + j] for j, name in enumerate(g)}
        at += len(g)
        tname = "cputime" if "cputime" in cols else "time"
        for key, name in (("time", tname), ("algbw", "algbw"), ("busbw", "busbw")):
            getattr(rows, key)[p] = _floats(src, cols[name], lines, f"{p} {name}")
            getattr(rows, key + "_hu")[p] = half_ulp(cols[name])
        if "#wrong" in cols:
            w = _floats(src, cols["#wrong"], lines, f"{p} #wrong")
            rows.wrong[p] = np.where(np.isfinite(w), w, -1).astype(np.int64)
        else:
            rows.wrong[p] = np.full(n, -1, dtype=np.int64)
        if "error" in cols:
            rows.error[p] = _floats(src, cols["error"], lines, f"{p} error")
        st = {_STATS[k]: _floats(src, v, lines, f"{p} {k}") for k, v in cols.items() if k in _STATS}
        if st:
            rows.stats[p] = st
        if "i_cv%" in cols:
            rows.cv[p] = _floats(src, cols["i_cv%"], lines, f"{p} i_cv%")
    return rows, placements, groups, cut, lead


def parse(src, hints):

    blocks, env, nccl_lib = _scan(src)
    if not blocks:
        raise src.error(None, "an nccl-tests results table (a '# size count type ... time "
                        "algbw busbw' header)")
    out = []
    for k, blk in enumerate(blocks):
        last = k == len(blocks) - 1
        rows, placements, groups, cut, lead = _rows(src, blk, hints.partial)
        if not blk.footer and not hints.partial:
            where = blk.row_line[-1] + 1 if blk.row_line else blk.header[0] + 1
            raise src.error(where,
                            "more rows or nccl-tests' '# Avg bus bandwidth' footer: the "
                            + ("log ends" if last else "next test starts")
                            + " inside the table begun at line %d (truncated? pass --partial "
                            "to keep its %d complete rows)" % (blk.header[0], len(rows.size)))
        if len(rows.size) == 0:
            continue
        out.extend(to_dataset(t, hints) for t in _tables(src, blk, rows, env, nccl_lib,
                                                         groups, cut, lead))
    if not out:
        raise src.error(blocks[0].header[0] + 1, "at least one result row under the header")
    return out


def _tables(src, blk, rows, env, nccl_lib, groups, cut, lead):
    p = blk.params
    nranks, group_size, hosts = meta_.ranks_from_devices(blk.devices)
    sweep = None
    if "minbytes" in p and "maxbytes" in p and "step" in p:
        step, kind = p["step"]
        n = sweep_length(p["minbytes"], p["maxbytes"],
                         factor=int(step) if kind == "factor" else None,
                         step=int(step) if kind == "bytes" else None)
        sweep = [0] * n if n else None
    cputime = any("cputime" in g for g in groups)
    blocking = "; ".join(n for n in blk.notes if n.startswith("Blocking"))
    version = blk.version
    attrs = {
        "backend": "nccl", "library": f"NCCL {blk.library or nccl_lib}".strip()
        if (blk.library or nccl_lib) else "",
        "warmup": p.get("warmup", ""), "iters": p.get("iters", ""),
        "hosts": hosts, "env": env,
        "devices_listed": [{k: d[k] for k in ("rank", "group", "hostname", "device",
                                              "device_hex", "device_info")}
                           for d in blk.devices],
    }
    if "agg_iters" in p:
        attrs["agg_iters"] = p["agg_iters"]
    if "graph" in p and p["graph"]:
        attrs["graph_launches"] = p["graph"]
    if blk.oob is not None:
        attrs["out_of_bounds"] = f"{blk.oob[0]} {blk.oob[1]}".strip()
    if blk.avg is not None:
        attrs["reported_avg_busbw"] = blk.avg[0]
        if blk.avg[1]:
            attrs["reported_avg_busbw_check"] = blk.avg[1]
    if blk.notes:
        attrs["notes"] = blk.notes
    if blk.per_iter_skip:
        attrs["per_iter_skip"] = blk.per_iter_skip
    if "root" not in lead or "redop" not in lead:
        attrs["columns"] = " ".join(lead)
    complete = blk.footer and not cut
    meta = Meta(fmt=f"{NAME} {version}".strip(), line=blk.header[0], collective=blk.name,
                nranks=nranks, group_size=group_size, sweep=sweep,
                algorithm=meta_.algorithm_name(env),
                aggregated=meta_.aggregated_text(p.get("iters"), p.get("agg_iters"),
                                                 cputime, blocking),
                check_time=not cputime, attrs=attrs, complete=complete,
                incomplete_reason="" if complete else
                "the log ends before nccl-tests' footer; these are the complete rows")
    tables = tables_from_rows(src, rows, meta)
    for t in tables:
        t.op_root_known = "redop" in lead and "root" in lead
        if rows.stats:
            t.attrs["reported_time_stats"] = (
                "nccl-tests -I: min, max and p99 over iterations of each iteration's "
                "time (max over processes, CUDA events)")
    return tables
