"""IMB's ``-off_cache``: time every iteration on buffers the last-level cache
no longer holds.

IMB (IMB_mem_manager.c) advances the message's address within buffers of
about 2 × max(cache size, message size), one message plus a cache line
further each repetition, so that a repetition finds nothing of the previous
ones in the cache; ``-off_cache -1`` takes the cache size from its headers.
The kit does the same with buffer sets (as ``--unique-buff`` does): the
timed loop cycles through ceil(2 × cache / bytes of one set) separately
allocated sets (at least 2, at most one per operation), each set being one
iteration's send, receive and scratch buffers.  ``--off-cache`` without a
size reads the last-level cache of this machine from sysfs.
"""
import glob
import math
import os

from ..errors import ConfigError

FLAG = "--off-cache"


def last_level_cache_bytes():
    """The largest CPU cache of this machine (sysfs), or None."""
    best = None
    for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(os.path.join(d, "size")) as f:
                text = f.read().strip()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if text[-1:].isalpha() else text
        if digits.isdigit():
            size = int(digits) * mult
            best = size if best is None or size > best else best
    return best


MAX_CACHE_MB = 1 << 20     # 1 TiB: larger than any cache, yet a size buffers can have


def off_cache_bytes(spec):
    """Cache bytes from ``auto``/``-1`` (this machine's last-level cache) or
    IMB's ``cache_size[,cache_line_size]`` in MB (the line size is accepted
    and not needed: sets are separate allocations)."""
    s = str(spec).strip().lower()
    if s in ("auto", "-1", "true", "1.0e0"):
        size = last_level_cache_bytes()
        if not size:
            raise ConfigError("this machine's last-level cache size is unknown (no "
                              "/sys/devices/system/cpu/cpu0/cache); give it in MB", FLAG)
        return size
    mb = s.split(",")[0]
    try:
        value = float(mb)
    except ValueError:
        raise ConfigError(f"expected the last-level cache size in MB (IMB's "
                          f"cache_size[,cache_line_size]) or auto; found {spec!r}", FLAG) from None
    if not value > 0 or not math.isfinite(value) or value > MAX_CACHE_MB:
        raise ConfigError(f"the cache size must be > 0 MB and at most {MAX_CACHE_MB} MB (a "
                          f"last-level cache), got {mb}", FLAG)
    return int(value * (1 << 20))


def buffer_sets(cache_bytes, set_bytes, operations):
    """Sets to cycle through so that 2 × the cache lies between two uses of one."""
    need = -(-2 * cache_bytes // max(set_bytes, 1))
    return int(min(operations, max(2, need)))
