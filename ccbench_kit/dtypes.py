"""Data types and reduction ops: names, aliases, and host representations.

The engine's enum values (ext/ccb.h) live here, once; NCCL's (nccl.h) are
the nccl backend's (`backends.nccl.NCCL_DTYPES`, ``NCCL_OPS``).
fp16 is numpy's float16; bf16 and the fp8 types (OCP e4m3 without
infinities and e5m2, as NCCL's ncclFloat8e4m3/e5m2) have no numpy type, so
their host arrays are bit patterns, converted through float64 for golden
results and rounded back to nearest even (fp8: saturating at the largest
finite value, as CUDA's satfinite conversions that NCCL reduces with).
"""
import functools
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError


@dataclass(frozen=True)
class DType:
    name: str          # the kit's canonical name (nccom-test's)
    engine: int        # ccb_dtype in ext/ccb.h
    storage: np.dtype  # host array dtype
    is_float: bool
    aliases: tuple = ()
    nccl_tests: str = ""  # the name nccl-tests prints

    @property
    def itemsize(self):
        return self.storage.itemsize

    def to_float(self, a):
        """Values as float64 (bf16 and fp8 bit patterns decoded)."""
        if self.name in FP8:
            return fp8_values(self.name)[np.asarray(a, dtype=np.uint8)]
        if self.name == "bf16":
            return (np.asarray(a, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return np.asarray(a).astype(np.float64)

    def from_float(self, x):
        """float64 values rounded into this dtype's storage (bf16: nearest even)."""
        x = np.asarray(x, dtype=np.float64)
        if self.name in FP8:
            return fp8_encode(self.name, x)
        if self.name == "bf16":
            bits = x.astype(np.float32).view(np.uint32)
            bits = bits + 0x7FFF + ((bits >> 16) & 1)
            return (bits >> 16).astype(np.uint16)
        if not self.is_float:
            info = np.iinfo(self.storage)
            return np.clip(np.rint(x), info.min, info.max).astype(self.storage)
        return x.astype(self.storage)

    @property
    def eps(self):
        """Unit roundoff, 0 for integers."""
        if self.name == "bf16":
            return 2.0 ** -8
        if self.name in FP8:
            return 2.0 ** -(FP8[self.name][1] + 1)
        return float(np.finfo(self.storage).eps) / 2 if self.is_float else 0.0


_D = [
    DType("uint8", 0, np.dtype(np.uint8), False, ("u8",), "uint8"),
    DType("int8", 1, np.dtype(np.int8), False, ("i8", "char"), "int8"),
    DType("uint16", 2, np.dtype(np.uint16), False, ("u16",), "uint16"),
    DType("int16", 3, np.dtype(np.int16), False, ("i16", "short"), "int16"),
    DType("fp16", 4, np.dtype(np.float16), True, ("half", "float16", "f16"), "half"),
    DType("bf16", 5, np.dtype(np.uint16), True, ("bfloat16",), "bfloat16"),
    DType("uint32", 6, np.dtype(np.uint32), False, ("u32", "uint"), "uint32"),
    DType("int32", 7, np.dtype(np.int32), False, ("i32", "int"), "int32"),
    DType("fp32", 8, np.dtype(np.float32), True, ("float", "float32", "f32"), "float"),
    DType("int64", 9, np.dtype(np.int64), False, ("i64", "long"), "int64"),
    DType("uint64", 10, np.dtype(np.uint64), False, ("u64",), "uint64"),
    DType("fp64", 11, np.dtype(np.float64), True, ("double", "float64", "f64"), "double"),
    DType("fp8_e4m3", 12, np.dtype(np.uint8), True, ("f8e4m3", "float8_e4m3", "e4m3"), "f8e4m3"),
    DType("fp8_e5m2", 13, np.dtype(np.uint8), True, ("f8e5m2", "float8_e5m2", "e5m2"), "f8e5m2"),
]
# exponent bits, mantissa bits, whether the all-ones exponent is inf/NaN (e5m2,
# IEEE-like) or ordinary numbers with only S.1111.111 a NaN (e4m3, "fn")
FP8 = {"fp8_e4m3": (4, 3, False), "fp8_e5m2": (5, 2, True)}


@functools.lru_cache(maxsize=None)
def fp8_values(name):
    """The 256 values of an fp8 type, indexed by bit pattern (float64)."""
    e_bits, m_bits, ieee = FP8[name]
    bias = (1 << (e_bits - 1)) - 1
    code = np.arange(256)
    sign = np.where(code & 0x80, -1.0, 1.0)
    exp, man = (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    frac = man / float(1 << m_bits)
    val = np.where(exp == 0, frac * 2.0 ** (1 - bias), (1 + frac) * 2.0 ** (exp - bias))
    top = exp == (1 << e_bits) - 1
    if ieee:
        val = np.where(top, np.where(man == 0, np.inf, np.nan), val)
    else:
        val = np.where(top & (man == (1 << m_bits) - 1), np.nan, val)
    val = sign * val
    val.setflags(write=False)
    return val


@functools.lru_cache(maxsize=None)
def _fp8_grid(name):
    """(finite non-negative values ascending, their codes)."""
    v = fp8_values(name)[:128]
    keep = np.isfinite(v)
    return v[keep], np.arange(128)[keep]


def fp8_encode(name, x):
    """float64 -> fp8 bit patterns: nearest, ties to the even code, finite
    overflow (and inf) saturating at the largest finite value, NaN kept."""
    grid, codes = _fp8_grid(name)
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(np.nan_to_num(x, nan=0.0, posinf=np.inf, neginf=-np.inf)), grid[-1])
    hi = np.clip(np.searchsorted(grid, a), 1, len(grid) - 1)
    lo = hi - 1
    dl, dh = a - grid[lo], grid[hi] - a
    pick = np.where((dh < dl) | ((dh == dl) & (codes[hi] % 2 == 0)), hi, lo)
    out = codes[pick] | np.where(np.signbit(x), 0x80, 0)
    nan_code = 0x7F if not FP8[name][2] else 0x7E
    out = np.where(np.isnan(x), nan_code, out)
    return out.astype(np.uint8)
DTYPES = {d.name: d for d in _D}
_LOOKUP = {alias: d for d in _D for alias in (d.name, *d.aliases)}

# ccb_op in ext/ccb.h.
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}


def get_dtype(name, flag="-d/--datatype"):
    """The `DType` for a kit or nccl-tests name (``fp32``, ``float``...)."""
    if isinstance(name, DType):
        return name
    d = _LOOKUP.get(str(name).lower())
    if d is None:
        raise ConfigError(f"unknown data type {name!r}; choose one of "
                          + ", ".join(DTYPES), flag)
    return d


def get_op(name, flag="-o/--op"):
    """Canonical op name for `name` (sum, prod, min, max, avg)."""
    op = str(name).lower()
    if op not in OPS:
        raise ConfigError(f"unknown reduction op {name!r}; choose one of "
                          + ", ".join(OPS), flag)
    return op
