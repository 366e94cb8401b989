"""The data contract: schema ``ccbench/1``, its accessor and its files."""
from . import accessor as _accessor  # noqa: F401  (registers ds.ccb)
from .io import SchemaError, load, open_parts, save
from .schema import DIMS, PLACEMENTS, SCHEMA, make_dataset

__all__ = ["DIMS", "PLACEMENTS", "SCHEMA", "SchemaError", "load", "make_dataset",
           "open_parts", "save"]
