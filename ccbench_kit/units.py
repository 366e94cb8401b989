"""Byte sizes as nccl-tests and nccom-test write them, and size sweeps.

Both tools take 8, 1K, 64M, 1G (nccl-tests) and 1kb, 1MB, 2GB (nccom-test);
every unit is a power of 1024, as in both tools.
"""
import math
import re

from .errors import ConfigError

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text, flag=None):
    """Bytes in `text` (``"8"``, ``"1K"``, ``"64M"``, ``"1kb"``, ``"1MB"``...).

    Raises
    ------
    ConfigError
        Naming `flag`, when the text is not a size.
    """
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(str(text))
        if not m:
            raise ConfigError(
                f"cannot read size {text!r}: expected a number with an optional unit "
                "K, M, G or T (powers of 1024), e.g. 8, 1K, 64M, 1G, 1kb, 1MB", flag)
        value = float(m.group(1)) * _UNITS[m.group(2).lower()]
        if value != int(value):
            raise ConfigError(f"size {text!r} is not a whole number of bytes", flag)
        value = int(value)
    if value < 0:
        raise ConfigError(f"size {text!r} is negative", flag)
    return value


def format_size(nbytes):
    """Short human form: 8 B, 4 KiB, 64 MiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def approx_size(nbytes):
    """Rounded human form for estimates: 1.1 MiB, 56.0 KiB, 3.2 GiB."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} B"


def sweep(minbytes, maxbytes, stepfactor=None, stepbytes=None):
    """Sizes from `minbytes` to `maxbytes`, by factor or by increment.

    As nccl-tests: a factor (``-f``) wins over an increment (``-i``); with
    neither, the step is ``(max - min) / 10`` as nccom-test's default.
    """
    minbytes = parse_size(minbytes, "-b/--minbytes")
    maxbytes = parse_size(maxbytes, "-e/--maxbytes")
    if minbytes > maxbytes:
        raise ConfigError(f"minimum size {format_size(minbytes)} is larger than "
                          f"-e/--maxbytes {format_size(maxbytes)}", "-b/--minbytes")
    if stepfactor is not None:
        try:
            factor = float(stepfactor)
        except ValueError:
            factor = parse_size(stepfactor, "-f/--stepfactor")
        if not factor > 1:  # NaN too
            raise ConfigError(f"step factor must be > 1, got {stepfactor}", "-f/--stepfactor")
        if minbytes == 0:
            raise ConfigError("a step factor needs a minimum size above 0", "-b/--minbytes")
        _check_count(int(math.log(maxbytes / minbytes) / math.log(factor)) + 1, "-f/--stepfactor")
        sizes, s = [], minbytes
        while s <= maxbytes:
            if not sizes or int(s) != sizes[-1]:
                sizes.append(int(s))
            s = s * factor
        return sizes
    step = parse_size(stepbytes, "-i/--stepbytes") if stepbytes is not None \
        else max((maxbytes - minbytes) // 10, 1)
    if step <= 0:
        raise ConfigError("step must be at least 1 byte", "-i/--stepbytes")
    _check_count((maxbytes - minbytes) // step + 1, "-i/--stepbytes")
    return list(range(minbytes, maxbytes + 1, step))


MAX_SIZES = 4096


def _check_count(n, flag):
    if n > MAX_SIZES:
        raise ConfigError(f"the sweep would run more than {MAX_SIZES} sizes; use a larger step",
                          flag)
