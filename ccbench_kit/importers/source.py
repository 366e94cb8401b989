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

from .errors import ImporterError

# mpirun --tag-output ("[1,0]<stdout>:"), Open MPI 5 ("[1,0]<stdout>: "),
# srun --label ("0: ") prefixes in front of every line of a log.
_TAG = re.compile(r"^[ \t]*\[\d+,\d+\]<std(?:out|err)>:[ \t]?", re.M)
_LABEL = re.compile(r"^[ \t]*\d+: ", re.M)


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
    """One input: its display name and text."""

    path: str
    text: str
    mtime: float = None
    _lines: list = field(default=None, repr=False)

    @classmethod
    def from_file(cls, path):
        path = os.fspath(path)
        try:
            with open(path, "rb") as f:
                raw = f.read()
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
            self._lines = untag(self.text).split("\n")
        return self._lines

    def error(self, line, expected, found=None):
        return ImporterError(self.path, line, expected, found)

    def line_of(self, offset):
        """1-based line number of a character offset in `text`."""
        return self.text.count("\n", 0, max(0, offset)) + 1


def untag(text):
    """`text` without mpirun/srun per-line prefixes."""
    if "]<std" in text:
        text = _TAG.sub("", text)
    if _LABEL.search(text, 0, 200000):
        text = _LABEL.sub("", text)
    return text


# -- printed numbers -------------------------------------------------------

def half_ulp(tokens):
    """Half a unit in the last printed digit of each token (bytes or str array).

    ``"347.59"`` -> 0.005, ``"12356"`` -> 0.5, ``"1.2e+05"`` -> 5e3; tokens that
    are not numbers give 0.
    """
    t = np.strings.lower(np.asarray(tokens))
    e = b"e" if t.dtype.kind == "S" else "e"
    dot = b"." if t.dtype.kind == "S" else "."
    mant, sep, expo = np.strings.partition(t, e)
    has_e = np.strings.str_len(sep) > 0
    exp = np.zeros(t.shape, dtype=np.int64)
    if has_e.any():
        ok = has_e & (np.strings.str_len(expo) > 0)
        vals = np.zeros(t.shape, dtype=np.int64)
        for i in np.flatnonzero(ok.ravel()):  # exponent form is rare: a loop is fine
            try:
                vals.flat[i] = int(expo.flat[i])
            except ValueError:
                pass
        exp = np.where(ok, vals, 0)
    pos = np.strings.find(mant, dot)
    dec = np.where(pos >= 0, np.strings.str_len(mant) - pos - 1, 0)
    return 0.5 * np.power(10.0, (exp - dec).astype(float))


class PrintedFloat(float):
    """A float read from JSON that remembers its printed rounding."""

    half = 0.0

    def __new__(cls, text):
        self = super().__new__(cls, text)
        self.half = float(half_ulp(np.array([text]))[0])
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
        return json.loads(src.text, parse_float=PrintedFloat)
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
