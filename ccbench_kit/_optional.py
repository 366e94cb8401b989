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
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, a broken __spec__
        found = False
    if not found:
        raise MissingDependency(module, extra)


def without_dask():
    """Make dask unimportable in this process (`sys.modules`: None).

    For a process that will never hold a dask array: a rank, or the
    ``ccbench`` command when its subcommand uses no cluster.  xarray probes
    for dask wherever it is installed (the cluster extra): decoding the
    first file it opens imports dask.array (scipy.sparse with it), writing
    netCDF imports distributed -- about a second of CPU in a process that
    never chunks.  xarray treats an unimportable dask as absent.  Never in
    a process that may yet hold a dask array: xarray keeps what it found."""
    for name in _DASK:
        sys.modules.setdefault(name, None)


def dask_again():
    """Undo `without_dask`, for distributed's client: submitting tasks to a
    cluster and reading what they return.  An xarray imported meanwhile
    still treats dask as absent, so this process must hold no dask array."""
    for name in _DASK:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]


_DASK = ("dask", "distributed")
