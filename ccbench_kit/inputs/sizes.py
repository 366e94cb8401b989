"""Explicit message sizes: a list on the command line, or a file as IMB's
``-msglen`` reads it.

IMB (``load_msg_sizes`` in its suites) skips lines that start with ``#``
and empty lines, and reads one non-negative length per line, optionally
followed by ``k``/``K`` or ``m``/``M`` (× 1024, × 1024²).  The kit also takes
its own size spellings there (``1G``, ``64kb``), and refuses a size given
twice, since the Dataset has one row per size.  Sizes run in the order given.
"""
import re

from ..bounded import read_text
from ..errors import ConfigError
from ..units import parse_size

#: sizes of one list or lengths file (one Dataset row each; IMB's own
#: default list has 23)
MAX_SIZES = 10_000
#: bytes of a lengths file
MAX_MSGLEN_BYTES = 1 << 20


def parse_size_list(text, flag="--sizes"):
    """Sizes in bytes from ``"8,1K,1M"``."""
    text = str(text).strip()
    if not text:
        raise ConfigError("no sizes given", flag)
    # commas, blanks, or both, between sizes; an empty item (`8,,16`, a
    # trailing comma) is a typo, not a size to skip
    words = re.split(r"\s*,\s*|\s+", text)
    if "" in words:
        raise ConfigError(f"{text!r} has an empty item (two commas in a row, or one at an "
                          "end); give sizes such as 8,1K,1M", flag)
    if len(words) > MAX_SIZES:
        raise ConfigError(f"{len(words)} sizes; at most {MAX_SIZES}", flag)
    return _unique([parse_size(w, flag) for w in words], flag)


def read_msglen(path, flag="--msglen"):
    """Sizes in bytes from an IMB lengths file."""
    try:   # a regular file only (a FIFO would block for ever), bounded, UTF-8
        lines = read_text(path, "a lengths file", MAX_MSGLEN_BYTES).splitlines()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}", flag) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (not UTF-8); expected one message "
                          "length per line", flag) from None
    except ConfigError as e:
        raise ConfigError(str(e), flag) from None
    sizes = []
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if not s or line.startswith("#"):
            continue
        word = s.replace(" ", "").replace("\t", "")
        try:
            sizes.append(parse_size(word, flag))
        except ConfigError:
            raise ConfigError(f"{path}:{n}: expected a message length such as 1024, 64K or "
                              f"4M; found {s!r}", flag) from None
    if len(sizes) > MAX_SIZES:
        raise ConfigError(f"{path}: {len(sizes)} message lengths; at most {MAX_SIZES}", flag)
    if not sizes:
        raise ConfigError(f"{path}: no message lengths (one per line; # starts a comment)", flag)
    return _unique(sizes, flag)


def _unique(sizes, flag):
    seen = set()
    for s in sizes:
        if s in seen:
            raise ConfigError(f"size {s} B is given twice", flag)
        seen.add(s)
    return sizes
