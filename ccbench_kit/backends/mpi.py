"""Backend `mpi`: host buffers, collectives run by the engine (ext/)."""
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .base import Backend


def _engine():
    import sys
    if "mpi4py.MPI" not in sys.modules:
        from ..mpi_env import inside_mpi_job
        if not inside_mpi_job():
            # A launcher only reads the engine's tables; initialising MPI here
            # would make it a singleton MPI process for nothing.
            import mpi4py
            mpi4py.rc.initialize = False
            mpi4py.rc.finalize = False
    from .. import _engine
    return _engine


def engine_algorithms(collective):
    """Algorithms the engine has for `collective` (`mpi` = the library's call)."""
    return _engine().algorithms(collective)


@dataclass(frozen=True)
class MPIOptions:
    #: Pipelining segment of the chain and segmented algorithms (0: the
    #: engine's default); the engine's tests set it small.
    segment_bytes: int = 0


class MPIBackend(Backend):
    name = "mpi"
    default_algorithm = "mpi"
    Options = MPIOptions
    timing = "host-clock"

    @classmethod
    def algorithms_for(cls, collective):
        return engine_algorithms(collective)

    @classmethod
    def make_options(cls, timing="", **values):
        if timing not in ("", "host-clock"):
            raise ConfigError(f"timing {timing!r} needs --backend nccl; the mpi backend "
                              "times with the host clock", "--timing")
        return super().make_options(**values)

    def __init__(self, comm, options=None, world=None):
        super().__init__(comm, options, world)
        self.engine = _engine()

    @property
    def library(self):
        from mpi4py import MPI
        return MPI.Get_library_version().replace("\x00", "").splitlines()[0].strip()

    @property
    def device_name(self):
        return "cpu"

    def alloc(self, nelems, dtype):
        return np.zeros(max(nelems, 1), dtype=dtype.storage)[:nelems]

    def scratch_bytes(self, collective, algorithm, count, dtype, nranks):
        return self.engine.scratch_bytes(collective, algorithm, count, dtype.itemsize, nranks)

    def scratch(self, collective, algorithm, count, dtype, nranks):
        n = self.scratch_bytes(collective, algorithm, count, dtype, nranks)
        return np.empty(n, dtype=np.uint8) if n else None

    def upload(self, buf, host):
        buf[...] = host

    def download(self, buf):
        return np.array(buf, copy=True)

    def time(self, collective, algorithm, buffers, *, count, dtype, op, root,
             warmup, iters, agg=1, blocking=False, progress=None, once=False, **vectors):
        """Per-iteration latency and local start (µs) of one algorithm.

        `once`: the checked call (here one iteration is always one call).

        `progress` (2 int64, shared with the launcher's watchdog) counts the
        calls entered and left."""
        return self.engine.time_loop(
            self.comm, collective, algorithm, buffers, dtype=dtype.engine, op=op,
            count=count, root=max(root, 0), warmup=warmup, iters=iters, agg=agg,
            blocking=blocking, segment_bytes=self.options.segment_bytes, progress=progress,
            **vectors)
