"""Lazy imports of optional dependencies, each naming its install extra."""
import importlib

from .errors import MissingDependency


def require(module, extra):
    """Import `module` or raise `MissingDependency` naming `extra`."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(module, extra) from e
