"""Lazy imports of optional dependencies, each naming its install extra."""
import importlib
import importlib.util
import sys

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
    if not installed(module):
        raise MissingDependency(module, extra)


def installed(module):
    """Whether `module` can be imported here, without importing it (False
    for one made unimportable by `without`)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, a broken __spec__
        return False


# Optional modules that a dependency imports wherever they are installed,
# at a cost, in a process that never uses them:
# - dask (the cluster extra): xarray probes for dask arrays; decoding the
#   first file it opens imports dask.array (scipy.sparse with it), writing
#   netCDF imports distributed: about a second of CPU in a process that
#   never chunks.  xarray treats an unimportable dask as absent, and keeps
#   what it found: never in a process that may yet hold a dask array.
DASK = ("dask", "distributed")
# - jsonschema's check of the IRI format (rfc3987_syntax, which
#   jsonschema[format-nongpl] brings with jupyter-events): it builds an
#   Earley parser when imported, 2.4 s of CPU in every process that imports
#   nbformat, for a format no notebook schema asks for.  jsonschema leaves
#   that format unchecked when it is absent.
IRI_CHECKER = ("rfc3987_syntax",)


def without(modules):
    """Make `modules` (`DASK`, `IRI_CHECKER`) unimportable in this process
    (`sys.modules`: None): a rank, the ``ccbench`` command."""
    for name in modules:
        sys.modules.setdefault(name, None)


def again(modules):
    """Undo `without`: for dask, distributed's client (submitting tasks to
    a cluster and reading what they return); an xarray imported meanwhile
    still treats dask as absent, so the process must hold no dask array."""
    for name in modules:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]
