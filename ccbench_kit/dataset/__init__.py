"""The data contract (docs/data-contract.md): the schema, its version
history, its accessor and its files."""
from . import accessor as _accessor  # noqa: F401  (registers ds.ccb)
from .io import load, open_parts, save
from .schema import DIMS, PLACEMENTS, make_dataset
from .versions import HISTORY, SCHEMA, SchemaError, upgrade

__all__ = ["DIMS", "HISTORY", "PLACEMENTS", "SCHEMA", "SchemaError", "load", "make_dataset",
           "open_parts", "save", "upgrade"]
