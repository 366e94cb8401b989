"""The text an importer reads, and how printed numbers are read back.

Printed numbers carry their rounding: ``347.59`` is 347.59 ± 0.005, ``1e+05``
is 1e5 ± 5e4.  Importers keep that half-unit (the "half ulp" of the printed
token) so the bandwidth check can tell rounding from disagreement.
"""
import json
import os
import re
from dataclasses import dataclass, field

import numpy as np

from ...bounded import loads_json as loads_bounded
from .errors import ImporterError
from ...output_path import open_regular

# srun --label ("0: ") in front of every line of a log; mpirun --tag-output's
# "[1,0]<stdout>:" is stripped in untag_lines.
_LABEL = re.compile(r"[ \t]*\d+: ")


@dataclass
class Hints:
    """What the caller knows that a file may not say.

    Attributes
    ----------
    collective : str, optional
        Used when the file names no collective (nccom-test output, old
        nccl-tests logs).
    nranks : int, optional
        Used when the file lists no devices and the bus factor cannot tell.
    partial : bool
        Keep the complete rows of a truncated table (marked incomplete)
        instead of refusing the file.
    """

    collective: str = None
    nranks: int = None
    partial: bool = False


@dataclass
class Source:
    """One input: its display name and text (None: the file at `path`, for
    a reader that streams it, the NCCL Inspector's)."""

    path: str
    text: str
    mtime: float = None
    _lines: list = field(default=None, repr=False)

    @classmethod
    def from_file(cls, path, limit=None):
        """The text of the file at `path`; with `limit`, only its first
        `limit` bytes (enough to tell the format of a dump of GBs)."""
        path = os.fspath(path)
        try:
            with open_regular(path) as f:
                raw = f.read() if limit is None else f.read(limit)
            mtime = os.path.getmtime(path)
        except OSError as e:
            raise ImporterError(path, None, "a readable file", e.strerror) from e
        return cls(path, raw.decode("utf-8", errors="replace"), mtime)

    @property
    def name(self):
        return os.path.basename(self.path)

    @property
    def lines(self):
        if self._lines is None:
            lines = self.text.split("\n")
            if "\r" in self.text or "\x1b" in self.text:
                lines = [_as_shown(ln) for ln in lines]
            self._lines = untag_lines(lines)
        return self._lines

    def error(self, line, expected, found=None):
        return ImporterError(self.path, line, expected, found)

    def line_of(self, offset):
        """1-based line number of a character offset in `text`."""
        return self.text.count("\n", 0, max(0, offset)) + 1


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _as_shown(line):
    """A line as a terminal shows it: CRLF ends, progress output overwritten
    by a carriage return is gone, colour and erase codes dropped."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    line = line.rstrip("\r")
    return line.rsplit("\r", 1)[-1] if "\r" in line else line


def untag_lines(lines):
    """`lines` without mpirun/srun per-line prefixes (in place of a regex
    over the whole text, which takes seconds on a 100 MB log)."""
    if any("]<std" in ln for ln in lines[:5000]) or any("]<std" in ln for ln in lines[-5000:]):
        # "[1,0]<stdout>:": string methods, not a regex, on every line
        lines = [ln[ln.find(">:", 5) + 2:] if ln.startswith("[") and ln.find("]<std", 3, 24) > 0
                 else ln for ln in lines]
    label = _LABEL.match
    if any(label(ln) for ln in lines[:2000]):
        lines = [ln[m.end():] if (m := label(ln)) else ln for ln in lines]
    return lines


# -- printed numbers -------------------------------------------------------

def half_ulp(tokens):
    """Half a unit in the last printed digit of each token (bytes or str array).

    ``"347.59"`` -> 0.005, ``"12356"`` -> 0.5, ``"1.2e+05"`` -> 5e3; tokens that
    are not numbers give 0.  Only numpy string ufuncs: a column of a 100 MB
    log takes a fraction of a second.
    """
    t = np.asarray(tokens)
    if t.size == 0:
        return np.zeros(t.shape)
    if t.dtype.kind == "S" and t.ndim == 1:
        return _half_ulp_bytes(np.ascontiguousarray(t))
    if t.dtype.kind not in "SU":
        t = t.astype(str)
    b = (lambda x: x.encode()) if t.dtype.kind == "S" else (lambda x: x)
    epos = np.maximum(np.strings.find(t, b("e")), np.strings.find(t, b("E")))
    has_e = epos >= 0
    mant_len = np.where(has_e, epos, np.strings.str_len(t))
    dot = np.strings.find(t, b("."))
    dec = np.where((dot >= 0) & (dot < mant_len), mant_len - dot - 1, 0)
    exp = np.zeros(t.shape, dtype=np.int64)
    for i in np.flatnonzero(has_e.ravel()):     # exponent form is rare: a loop is fine
        tok = t.flat[i]
        try:
            exp.flat[i] = int(tok[int(epos.flat[i]) + 1:])
        except ValueError:
            pass
    return 0.5 * np.power(10.0, np.clip(exp - dec, -300, 300).astype(float))


def _half_ulp_bytes(t):
    """half_ulp of a bytes column, on its (n, itemsize) byte matrix."""
    m = t.view(np.uint8).reshape(len(t), t.dtype.itemsize)
    length = (m != 0).sum(axis=1)
    ise = (m == ord("e")) | (m == ord("E"))
    has_e = ise.any(axis=1)
    mant_len = np.where(has_e, ise.argmax(axis=1), length)
    isdot = m == ord(".")
    dot = np.where(isdot.any(axis=1), isdot.argmax(axis=1), -1)
    dec = np.where((dot >= 0) & (dot < mant_len), mant_len - dot - 1, 0)
    exp = np.zeros(len(t), dtype=np.int64)
    for i in np.flatnonzero(has_e):     # exponent form is rare: a loop is fine
        try:
            exp[i] = int(t[i][int(mant_len[i]) + 1:])
        except ValueError:
            pass
    return 0.5 * np.power(10.0, np.clip(exp - dec, -300, 300).astype(float))


class PrintedFloat(float):
    """A float read from JSON that remembers its printed rounding."""

    half = 0.0

    def __new__(cls, text):
        self = super().__new__(cls, text)
        if "e" in text or "E" in text:
            self.half = float(half_ulp(np.array([text]))[0])
        else:   # plain decimals (every Inspector number): no numpy call per number
            dot = text.find(".")
            self.half = 0.5 if dot < 0 else 0.5 * 10.0 ** (dot + 1 - len(text))
        return self


def half_of(value):
    """Rounding half-unit of a JSON number: its printed digits, 0.5 for ints."""
    if isinstance(value, PrintedFloat):
        return value.half
    if isinstance(value, int) and not isinstance(value, bool):
        return 0.5
    return 0.0


def loads_json(src):
    """Parse `src.text` as JSON keeping printed precision; ImporterError on
    a syntax error (with its line)."""
    try:
        return loads_bounded(src.text, parse_float=PrintedFloat)
    except json.JSONDecodeError as e:
        what = "the rest of the JSON document (the file ends early: truncated?)" \
            if e.pos >= len(src.text.rstrip()) else f"valid JSON ({e.msg})"
        raise src.error(e.lineno, what, src.text[e.pos:e.pos + 40] or "end of file") from None
    except (ValueError, RecursionError) as e:
        raise src.error(None, "valid JSON", str(e)) from None


def json_number(value, src, line, what):
    """A JSON value as float: numbers, ``"nan"``/``"inf"`` strings, null -> nan."""
    if value is None:
        return float("nan")
    if isinstance(value, bool):
        raise src.error(line, f"a number for {what}", value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        s = value.strip().lower()
        if s in ("nan", "-nan", "inf", "-inf", "+inf", "n/a", ""):
            return float("nan") if s in ("nan", "-nan", "n/a", "") else float(s)
        try:
            return float(s)
        except ValueError:
            pass
    raise src.error(line, f"a number for {what}", value)


def json_line_finder(src, key):
    """``f(i)``: the line of the i-th occurrence of ``"key":`` in the JSON text
    (results entries carry no line numbers once parsed)."""
    starts = [m.start() for m in re.finditer(r'"%s"\s*:' % re.escape(key), src.text)]

    def line(i):
        if 0 <= i < len(starts):
            return src.line_of(starts[i])
        return None
    return line


def key_line(src, start, key, limit=200):
    """The line of ``"key"`` at or after line `start` (within `limit` lines),
    else `start`: points an error at the value, not just its entry."""
    if not start:
        return start
    lines = src.text.split("\n", start + limit)[start - 1:start - 1 + limit]
    needle = json.dumps(str(key))
    for i, ln in enumerate(lines):
        if needle in ln:
            return start + i
    return start
