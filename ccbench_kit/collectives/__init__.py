"""The collectives: one module each, found by name or alias.

Every module defines ``COLLECTIVE``, an instance of `base.Collective`.
"""
import importlib

from ..errors import ConfigError
from .registry import NAMES  # module names, in the order of collectives.def


def _load(name):
    return importlib.import_module(f"{__name__}.{name}").COLLECTIVE


def all_collectives():
    return [_load(n) for n in NAMES]


def get(name, flag="COLLECTIVE"):
    """The collective named `name` (``all_reduce``, ``allr``, ``allreduce``...)."""
    key = str(name).lower().replace("-", "_")
    for coll in all_collectives():
        if key == coll.name or key in (a.replace("-", "_") for a in coll.aliases):
            return coll
    raise ConfigError(f"unknown collective {name!r}; choose one of "
                      + ", ".join(NAMES), flag)
