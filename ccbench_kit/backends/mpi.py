"""Backend `mpi`: host buffers, collectives run by the engine (ext/)."""
import numpy as np


def engine():
    """The engine built for the MPI that mpi4py loaded.

    Open MPI's build is ``ccbench_kit._engine``, an MPICH-family build
    ``ccbench_kit._engine_mpich`` (setup.py); both may sit in one tree, and
    mpi4py's choice of library (the environment's ``libmpi``, or
    MPI4PY_LIBMPI) decides.  The engine's ``BUILD_MPI`` then decides how the
    kit launches (`ccbench_kit.launch.mpi_impl`).
    """
    import importlib
    import sys
    if "mpi4py.MPI" not in sys.modules:
        from ..api import inside_mpi_job
        if not inside_mpi_job():
            # A launcher only reads the engine's tables; initialising MPI here
            # would make it a singleton MPI process for nothing.
            import mpi4py
            mpi4py.rc.initialize = False
            mpi4py.rc.finalize = False
    from mpi4py import MPI
    name = "_engine" if MPI.get_vendor()[0] == "Open MPI" else "_engine_mpich"
    try:
        return importlib.import_module(f"ccbench_kit.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"ccbench_kit.{name}":
            raise
        lib = MPI.Get_library_version().splitlines()[0].strip()
        how = "make setup MPI=mpich" if name.endswith("mpich") else "make setup"
        raise ImportError(f"ccbench_kit has no engine built for the MPI mpi4py loaded "
                          f"({lib}): run `{how}`, or build against it with "
                          "MPICC=/path/to/mpicc") from None


_engine = engine


def engine_algorithms(collective):
    """Algorithms the engine has for `collective` (`mpi` = the library's call)."""
    return _engine().algorithms(collective)


class MPIBackend:
    name = "mpi"
    timing = "host-clock"

    def __init__(self, comm, segment_bytes=0, unalign=0, off_cache=0):
        self.comm = comm
        self.segment_bytes = segment_bytes
        self.unalign = int(unalign)        # nccl-tests -u: buffers start this many elements late
        self.off_cache = int(off_cache)    # IMB -off_cache: bytes of rotating buffers (0: off)
        self.engine = _engine()

    @property
    def library(self):
        from mpi4py import MPI
        return MPI.Get_library_version().replace("\x00", "").splitlines()[0].strip()

    @property
    def device_name(self):
        return "cpu"

    def algorithms(self, collective):
        return self.engine.algorithms(collective)

    def alloc(self, nelems, dtype):
        # numpy aligns an allocation to 64 bytes; -u N starts the buffer N
        # elements into one (nccl-tests adds unalign * wordSize to each pointer)
        u = self.unalign
        return np.zeros(max(nelems + u, 1), dtype=dtype.storage)[u:u + nelems]

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
             warmup, iters, agg=1, blocking=False, progress=None, hang_at=-1, once=False,
             **vectors):
        """Per-iteration latency and local start (µs) of one algorithm.

        `once`: the checked call (here one iteration is always one call).

        `progress` (2 int64, shared with the launcher's watchdog) counts the
        calls entered and left; `hang_at` is test-only fault injection."""
        return self.engine.time_loop(
            self.comm, collective, algorithm, buffers, dtype=dtype.engine, op=op,
            count=count, root=max(root, 0), warmup=warmup, iters=iters, agg=agg,
            blocking=blocking, segment_bytes=self.segment_bytes, progress=progress,
            hang_at=hang_at, **vectors)

    def close(self):
        pass
