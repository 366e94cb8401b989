"""Backend `mpi`: host buffers, collectives run by the engine (ext/)."""
import os
from dataclasses import dataclass
import importlib
import sys

import numpy as np

from ..errors import ConfigError
from ..units import approx_size
from .blocking import BLOCKING_MODES, BLOCKING_ON_RETURN
from . import hostpages
from .base import Backend
from ..mpi_env import inside_mpi_job, start_mpi
from .offcache import buffer_sets, off_cache_bytes
from .ompi_tuned import forced_algorithm


def engine():
    """The engine built for the MPI that mpi4py loaded.

    Open MPI's build is ``ccbench_kit._engine``, an MPICH-family build
    ``ccbench_kit._engine_mpich`` (setup.py); both may sit in one tree, and
    mpi4py's choice of library (the environment's ``libmpi``, or
    MPI4PY_LIBMPI) decides.  The engine's ``BUILD_MPI`` then decides how the
    kit launches (`ccbench_kit.launch.mpi_impl`).
    """
    if "mpi4py.MPI" not in sys.modules and not inside_mpi_job():
        # A launcher only reads the engine's tables; initialising MPI here
        # would make it a singleton MPI process for nothing.
        import mpi4py  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
    MPI = start_mpi()
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


@dataclass(frozen=True)
class MPIOptions:
    #: Pipelining segment of the chain and segmented algorithms (0: the
    #: engine's default); the engine's tests set it small.
    segment_bytes: int = 0
    #: nccl-tests -u: send and receive buffers start this many elements late.
    unalign: int = 0
    #: IMB -off_cache: bytes of last-level cache that the buffer sets the
    #: timed loop cycles through span twice (0: off; `ccbench_kit.backends.offcache`).
    off_cache: int = 0
    #: The buffers' memory: "off", libc malloc (the peers': IMB, OSU,
    #: nccl-tests' host side) or "madvise", numpy's np.empty with its
    #: madvise(MADV_HUGEPAGE) from 4 MiB; `hostpages`.
    huge_pages: str = "off"


def thread_level():
    """The thread support MPI gave this process, as MPI names it
    (``MPI_THREAD_SINGLE``...): any level above SINGLE costs time per call
    in Open MPI (`mpi_env.RANK_THREAD_LEVEL`)."""
    MPI = start_mpi()
    names = {getattr(MPI, f"THREAD_{n}"): f"MPI_THREAD_{n}"
             for n in ("SINGLE", "FUNNELED", "SERIALIZED", "MULTIPLE")}
    return names.get(MPI.Query_thread(), str(MPI.Query_thread()))


def library_algorithm(library):
    """What can be known of the algorithm the library's own call (`mpi`)
    ran: Open MPI's coll/tuned picks one per call by its fixed rules and a
    release build reports none, unless the environment forces one."""
    if not library.startswith("Open MPI"):
        return "the library's own choice per call; it does not report which"
    forced = {k[len("OMPI_MCA_coll_tuned_"):]: v for k, v in sorted(os.environ.items())
              if k.startswith("OMPI_MCA_coll_tuned_") and k.endswith("_algorithm")}
    if os.environ.get("OMPI_MCA_coll_tuned_use_dynamic_rules") in ("1", "true") and forced:
        return "Open MPI coll/tuned forced by the environment: " + ", ".join(
            f"{k}={v}" for k, v in forced.items())
    return ("Open MPI's coll framework picks per call (coll/tuned's fixed rules by size and "
            "ranks); a release build does not report its choice")



#: the largest pair message the doctor sends eagerly through Open MPI's TCP
#: transport (`MPIBackend.doctor_env`): 2 GiB works, 3 GiB hangs
EAGER_MAX = 2 << 30

class MPIBackend(Backend):
    name = "mpi"
    default_algorithm = "mpi"
    host_buffers = True
    ring_algorithm = "ring"
    Options = MPIOptions
    timing = "host-clock"

    @classmethod
    def default_preset(cls, ds):
        """Host buffers are bounded by memcpy: the ``cpu`` preset."""
        return "cpu"

    @classmethod
    def algorithms_for(cls, collective):
        return engine_algorithms(collective)

    @classmethod
    def add_arguments(cls, g):
        g.add_argument("-u", "--unalign", type=int, default=0, metavar="N",
                       help="mpi: start send and receive buffers N elements past an aligned "
                            "address, as nccl-tests -u")
        g.add_argument("--off-cache", nargs="?", const="auto", default=None, metavar="MB[,LINE]",
                       help="mpi: as IMB -off_cache, cycle through buffers spanning twice the "
                            "last-level cache (this machine's, or MB) so no iteration finds "
                            "its data cached")
        g.add_argument("--huge-pages", choices=hostpages.CHOICES, default=None,
                       help="mpi: the buffers' memory: off (default; libc malloc, as IMB, OSU "
                            "and nccl-tests) or madvise (numpy's, transparent huge pages from "
                            "4 MiB); the attrs huge_pages, buffer_alloc, buffer_pages record it")

    @classmethod
    def options_from_args(cls, args):
        opts = {}
        if args.unalign:
            opts["unalign"] = args.unalign
        if args.off_cache is not None:
            opts["off_cache"] = args.off_cache
        if args.huge_pages is not None:
            opts["huge_pages"] = args.huge_pages
        return opts

    @classmethod
    def make_options(cls, timing="", **values):
        if timing not in ("", "host-clock"):
            raise ConfigError(f"timing {timing!r} needs --backend nccl; the mpi backend "
                              "times with the host clock", "--timing")
        u = values.get("unalign", 0)
        if not isinstance(u, int) or isinstance(u, bool) or u < 0:
            raise ConfigError(f"must be a whole number of elements >= 0, got {u!r}",
                              "-u/--unalign")
        if values.get("huge_pages", "off") not in hostpages.CHOICES:
            raise ConfigError(f"must be one of {', '.join(hostpages.CHOICES)}, got "
                              f"{values['huge_pages']!r}", "--huge-pages")
        if values.get("off_cache") not in (None, 0):
            values["off_cache"] = off_cache_bytes(values["off_cache"])
        return super().make_options(**values)

    def __init__(self, comm, options=None, world=None, placement=None):
        super().__init__(comm, options, world, placement)
        self.engine = _engine()
        self.begin_part()
        # process-wide, for as long as the backend lives (close() restores it):
        # the rank's every array, not only its buffers, must leave the heap's
        # pages unadvised, as a malloc-only peer's process does
        self._madvise_before = hostpages.set_numpy_madvise(self.options.huge_pages == "madvise")

    @classmethod
    def doctor_env(cls, pair_bytes):
        """Open MPI settings that send a pair's `pair_bytes` eagerly over TCP.

        Above its eager limit (64 KiB) Open MPI's TCP transport sends by
        rendezvous, and in a sendrecv the two ends' go-aheads queue behind
        their own data: the directions then take turns and a healthy pair
        runs at half its link's rate, in some repeats and not others
        (docs/theory.md).  Sent eagerly, the sendrecv measures the link.
        Settings the user made win.

        Past `EAGER_MAX` the TCP transport cannot send one message whole:
        with the limit at 3 GiB the job's first message (its Comm_dup)
        never arrives and every rank spins there (2 GiB works); such a
        size is refused, naming --bw-size, before anything is launched."""
        keys = ("OMPI_MCA_btl_tcp_eager_limit", "OMPI_MCA_btl_tcp_max_send_size")
        if pair_bytes > EAGER_MAX and not all(k in os.environ for k in keys):
            raise ConfigError(f"{approx_size(pair_bytes)} through --backend mpi: the doctor sends a "
                              "pair's message whole (eagerly), and Open MPI's TCP transport "
                              f"takes at most {EAGER_MAX >> 30} GiB so (past it the job hangs at "
                              f"its first message); give at most {EAGER_MAX >> 30}G", "--bw-size")
        limit = str(pair_bytes + (64 << 10))
        return {k: os.environ.get(k, limit) for k in keys}

    def begin_part(self):
        self._largest = (0, None, 0)  # (bytes, huge kB, page offset) of the largest written
        self._collectives = set()   # those timed, for `library_ran`

    @property
    def library(self):
        from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
        return MPI.Get_library_version().replace("\x00", "").splitlines()[0].strip()

    @property
    def device_name(self):
        return "cpu"

    def blocking_mode(self, mode):
        return BLOCKING_MODES[int(mode)] + (f" ({BLOCKING_ON_RETURN})" if mode == 2 else "")

    def rotating_sets(self, set_bytes, operations):
        if not self.options.off_cache:
            return 1
        return buffer_sets(self.options.off_cache, set_bytes, operations)

    def alloc(self, nelems, dtype):
        # numpy aligns an allocation to 64 bytes; -u N starts the buffer N
        # elements into one (nccl-tests adds unalign * wordSize to each pointer)
        # off: libc malloc, the peers' alignment and pages (hostpages)
        u, item = self.options.unalign, np.dtype(dtype.storage).itemsize
        raw = hostpages.buffer((nelems + u) * item, self.options.huge_pages)
        buf = raw.view(dtype.storage)[u:u + nelems]
        buf[...] = 0   # written, so every page exists before it is timed
        return buf

    def scratch_bytes(self, collective, algorithm, count, dtype, nranks):
        return self.engine.scratch_bytes(collective, algorithm, count, dtype.itemsize, nranks)

    def scratch(self, collective, algorithm, count, dtype, nranks):
        n = self.scratch_bytes(collective, algorithm, count, dtype, nranks)
        return np.empty(n, dtype=np.uint8) if n else None

    def upload(self, buf, host):
        buf[...] = host
        if buf.nbytes >= hostpages.NUMPY_MADVISE_FROM and buf.nbytes > self._largest[0]:
            # written now, so its pages exist: what did the kernel give?
            self._largest = (buf.nbytes, hostpages.huge_kb(buf), hostpages.page_offset(buf))

    def dataset_attrs(self, layouts):
        return {**hostpages.describe(self.options.huge_pages, self._largest),
                "mpi_thread_level": thread_level(),
                # the segment the pipelined algorithms ran with, as the
                # theory's fit reads it (0 asks the engine for its default)
                "segment_bytes": self.options.segment_bytes or self.engine.SEGMENT_DEFAULT,
                "library_algorithm": library_algorithm(self.library),
                "library_ran": self.library_ran()}

    def library_ran(self):
        """What the library's own call (`mpi`) ran, the same at every size:
        the algorithm the environment forced Open MPI's coll/tuned to run
        (`ompi_tuned`); "" where the library does not report it
        (`library_algorithm` says why)."""
        if self.library.startswith("Open MPI") and len(self._collectives) == 1:
            return forced_algorithm(next(iter(self._collectives)), os.environ) or ""
        return ""

    def close(self):
        super().close()
        hostpages.set_numpy_madvise(self._madvise_before)

    def download(self, buf):
        return np.array(buf, copy=True)

    def time(self, collective, algorithm, buffers, *, count, dtype, op, root,
             warmup, iters, agg=1, blocking=0, progress=None, once=False, **vectors):
        """Per-iteration latency and local start (µs) of one algorithm.

        `once`: the checked call (here one iteration is always one call).

        `progress` (2 int64, shared with the launcher's watchdog) counts the
        calls entered and left."""
        self._collectives.add(collective)
        return self.engine.time_loop(
            self.comm, collective, algorithm, buffers, dtype=dtype.engine, op=op,
            count=count, root=max(root, 0), warmup=warmup, iters=iters, agg=agg,
            blocking=int(blocking), segment_bytes=self.options.segment_bytes, progress=progress,
            **vectors)
