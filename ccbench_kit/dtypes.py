"""Data types and reduction ops: names, aliases, and host representations.

The engine's enum values (ext/ccb.h) and NCCL's (nccl.h) live here, once.
fp16 is numpy's float16; bf16 has no numpy type, so its host arrays are
uint16 bit patterns, converted through float32 for golden results.
"""
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError


@dataclass(frozen=True)
class DType:
    name: str          # the kit's canonical name (nccom-test's)
    engine: int        # ccb_dtype in ext/ccb.h
    nccl: int          # ncclDataType_t, -1 where NCCL has none
    storage: np.dtype  # host array dtype
    is_float: bool
    aliases: tuple = ()
    nccl_tests: str = ""  # the name nccl-tests prints

    @property
    def itemsize(self):
        return self.storage.itemsize

    def to_float(self, a):
        """Values as float64 (bf16 bit patterns decoded)."""
        if self.name == "bf16":
            return (np.asarray(a, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return np.asarray(a).astype(np.float64)

    def from_float(self, x):
        """float64 values rounded into this dtype's storage (bf16: nearest even)."""
        x = np.asarray(x, dtype=np.float64)
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
        return float(np.finfo(self.storage).eps) / 2 if self.is_float else 0.0


_D = [
    DType("uint8", 0, 1, np.dtype(np.uint8), False, ("u8",), "uint8"),
    DType("int8", 1, 0, np.dtype(np.int8), False, ("i8", "char"), "int8"),
    DType("uint16", 2, -1, np.dtype(np.uint16), False, ("u16",), "uint16"),
    DType("int16", 3, -1, np.dtype(np.int16), False, ("i16", "short"), "int16"),
    DType("fp16", 4, 6, np.dtype(np.float16), True, ("half", "float16", "f16"), "half"),
    DType("bf16", 5, 9, np.dtype(np.uint16), True, ("bfloat16",), "bfloat16"),
    DType("uint32", 6, 3, np.dtype(np.uint32), False, ("u32", "uint"), "uint32"),
    DType("int32", 7, 2, np.dtype(np.int32), False, ("i32", "int"), "int32"),
    DType("fp32", 8, 7, np.dtype(np.float32), True, ("float", "float32", "f32"), "float"),
    DType("int64", 9, 4, np.dtype(np.int64), False, ("i64", "long"), "int64"),
    DType("uint64", 10, 5, np.dtype(np.uint64), False, ("u64",), "uint64"),
    DType("fp64", 11, 8, np.dtype(np.float64), True, ("double", "float64", "f64"), "double"),
]
DTYPES = {d.name: d for d in _D}
_LOOKUP = {alias: d for d in _D for alias in (d.name, *d.aliases)}

# ccb_op in ext/ccb.h.
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}
# ncclRedOp_t in nccl.h: max and min come in the other order.
NCCL_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


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
