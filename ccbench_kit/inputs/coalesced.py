"""``--coalesced-cc-size-ratio``: one timed operation made of several smaller
collectives, as nccom-test defines it: a size of 4 MB with ratio ``[1,2,1]``
runs collectives of 1 MB, 2 MB and 1 MB as one operation.

The parts' sizes follow the collective's size convention and round down as
any size does; the operation's size is the sum of the parts' actual sizes.
"""
import re

from ..collectives.base import Layout
from ..errors import ConfigError

FLAG = "--coalesced-cc-size-ratio"


def parse_ratio(value, flag=FLAG):
    """Positive weights from ``"[1,2,1]"``, ``"1,2,1"``, ``["1", "2", "1"]``, [1, 2, 1]."""
    if value in (None, "", [], ()):
        return []
    items = value if isinstance(value, (list, tuple)) else [value]
    tokens = []
    for it in items:
        if isinstance(it, (int, float)) and not isinstance(it, bool):
            tokens.append(it)
            continue
        tokens += [t for t in re.split(r"[\s,\[\]]+", str(it)) if t]
    weights = []
    for t in tokens:
        try:
            w = float(t)
        except (TypeError, ValueError):
            raise ConfigError(f"cannot read {t!r} as a number; write e.g. [1,2,1]", flag) from None
        if not w > 0 or w == float("inf"):
            raise ConfigError(f"ratios must be positive numbers, got {t}", flag)
        weights.append(int(w) if w == int(w) else w)
    if not weights:
        raise ConfigError("no ratios given; write e.g. [1,2,1]", flag)
    return weights


def split_layout(coll, size, itemsize, nranks, ratio, flag=FLAG):
    """The parts' `Layout`s for a requested `size` in bytes.

    Part k gets the bytes between the cumulative boundaries
    ``size * sum(ratio[:k]) / sum(ratio)``, rounded down by the collective.
    """
    total, acc, bounds = sum(ratio), 0, [0]
    for w in ratio:
        acc += w
        bounds.append(int(size * acc // total))
    parts = []
    for k in range(len(ratio)):
        nbytes = bounds[k + 1] - bounds[k]
        try:
            parts.append(coll.layout(nbytes, itemsize, nranks))
        except ConfigError:
            raise ConfigError(f"part {k} of {size} B split {ratio} is {nbytes} B, too small "
                              f"for {coll.name} on {nranks} ranks", flag) from None
    return parts


def combined(parts):
    """One `Layout` standing for all parts (sizes and element counts summed)."""
    return Layout(size=sum(p.size for p in parts), count=sum(p.count for p in parts),
                  engine_count=sum(p.engine_count for p in parts),
                  send_elems=sum(p.send_elems for p in parts),
                  recv_elems=sum(p.recv_elems for p in parts))
