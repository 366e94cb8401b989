"""nccom-test's printed table (AWS Neuron), old and new column names.

::

    nccom-test -r 32 ... allg --show-input-output-size
    size(B)  count(elems)  total_input_size(B)  total_output_size(B)  type  time:avg(us)  algbw(GB/s)  busbw(GB/s)
       1024           256                   32                  1024  fp32          6.16         0.17         0.16
    Avg bus bandwidth:      7.7715GB/s

The command line is used when the log has it (rank count, collective);
otherwise pass ``collective=``/``nranks=`` (``--collective``/``--nranks``).
"""
import re

import numpy as np

from . import common as nc
from ..common.build import to_dataset
from ..common.source import half_ulp

NAME = "nccom-test table"
_SNIFF = re.compile(r"size\(B\)\s+count\(elems\)", re.I)
_FOOT = re.compile(r"^Avg bus bandwidth:\s*(\S+?)\s*(GB/s|GiB/s)?\s*$", re.I)
_ERRS = re.compile(r"^(\d+) errors? found", re.I)


def sniff(src, head):
    return bool(_SNIFF.search(head))


def _value(tok):
    try:
        v = float(tok)
    except ValueError:
        return tok, 0.0
    return v, float(half_ulp(np.array([tok]))[0])


class _Table:
    def __init__(self, line, cols, cmd):
        self.line, self.cols, self.cmd = line, cols, cmd
        self.rows, self.lines = [], []
        self.footer = None
        self.failures = []
        self.errors = None


def parse(src, hints):
    tables, cur, cmd = [], None, {}
    for i, raw in enumerate(src.lines):
        s = raw.strip()
        if not s:
            continue
        toks = s.split()
        lower = [t.lower() for t in toks]
        if "nccom-test" in s and (cur is None or cur.footer is not None or not cur.rows):
            cmd = nc.parse_command(s)
            continue
        if nc.SIZE in lower and nc.COUNT in lower:
            if cur is not None and cur.footer is None and cur.rows:
                _truncated(src, cur, hints, i + 1)
            cur = _Table(i + 1, lower, dict(cmd))
            tables.append(cur)
            continue
        if cur is None or cur.footer is not None:
            continue
        m = _FOOT.match(s)
        if m:
            cur.footer = m.group(1)
            continue
        m = _ERRS.match(s)
        if m:
            cur.errors = s
            cur.footer = cur.footer or ""
            continue
        if "Failure running" in s or "failed" in s.lower():
            cur.failures.append(f"line {i + 1}: {s}")
            continue
        if not (toks[0].isascii() and toks[0].isdigit()):
            continue                                   # progress output, logs
        if len(toks) != len(cur.cols):
            ends = i + 1 == len(src.lines) or not any(x.strip() for x in src.lines[i + 1:])
            if ends and hints.partial:
                continue
            raise src.error(i + 1, f"{len(cur.cols)} columns as the header at line {cur.line} "
                            "says" + (" (the log ends inside this row: truncated?)" if ends else ""), s)
        cur.rows.append({c: _value(t) for c, t in zip(cur.cols, toks)})
        cur.lines.append(i + 1)
    if not tables:
        raise src.error(None, "an nccom-test table (a 'size(B) count(elems) ...' header)")
    out = []
    for k, tb in enumerate(tables):
        if tb.footer is None:
            _truncated(src, tb, hints, len(src.lines))
        if not tb.rows:
            if tb.failures or tb.errors:
                raise src.error(tb.line, "result rows; nccom-test reported: "
                                + "; ".join(tb.failures + [tb.errors or ""]).strip("; "))
            continue
        _check_numbers(src, tb)
        extra = {}
        if tb.footer:
            extra["reported_avg_busbw"] = tb.footer
        if tb.failures or tb.errors:
            extra["errors"] = tb.failures + ([tb.errors] if tb.errors else [])
        t = nc.build_table(src, tb.line, NAME, tb.cols, tb.rows, tb.lines, tb.cmd, extra)
        if tb.footer is None:
            t.complete = False
            t.incomplete_reason = "the log ends before nccom-test's 'Avg bus bandwidth' line"
        out.append(nc.to_kit_counts(to_dataset(t, hints)))
    if not out:
        raise src.error(tables[0].line + 1, "at least one result row under the header")
    return out


def _check_numbers(src, tb):
    for row, ln in zip(tb.rows, tb.lines):
        for c, (v, _) in row.items():
            if c not in (nc.TYPE, nc.ALGO) and isinstance(v, str):
                raise src.error(ln, f"a number in the {c} column", v)


def _truncated(src, tb, hints, line):
    if hints.partial:
        tb.footer = None
        return
    raise src.error(line, "nccom-test's 'Avg bus bandwidth' line after the table begun at line "
                    f"{tb.line} (truncated? pass --partial to keep its {len(tb.rows)} rows)")
