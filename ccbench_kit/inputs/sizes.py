"""Explicit message sizes: a list on the command line, or a file as IMB's
``-msglen`` reads it.

IMB (``load_msg_sizes`` in its suites) skips lines that start with ``#``
and empty lines, and reads one non-negative length per line, optionally
followed by ``k``/``K`` or ``m``/``M`` (× 1024, × 1024²).  The kit also takes
its own size spellings there (``1G``, ``64kb``), and refuses a size given
twice, since the Dataset has one row per size.  Sizes run in the order given.
"""
from ..errors import ConfigError
from ..units import parse_size


def parse_size_list(text, flag="--sizes"):
    """Sizes in bytes from ``"8,1K,1M"``."""
    words = [w.strip() for w in str(text).replace(" ", ",").split(",") if w.strip()]
    if not words:
        raise ConfigError("no sizes given", flag)
    return _unique([parse_size(w, flag) for w in words], flag)


def read_msglen(path, flag="--msglen"):
    """Sizes in bytes from an IMB lengths file."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}", flag) from None
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
