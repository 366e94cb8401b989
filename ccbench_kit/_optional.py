"""Lazy imports of optional dependencies, each naming its install extra."""
import importlib
import importlib.util

from .errors import MissingDependency


def require(module, extra):
    """Import `module` or raise `MissingDependency` naming `extra`."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(module, extra) from e


def require_installed(module, extra):
    """Raise `MissingDependency` naming `extra` unless `module` can be
    found, without importing it: a launcher refuses a run before starting
    ranks, and a module such as torch takes seconds to import."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, a broken __spec__
        found = False
    if not found:
        raise MissingDependency(module, extra)
