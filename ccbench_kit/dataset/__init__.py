"""The data contract (docs/data-contract.md): the schema, its version
history, its accessor and its files.

The names below load their module on first use (PEP 562): a rank imports
`schema` for its names without paying for xarray, which only the code that
makes or reads a Dataset needs; those modules register ``ds.ccb``.
"""
from .versions import HISTORY, SCHEMA, SchemaError, upgrade
from .schema import DIMS, PLACEMENTS, make_dataset

__all__ = ["DIMS", "HISTORY", "PLACEMENTS", "SCHEMA", "SchemaError", "load", "make_dataset",
           "open_parts", "save", "save_or_rescue", "upgrade"]


def __getattr__(name):
    if name in ("load", "open_parts", "save", "save_or_rescue"):
        from . import io  # lazy: xarray and the netCDF engines, on first use (docstring)
        return getattr(io, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
