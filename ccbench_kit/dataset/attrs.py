"""Attrs as Python values: the inverse of `schema.netcdf_safe`.

On disk the attrs stay flat and netCDF-safe (JSON strings, "true"/"false",
numbers as numpy scalars, some importers' numbers as text); `typed` gives
them back as users expect: ``ds.ccb.attrs["nranks"] == 3``,
``ds.ccb.attrs["hosts"] == ["node1"]``, ``ds.ccb.attrs["complete"] is True``.
"""
import json
import re
from collections.abc import Mapping

import numpy as np

_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
# text that must stay text even when it looks like a number
_TEXT = frozenset({"library", "kit_version", "nccl_version", "cuda_runtime", "cuda_driver",
                   "command", "source", "created", "schema", "kind", "dtype", "op", "collective"})


def typed_value(name, value):
    """One attr as a Python value (see the module docstring)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if not isinstance(value, str) or name in _TEXT:
        return value
    text = value.strip()
    if text in ("true", "false"):
        return text == "true"
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            return value
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return value


class TypedAttrs(Mapping):
    """A read-only view of a Dataset's attrs, each decoded on access."""

    def __init__(self, raw):
        self._raw = raw

    def __getitem__(self, name):
        return typed_value(name, self._raw[name])

    def __iter__(self):
        return iter(self._raw)

    def __len__(self):
        return len(self._raw)

    def __repr__(self):
        return "TypedAttrs(" + repr(dict(self)) + ")"
