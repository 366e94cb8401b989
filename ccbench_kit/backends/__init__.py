"""Backends: where buffers live and how a collective is run and timed.

`mpi` runs on host buffers through the engine (ext/); `nccl` on GPUs.
Each backend offers: ``algorithms(coll)``, ``alloc(n, dtype)``,
``upload(buf, host)``, ``download(buf)``, ``time(...)``, ``library``,
``timing``, ``device_name`` and ``close()``.
"""
from ..errors import ConfigError

NAMES = ("mpi", "nccl")


def get_backend(name, comm, **options):
    if name == "mpi":
        from .mpi import MPIBackend
        return MPIBackend(comm, **options)
    if name == "nccl":
        from .nccl import NCCLBackend
        return NCCLBackend(comm, **options)
    raise ConfigError(f"unknown backend {name!r}; choose one of {', '.join(NAMES)}", "--backend")


def backend_algorithms(name, collective):
    """The algorithms `name` offers for `collective`, without starting MPI."""
    if name == "mpi":
        from .mpi import engine_algorithms
        return engine_algorithms(collective)
    if name == "nccl":
        from .nccl import nccl_algorithms
        return nccl_algorithms(collective)
    raise ConfigError(f"unknown backend {name!r}; choose one of {', '.join(NAMES)}", "--backend")


def backend_options(cfg, world=None):
    """Keyword arguments for `get_backend` from a RunConfig's timing/options;
    `world` is the job's communicator when the backend runs on a group's."""
    if cfg.backend == "nccl":
        from .nccl import OPTION_NAMES
        opts = {"timing": cfg.timing or "cuda-events",
                **{k: v for k, v in cfg.options.items() if k in OPTION_NAMES}}
        if world is not None:
            opts["device_comm"] = world  # GPUs are picked among all ranks on a host
        return opts
    return {"segment_bytes": cfg.segment_bytes, "unalign": cfg.options.get("unalign", 0),
            "off_cache": cfg.options.get("off_cache", 0)}


def check_backend_options(cfg):
    """ConfigError, before any rank starts, for options the backend can't take."""
    if cfg.backend == "nccl":
        for key, flag in (("unalign", "-u/--unalign"), ("off_cache", "--off-cache")):
            if cfg.options.get(key):
                raise ConfigError("is for the mpi backend (host buffers)", flag)
        from .nccl import check_options
        check_options(**backend_options(cfg))
    elif cfg.timing not in ("", "host-clock"):
        raise ConfigError(f"timing {cfg.timing!r} needs --backend nccl; the mpi backend "
                          "times with the host clock", "--timing")
