"""Backends: where buffers live and how a collective is run and timed.

`mpi` runs on host buffers through the engine (ext/); `nccl` on GPUs; `torch`
through torch.distributed (NCCL on GPUs, gloo on CPUs); `tcp` sendrecv and
all_reduce over plain sockets (the management network).  The
interface every backend implements is `base.Backend`.  Backends are found
by name in a registry: the built-in ones, those `register`\\ ed in this
process, and those other packages declare in the ``ccbench_kit.backends``
entry point group (``name = "package.module:Class"``), as xarray finds its
engines.  Nothing here knows one backend from another.
"""
import importlib

from ..errors import ConfigError

from .base import Backend, NoOptions  # noqa: F401  (the interface, for backend authors)

ENTRY_POINT_GROUP = "ccbench_kit.backends"
# name -> class, or "module:Class" imported on first use (the nccl backend
# must import without CUDA, the mpi one without starting MPI)
_REGISTRY = {
    "mpi": "ccbench_kit.backends.mpi:MPIBackend",
    "nccl": "ccbench_kit.backends.nccl:NCCLBackend",
    "torch": "ccbench_kit.backends.torch_dist:TorchBackend",   # torch imported by a rank only
    "tcp": "ccbench_kit.backends.tcp:TCPBackend",
}


def register(name, backend):
    """Make `backend` (a `Backend` subclass, or ``"module:Class"``) available
    as ``--backend name`` / ``backend="name"`` in this process.

    Ranks started by ``ccbench run`` are new processes: a backend they must
    find is declared in the entry point group instead (or registered by the
    script that each rank of the user's own ``mpirun`` runs)."""
    _REGISTRY[name] = backend


def _entry_points():
    # importlib.metadata costs 60 ms of CPU to import (zipfile, email, ...),
    # paid by every rank and command that imports the registry
    # lazy: a built-in backend found by name never needs it (above)
    from importlib.metadata import entry_points
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def names():
    """Every backend name known here: built-in, registered, then declared."""
    return list(dict.fromkeys([*_REGISTRY, *_entry_points()]))


def backend_class(name):
    """The `Backend` subclass registered as `name`."""
    found = _REGISTRY.get(name) or _entry_points().get(name)
    if found is None:
        raise ConfigError(f"unknown backend {name!r}; choose one of {', '.join(names())}",
                          "--backend")
    if isinstance(found, str):
        module, _, attr = found.partition(":")
        found = getattr(importlib.import_module(module), attr)
        if name in _REGISTRY:
            _REGISTRY[name] = found
    if not (isinstance(found, type) and issubclass(found, Backend)):
        raise ConfigError(f"backend {name!r} is {found!r}, not a subclass of "
                          "ccbench_kit.backends.base.Backend", "--backend")
    return found


def aggregated_timings():
    """Every known backend's `Backend.aggregated_timings`: the ``timing``
    attrs whose iteration slots hold one average, not one measurement each."""
    return tuple(dict.fromkeys(t for n in names() for t in backend_class(n).aggregated_timings))


def default_preset(ds):
    """The theory preset for ``--theory auto``: what the backend that
    measured `ds` says (`Backend.default_preset`); None for a file of no
    known backend (an import of another tool's log)."""
    try:
        cls = backend_class(str(ds.attrs.get("backend", "")))
    except ConfigError:
        return None
    return cls.default_preset(ds)


def phases_of(ds):
    """{algorithm: (whole algorithm, phase)} of `ds`'s algorithms that time
    one phase of another alone (`Backend.phase_algorithms`); {} for a file
    of no known backend or collective."""
    try:
        cls = backend_class(str(ds.attrs.get("backend", "")))
        known = cls.phase_algorithms(str(ds.attrs.get("collective", "")))
    except (ConfigError, KeyError):
        return {}
    here = {str(a) for a in ds["algorithm"].values} if "algorithm" in ds.coords else set()
    return {a: whole for a, whole in known.items() if a in here}


def backend_algorithms(name, collective):
    """The algorithms `name` offers for `collective`, without starting MPI."""
    return backend_class(name).algorithms_for(collective)


def get_backend(name, comm, options=None, world=None, placement=None):
    """An instance of backend `name` on `comm` (see `Backend.__init__`)."""
    if placement is None:  # a backend written before `placement` takes three arguments
        return backend_class(name)(comm, options, world)
    return backend_class(name)(comm, options, world, placement=placement)
