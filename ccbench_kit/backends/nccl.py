"""Backend `nccl`: device buffers, one process per GPU, NCCL's collectives.

libnccl and the CUDA runtime are opened at run time (`nccl_lib`), so the kit
builds and imports without CUDA.  Each algorithm name maps to one NCCL
communicator, created on first use with NCCL_ALGO/NCCL_PROTO set for it
(NCCL reads them at every communicator init):

- ``nccl``: NCCL's own choice;
- ``nccl:ring``, ``nccl:tree``, ``nccl:pat``, ``nccl:collnet_direct``,
  ``nccl:collnet_chain``, each optionally ``/ll``, ``/ll128`` or ``/simple``;
- ``nccl:p2p``: alltoall, gather and scatter as grouped ncclSend/ncclRecv
  where NCCL (2.28+) also has a native call, which ``nccl`` uses;
- the kit's own kernels on peer memory (`gpu_kernels`): ``oneshot``,
  ``oneshot-ll`` and ``twoshot`` (all_reduce), ``direct`` (all_gather, reduce_scatter), timed in
  the same loops.  Ranks may share a GPU for these only (CUDA IPC works
  between processes of one GPU: a correctness check, not a measurement):
  NCCL's algorithms are then refused, and the ``ranks_per_gpu`` attr says so.

A combination NCCL refuses (ncclInvalidUsage/ncclInvalidArgument) gives NaN
for that size and a reason in the Dataset's ``not_available`` attr; what
NCCL did run is read from its TUNING log around one untimed call per
algorithm and size (`nccl_tuning`) into the ``nccl_ran`` attr.

Timing (``--timing``): ``cuda-events`` (an event pair around every
iteration), ``batch`` (the host clock around all iterations and one stream
sync, nccl-tests' method), ``host-enqueue`` (the host clock around each
iteration's enqueue, one sync after the last: nccl-tests' ``-C 1`` cputime,
which ``-C 1`` picks) or ``graph`` (iterations captured in a CUDA graph,
replayed ``-G N`` times).

``-z`` (nccl-tests' blocking modes, `ccbench_kit.backends.blocking`): 1 and
2 wait for every operation (1 with a barrier after it) and time each iteration
with the host clock, as nccl-tests' host timer does; 3 times each iteration
in the chosen timing mode, then waits and barriers outside the span.
"""
import os
import socket
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from .. import collectives as _collectives, _nccl
from ..dataset.schema import attr_json
from ..dtypes import DTYPES, FP8, OPS
from ..errors import ConfigError, RunError
from . import nccl_lib
from .nccl_lib import version_string
from . import gpu_kernels
from .base import Backend, host_placement
from .nccl_buffers import DeviceBuffer, Pool, overlap
from .nccl_tuning import TuningCapture, environ, summarize
from .nccl_topo import topology

ALGOS = {"ring": "Ring", "tree": "Tree", "pat": "PAT",
         "collnet_direct": "CollnetDirect", "collnet_chain": "CollnetChain"}
PROTOS = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
# What NCCL does with each collective is the collective's own fact
# (collectives.def's NCCL column, `Collective.nccl`; ``nccl_in_place``).
_ALL = _collectives.all_collectives()
# ncclAlltoAll has no in-place form, and grouped send/recv into the buffer
# being sent races.
NO_IN_PLACE = tuple(c.name for c in _ALL if not c.nccl_in_place)
TIMINGS = ("cuda-events", "batch", "host-enqueue", "graph")
MEM_TYPES = ("cudaMalloc", "ncclMemAlloc")
_OP_NAMES = {v: k for k, v in OPS.items()}
# NCCL's enums (nccl.h), this backend's facts: ncclDataType_t of each kit
# dtype NCCL has (none for 16-bit integers), and ncclRedOp_t (max and min
# in the other order than the engine's `dtypes.OPS`)
NCCL_DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
               "fp16": 6, "fp32": 7, "fp64": 8, "bf16": 9, "fp8_e4m3": 10, "fp8_e5m2": 11}
NCCL_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
# ncclFloat8e4m3/e5m2 came with NCCL 2.24 (and reduce on sm_90 and later only)
FP8_SINCE_NCCL = 22400
# ncclCommWindowRegister (symmetric windows, -R 2) came with NCCL 2.27
WINDOWS_SINCE_NCCL = 22700
# nccl-tests 2.19's -R: 0 none, 1 ncclCommRegister, 2 symmetric windows
REGISTER_MODES = (0, 1, 2)
# nccl-tests 2.19's -D: 0 NCCL's own, 1 and 2 the device-API kernels
# (gpu_kernels' modules of that DEVICE_IMPLEMENTATION), 3 and 4 multimem;
# -V: their blocks (1-128, default 16)
DEVICE_IMPLEMENTATIONS = (0, 1, 2)
DEVICE_CTAS = 16
MAX_DEVICE_CTAS = 128


def nccl_algorithms(collective):
    """Algorithm names the nccl backend takes for `collective`."""
    case = _collectives.get(collective).nccl  # collectives.def's NCCL column
    if case == "native":
        return (["nccl"] + [f"nccl:{a}" for a in ALGOS]
                + [f"nccl:{a}/{p}" for a in ALGOS for p in PROTOS]
                + gpu_kernels.names_for(_collectives.get(collective).name))
    if case == "native_since_2_28":
        return ["nccl", "nccl:p2p"]
    if case == "p2p":
        return ["nccl"]
    return []  # NONE: no NCCL form; config refuses the run in one line


def own_kernel(collective, algorithm):
    """(module, phase) of the kit's own kernel `algorithm` names (``NAME`` or
    ``NAME:PHASE``, phase "" for the whole kernel), or (None, "")."""
    module = gpu_kernels.find(collective, algorithm)
    if module is not None:
        return module, ""
    whole = gpu_kernels.phase_algorithms(collective).get(algorithm)
    if whole is None:
        return None, ""
    return gpu_kernels.find(collective, whole[0]), whole[1]


def algorithm_env(algorithm):
    """The NCCL_ALGO/NCCL_PROTO an algorithm name sets ({} = NCCL's choice)."""
    if algorithm in ("nccl", "nccl:p2p"):
        return {}
    if not algorithm.startswith("nccl:"):
        raise ConfigError(f"not an NCCL algorithm: {algorithm!r}", "--algorithms")
    algo, _, proto = algorithm[5:].partition("/")
    if algo not in ALGOS or (proto and proto not in PROTOS):
        raise ConfigError(f"unknown NCCL algorithm {algorithm!r}: use nccl, nccl:ALGO or "
                          f"nccl:ALGO/PROTO with ALGO in {', '.join(ALGOS)} and PROTO in "
                          f"{', '.join(PROTOS)}", "--algorithms")
    env = {"NCCL_ALGO": ALGOS[algo]}
    if proto:
        env["NCCL_PROTO"] = PROTOS[proto]
    return env


def check_options(timing="cuda-events", graph_launches=1, mem_type="cudaMalloc",
                  register=0, fresh_buffers=False, device_implementation=0,
                  device_ctas=DEVICE_CTAS, **_other):
    """ConfigError for a backend option the nccl backend can't take."""
    if register not in REGISTER_MODES:  # True and False are 1 and 0
        raise ConfigError(f"must be 0, 1 or 2, got {register!r}", "-R/--local-register")
    if device_implementation not in DEVICE_IMPLEMENTATIONS:
        raise ConfigError(device_implementation_refusal(device_implementation),
                          "-D/--device-implementation")
    if device_implementation and register != 2:  # as nccl-tests refuses it
        raise ConfigError(f"-D {device_implementation} runs on symmetric windows: add -R 2",
                          "-D/--device-implementation")
    if not isinstance(device_ctas, int) or not 1 <= device_ctas <= MAX_DEVICE_CTAS:
        raise ConfigError(f"must be an integer from 1 to {MAX_DEVICE_CTAS}, got {device_ctas!r}",
                          "-V/--device-cta-count")
    if timing not in TIMINGS:
        raise ConfigError(f"unknown timing {timing!r}; use {', '.join(TIMINGS)}", "--timing")
    if not isinstance(graph_launches, int) or graph_launches < 1:
        raise ConfigError(f"must be an integer >= 1, got {graph_launches!r}", "-G/--cudagraph")
    if mem_type not in MEM_TYPES:
        raise ConfigError(f"unknown memory type {mem_type!r}; use {', '.join(MEM_TYPES)}",
                          "--mem-type")


def device_implementation_refusal(mode):
    """Why the kit doesn't take nccl-tests' ``-D mode``."""
    if mode in (3, 4):
        return (f"-D {mode} needs NVLink multicast (multimem), which the kit keeps off "
                "(NCCL_NVLS_ENABLE=0): it can take a shared host's GPUs out of service")
    return f"must be 0, 1 or 2, got {mode!r}"


def device_kernel(collective, mode):
    """The algorithm name of nccl-tests' ``-D mode`` kernel of `collective`,
    or ConfigError where it has none."""
    for name in gpu_kernels.names_for(collective):
        if getattr(gpu_kernels.find(collective, name), "DEVICE_IMPLEMENTATION", 0) == mode:
            return name
    raise ConfigError(f"-D {mode}: nccl-tests' device-API kernels are all_reduce's; "
                      f"{collective} has none", "-D/--device-implementation")


def _cuda_version(v):
    return f"{v // 1000}.{v % 1000 // 10}"


@dataclass(frozen=True)
class NCCLOptions:
    timing: str = "cuda-events"     # --timing (-G N: graph)
    graph_launches: int = 1         # -G: replays of the captured graph
    mem_type: str = "cudaMalloc"    # --mem-type
    register: int = 0               # -R: 1 ncclCommRegister, 2 symmetric windows
    fresh_buffers: bool = False     # --fresh-buffers
    device_implementation: int = 0  # -D: the default algorithm is that device-API kernel
    device_ctas: int = DEVICE_CTAS   # -V: blocks of a device-API kernel


class NCCLBackend(Backend):
    name = "nccl"
    default_algorithm = "nccl"
    ring_algorithm = "nccl:ring"
    debug_env = (("NCCL_DEBUG", "INFO"),)
    warms_every_size = True  # as nccl-tests: the harness warms every size up before timing
    aggregated_timings = ("batch", "graph")  # one average per iteration slot
    cputime_timing = "host-enqueue"          # nccl-tests -C 1
    Options = NCCLOptions

    @classmethod
    def default_preset(cls, ds):
        """NCCL on one host of H100 or H200 GPUs: their NVLink4 preset."""
        hosts = attr_json(ds, "hosts", [])
        one_host = not isinstance(hosts, list) or len(set(map(str, hosts))) <= 1
        devices = " ".join(str(d) for d in ds["device"].values).upper() \
            if "device" in ds.coords else ""
        for gpu in ("H200", "H100"):
            if gpu in devices and one_host:
                return f"{gpu.lower()}-nvlink4"
        return None

    @classmethod
    def algorithms_for(cls, collective):
        return nccl_algorithms(collective)

    @classmethod
    def phase_algorithms(cls, collective):
        if _collectives.get(collective).nccl != "native":
            return {}
        return gpu_kernels.phase_algorithms(_collectives.get(collective).name)

    @classmethod
    def default_algorithms(cls, collective, options):
        """NCCL's own, or nccl-tests' ``-D N`` kernel where -D is given."""
        mode = options.get("device_implementation", 0)
        return [device_kernel(collective, mode)] if mode else [cls.default_algorithm]

    @classmethod
    def add_arguments(cls, g):
        g.add_argument("--timing", default=None, choices=TIMINGS[:],
                       help="nccl: an event pair per iteration (default), nccl-tests' batch "
                            "timing, the host's enqueue time per iteration (-C 1), or a CUDA "
                            "graph (-G)")
        g.add_argument("-G", "--cudagraph", type=int, default=0, metavar="N",
                       help="nccl: capture the iterations in a CUDA graph, replay it N times")
        g.add_argument("--mem-type", default="cudaMalloc", choices=MEM_TYPES,
                       help="nccl: how device buffers are allocated")
        g.add_argument("-R", "--local-register", type=int, choices=REGISTER_MODES, default=0,
                       help="nccl: 1 registers buffers with ncclCommRegister, 2 as symmetric "
                            "windows (ncclCommWindowRegister, NCCL 2.27+; ncclMemAlloc memory)")
        g.add_argument("-D", "--device-implementation", type=int, choices=(0, 1, 2, 3, 4),
                       default=0, help="nccl: all_reduce by nccl-tests' device-API kernel N "
                                       "(1: lsa, 2: lsa-vec; needs -R 2) instead of NCCL's; 3 "
                                       "and 4 need NVLink multicast, which stays off")
        g.add_argument("-V", "--device-cta-count", type=int, default=DEVICE_CTAS, metavar="N",
                       help=f"nccl: blocks of the device-API kernels (1-{MAX_DEVICE_CTAS}, "
                            f"default {DEVICE_CTAS})")
        g.add_argument("--fresh-buffers", action="store_true",
                       help="nccl: allocate every size's buffers anew, instead of running every "
                            "size in the largest ones as nccl-tests does")

    @classmethod
    def data_types(cls):
        """The types NCCL has, fp8 left out: it needs NCCL 2.24 (and sm_90 to
        reduce), known only once a rank loads the library; name it with -d."""
        return tuple(name for name in DTYPES if name in NCCL_DTYPES and name not in FP8)

    @classmethod
    def dtype_refusal(cls, name):
        """A type NCCL has in no version; fp8's version is a rank's to check."""
        if name not in NCCL_DTYPES:
            return f"NCCL has no {name} type; use one of {', '.join(NCCL_DTYPES)}"
        return None

    @classmethod
    def options_from_args(cls, args):
        timing = args.timing or ("graph" if args.cudagraph else "")
        opts = {"timing": timing} if timing else {}
        if args.cudagraph or timing == "graph":
            opts["graph_launches"] = args.cudagraph or 1
        if args.mem_type != "cudaMalloc":
            opts["mem_type"] = args.mem_type
        if args.device_implementation:
            opts["device_implementation"] = args.device_implementation
        if args.device_cta_count != DEVICE_CTAS:
            opts["device_ctas"] = args.device_cta_count
        if args.local_register:
            opts["register"] = args.local_register
        if args.fresh_buffers:
            opts["fresh_buffers"] = True
        return opts

    @classmethod
    def make_options(cls, **values):
        values = {k: v for k, v in values.items() if not (k == "timing" and not v)}
        opts = super().make_options(**values)
        check_options(**vars(opts))
        return opts

    def __init__(self, comm, options=None, world=None, placement=None):
        """`comm` runs the collectives (a replica group's); `world` (default
        `comm`) spans every rank of the job, so that ranks of different
        groups on one host pick different GPUs; `placement` (a
        `base.Placement` decided once for the job) picks the GPU instead
        where `world` is not the job's (the doctor's pair of ranks 2 and 3
        of a host drives GPUs 2 and 3, not its own local ranks 0 and 1)."""
        super().__init__(comm, options, world, placement)
        o = self.options
        # NVLink multicast can take a shared host's GPUs out of service:
        # off unless the user asks for it.
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        self.rank, self.nranks = comm.Get_rank(), comm.Get_size()
        self.timing, self.graph_launches = o.timing, o.graph_launches
        self.register = int(o.register)
        # symmetric windows map cuMem memory only, as nccl-tests -R 2 allocates
        self.mem_type = "ncclMemAlloc" if self.register == 2 else o.mem_type
        cudart, nccl = nccl_lib.locate()
        self._x = _nccl
        try:
            self.lib = _nccl.Library(cudart, nccl)
        except _nccl.LoadError as e:
            raise nccl_lib.LibraryNotFound(f"--backend nccl: {e}") from None
        self.version = self.lib.nccl_version()
        if self.register == 2:
            _check_windows(self.lib, self.version)
        dcomm = self.world
        where = self.placement or host_placement(dcomm)
        self.local_rank, self.local_size = where.local_rank, where.local_size
        local_size = self.local_size
        try:
            ndev = self.lib.device_count()
        except _nccl.CudaError as e:
            raise nccl_lib.LibraryNotFound(f"--backend nccl: no usable GPU: {e} "
                                           f"(CUDA runtime {cudart})") from None
        if ndev < 1:
            raise ConfigError(f"{local_size} ranks share this host but it has no GPU visible",
                              "-r/--nworkers")
        # more ranks than GPUs: they share, for the kit's own kernels only
        self.ranks_per_gpu, self.gpus_here = -(-local_size // ndev), ndev
        self.device = self.local_rank % ndev
        self.lib.set_device(self.device)
        self.info = self.lib.device_info(self.device)
        self.stream = self.lib.stream_create()
        self._comms = {}      # (NCCL_ALGO, NCCL_PROTO) -> handle, or the init error
        self._free_at_start = self.info["free_bytes"]
        self._init_bytes = 0  # device memory the communicators took at init (-M)
        self.fresh_buffers = bool(o.fresh_buffers)
        self._pool = Pool(self.lib, self.mem_type, reuse=not o.fresh_buffers)
        self.begin_part()
        self._tmp = tempfile.mkdtemp(prefix="ccbench-nccl-")
        self.tuning = TuningCapture(self.lib.reset_debug, os.path.join(self._tmp, "tuning.log"))
        runtime, driver = self.lib.cuda_versions()
        self.cuda = {"runtime": _cuda_version(runtime), "driver": _cuda_version(driver)}
        self.paths = {"nccl": nccl, "cudart": cudart}
        gpu = dict(self.info, rank=dcomm.Get_rank(), group_rank=self.rank,
                   local_rank=self.local_rank, device=self.device, host=_hostname())
        self.gpus = dcomm.gather(gpu, root=0)
        self.topology = None
        if dcomm.Get_rank() == 0:
            self.topology = topology()
        self.own = gpu_kernels.PeerKernels(self.lib, comm, self.device,
                                           {"name": gpu["name"], "host": gpu["host"],
                                            "pci_bus_id": gpu["pci_bus_id"]})
        self.devapi = gpu_kernels.DevApiKernels(self.lib, comm, self.device, nccl,
                                                self.version, o.device_ctas)

    @classmethod
    def doctor_ranks_per_node(cls, remote):
        """One rank per GPU: this host's GPUs; under Slurm the nodes are not
        this host, so the user says."""
        if remote:
            raise ConfigError("give the GPUs per node: the nccl backend runs one rank per "
                              "GPU and the nodes are not this host", "--ranks-per-node")
        return visible_gpus()[0]

    @classmethod
    def check_local_setup(cls):
        """LibraryNotFound where libnccl or libcudart is missing here."""
        nccl_lib.locate()

    @classmethod
    def doctor_check(cls, remote):
        if remote:
            return
        gpus, why = visible_gpus()
        if not gpus:
            raise ConfigError(f"nccl needs a GPU on every node but this host has none "
                              f"({why.split(';')[0]}); use --backend mpi on CPU nodes",
                              "--backend")

    def check_algorithms(self, collective, algorithms):
        """More ranks than GPUs on a host and only NCCL's algorithms asked
        for: nothing could run, so stop before the first size (with one of
        the kit's own kernels among them, NCCL's are refused size by size)."""
        if self.ranks_per_gpu > 1 and not any(own_kernel(collective, a)[0]
                                              for a in algorithms):
            own = ", ".join(gpu_kernels.names_for(collective)) or f"none for {collective}"
            raise ConfigError(f"{self.local_size} ranks share this host but it has "
                              f"{self.gpus_here} GPU(s) visible; NCCL needs one GPU per rank "
                              f"(only the kit's own kernels run on shared GPUs: {own})",
                              "-r/--nworkers")

    def begin_part(self):
        # what NCCL ran and refused, by engine count: one part's collective
        self.ran = {}         # algorithm -> {engine count: "RING/LL x2ch"}
        self.unavailable = {}  # algorithm -> {engine count: reason}
        self._probed = set()

    # -- what the harness reads ------------------------------------------------
    @property
    def library(self):
        return (f"NCCL {version_string(self.version)}, CUDA runtime {self.cuda['runtime']}, "
                f"driver {self.cuda['driver']}")

    @property
    def device_name(self):
        return f"cuda:{self.device} {self.info['name']} ({self.info['pci_bus_id']})"

    def dataset_attrs(self, layouts):
        """Attrs for the Dataset (rank 0): versions, GPUs, what NCCL ran."""
        size_of = {l.engine_count: l.size for l in layouts}

        def by_size(d):
            return {alg: {str(size_of.get(c, c)): v for c, v in m.items()} for alg, m in d.items()}

        return {
            "nccl_version": version_string(self.version), "cuda_runtime": self.cuda["runtime"],
            "cuda_driver": self.cuda["driver"], "nccl_library": self.paths["nccl"],
            "cudart_library": self.paths["cudart"], "mem_type": self.mem_type,
            "register": bool(self.register), "local_register": self.register,
            "graph_launches": self.graph_launches,
            "fresh_buffers": self.fresh_buffers,
            "nccl_ran": by_size(self.ran), "nccl_ran_note": self.tuning.reason,
            "not_available": by_size(self.unavailable), "gpus": self.gpus or [],
            "topology": self.topology or {}, "ranks_per_gpu": self.ranks_per_gpu,
            "kernel_target": self.own.target or self.devapi.target,
            "device_implementation": self.options.device_implementation,
            "device_ctas": self.options.device_ctas,
        }

    # -- buffers -----------------------------------------------------------------
    def alloc(self, nelems, dtype):
        return DeviceBuffer(self._pool.take(nelems * dtype.itemsize), dtype, 0, nelems)

    def scratch(self, collective, algorithm, count, dtype, nranks):
        return None

    def scratch_bytes(self, collective, algorithm, count, dtype, nranks):
        return 0

    def memory_available(self):
        """Free device memory of this host's GPUs, pooled buffers included
        (the harness compares it with one rank's bytes times the ranks on
        the host)."""
        free = self.lib.device_info(self.device)["free_bytes"] + self._pool.free_bytes
        return free * self.local_size // self.ranks_per_gpu

    def _free_bytes(self):
        return self.lib.device_info(self.device)["free_bytes"]

    def memory_usage(self, buffer_bytes):
        """nccl-tests -M's three entries from cudaMemGetInfo: what the
        communicators took at init, the buffers, and what else the device
        lost since the backend started (NCCL's lazy allocations during the
        collectives), all of this rank's GPU."""
        pooled = self._pool.allocated_bytes
        used = max(0, self._free_at_start - self._free_bytes())
        return {"Initialization": self._init_bytes, "User-Allocated": int(buffer_bytes),
                "Collective": max(0, used - self._init_bytes - pooled)}

    @property
    def timing_clock(self):
        return {"cuda-events": "device: a CUDA event pair around each iteration",
                "batch": "host: CLOCK_MONOTONIC around all iterations and one stream sync",
                "host-enqueue": "host: CLOCK_MONOTONIC around each iteration's enqueue "
                                "(nccl-tests' cputime)",
                "graph": "host: CLOCK_MONOTONIC around -G graph replays and one sync"}[self.timing]

    def blocking_mode(self, mode):
        per_call = ("; each iteration timed with the host clock (CLOCK_MONOTONIC), the kit's "
                    "per-call Python overhead inside the span")
        how = {1: per_call, 2: per_call,
               3: f"; each iteration timed as --timing {self.timing}"}
        return super().blocking_mode(mode) + how.get(int(mode), "")

    def upload(self, buf, host):
        host = np.ascontiguousarray(host, dtype=buf.dtype.storage).reshape(-1)
        if host.size != buf.size:
            raise ValueError(f"uploading {host.size} elements into a buffer of {buf.size}")
        if buf.size:
            self.lib.upload(buf.ptr, host)

    def download(self, buf):
        out = np.empty(buf.size, dtype=buf.dtype.storage)
        if buf.size:
            self.lib.download(buf.ptr, out)
        return out

    # -- communicators -----------------------------------------------------------
    def _comm(self, algorithm):
        env = algorithm_env(algorithm)
        key = (env.get("NCCL_ALGO", ""), env.get("NCCL_PROTO", ""))
        if key not in self._comms:
            uid = self.comm.bcast(self.lib.unique_id() if self.rank == 0 else None, root=0)
            before = self._free_bytes()
            with environ(env):  # NCCL reads NCCL_ALGO/NCCL_PROTO at every init
                try:
                    self._comms[key] = self.lib.comm_init(self.nranks, uid, self.rank)
                except self._x.NcclError as e:
                    self._comms[key] = e
            self._init_bytes += max(0, before - self._free_bytes())
        return self._comms[key]

    def _register(self, comm, buffers):
        """-R 1: ncclCommRegister each allocation once per communicator; -R 2:
        ncclCommWindowRegister, a collective call (every rank's sweep takes
        the same allocations in the same order, so the ranks agree)."""
        window = self.register == 2
        for bufs in buffers:
            for b in bufs[:2]:
                a = b.allocation
                if comm not in a.registered:
                    if window:
                        handle = self.lib.window_register(comm, a.ptr, a.nbytes)
                    else:
                        handle = self.lib.register(comm, a.ptr, a.nbytes)
                    a.registered[comm] = (handle, window)

    def _call(self, collective, algorithm, send, recv, count, dtype, op, root, comm, vectors):
        d = dict(kind=collective, p2p=int(algorithm == "nccl:p2p"), send=send.ptr,
                 recv=recv.ptr, count=count, elsize=dtype.itemsize, dtype=NCCL_DTYPES[dtype.name],
                 op=NCCL_OPS[_OP_NAMES.get(op, "sum")], root=max(root, 0), rank=self.rank,
                 nranks=self.nranks, comm=comm, stream=self.stream)
        if collective == "alltoallv":
            d.update(scounts=vectors["sendcounts"], sdispls=vectors["sdispls"],
                     rcounts=vectors["recvcounts"], rdispls=vectors["rdispls"])
        if collective == "permute":  # default: the ring shift, as sendrecv
            peers = vectors.get("peers")
            if peers is None:
                peers = ((self.rank + 1) % self.nranks, (self.rank - 1) % self.nranks)
            d.update(send_to=int(peers[0]), recv_from=int(peers[1]))
        return d

    # -- the timed loop ------------------------------------------------------------
    def time(self, collective, algorithm, buffers, *, count, dtype, op, root, warmup, iters,
             agg=1, blocking=0, progress=None, once=False, **vectors):
        """Per-iteration latency and start (µs, MPI_Wtime's clock) of one
        algorithm; NaN where NCCL refuses it (reason in `unavailable`).

        `buffers` holds (send, recv, scratch[, count]) sets, cycled through
        by the iterations; `progress` (the MPI engine's watchdog board)
        doesn't apply to device loops.
        `once`: exactly one call, whatever the timing mode (the checked call:
        a graph replays its iterations -G times, which in place sums again).
        """
        x = self._x
        self.check_dtype(dtype.name)
        if dtype.name in FP8 and self.version < FP8_SINCE_NCCL:
            raise ConfigError(f"NCCL {version_string(self.version)} has no {dtype.name}: fp8 "
                              f"needs NCCL {version_string(FP8_SINCE_NCCL)} or later",
                              "-d/--datatype")
        if collective not in x.KINDS:
            raise ConfigError(f"the nccl backend has no {collective}", "COLLECTIVE")
        own, phase = own_kernel(collective, algorithm)
        if own is not None:
            return self._time_own(own, phase, buffers, count=count, dtype=dtype, op=op,
                                  warmup=warmup, iters=iters, agg=agg, blocking=blocking,
                                  once=once)
        if self.ranks_per_gpu > 1:
            return self._refuse(algorithm, count, f"{self.local_size} ranks share this host's "
                                f"GPUs ({self.ranks_per_gpu} a GPU): NCCL needs one GPU per "
                                "rank; only the kit's own kernels run on shared GPUs")
        if collective == "hypercube" and self.nranks & (self.nranks - 1):
            return self._refuse(algorithm, count, "hypercube needs a power-of-two rank count")
        if collective in NO_IN_PLACE and overlap(buffers[0][0], buffers[0][1]):
            return self._refuse(algorithm, count, f"NCCL has no in-place {collective}: its send "
                                "and receive buffers must not overlap")
        comm = self._comm(algorithm)
        if isinstance(comm, Exception):
            return self._refuse(algorithm, count, f"communicator init failed: {comm}")
        calls = [self._call(collective, algorithm, b[0], b[1], b[3] if len(b) > 3 else count,
                            dtype, op, root, comm, vectors) for b in buffers]
        try:
            if self.register:
                self._register(comm, buffers)
            if once:
                lat, start = self._one_call(calls)
            else:
                lat, start = self._loop(calls, warmup, iters, agg, blocking)
            if (algorithm, count) not in self._probed:
                # after the timed loop: switching NCCL's log on and off is host
                # work the GPUs would otherwise idle through just before timing
                self._probed.add((algorithm, count))
                self._probe(algorithm, count, calls)
        except x.NcclError as e:
            # NCCL 2.28 reports a forced algorithm it has none of (NCCL_ALGO=PAT
            # for all_reduce) as an internal error, older ones as invalid usage
            if e.refused or "no algorithm/protocol available" in str(e):
                return self._refuse(algorithm, count, str(e))
            raise RunError(f"rank {self.rank}: {e}") from None
        except x.CudaError as e:
            raise RunError(f"rank {self.rank}: {e}") from None
        to_wtime = _wtime_us() - x.monotonic_us()
        return lat, start + to_wtime

    def _time_own(self, module, phase, buffers, *, count, dtype, op, warmup, iters, agg,
                  blocking, once):
        """`time` of one of the kit's own kernels (`gpu_kernels`; `phase`:
        that phase of it alone): NaN and a reason where it can't run here, as
        for NCCL's refusals."""
        op_name = _OP_NAMES.get(op, "sum")
        algorithm = f"{module.NAME}:{phase}" if phase else module.NAME
        if gpu_kernels.is_devapi(module):
            calls, launched = self._devapi_calls(module, buffers, count, dtype, op, op_name)
        else:
            reason = self.own.refusal(module, dtype.name, op_name, phase)
            if reason:
                return self._refuse(algorithm, count, reason)
            base = [self._call(module.COLLECTIVE, module.NAME, b[0], b[1],
                               b[3] if len(b) > 3 else count, dtype, op, 0, 0, {})
                    for b in buffers]
            calls, launched = self.own.calls(module, dtype, base, phase)
        if calls is None:
            return self._refuse(algorithm, count, launched)
        try:
            if once:
                lat, start = self._one_call(calls)
            else:
                lat, start = self._loop(calls, warmup, iters, agg, blocking)
        except (self._x.CudaError, self._x.NcclError) as e:
            raise RunError(f"rank {self.rank}: {algorithm}: {e}") from None
        if self.rank == 0:
            self.ran.setdefault(algorithm, {})[count] = launched
        return lat, start + (_wtime_us() - self._x.monotonic_us())

    def _devapi_calls(self, module, buffers, count, dtype, op, op_name):
        """(calls, what they launch) of a device-API kernel on the buffers'
        symmetric windows of NCCL's default communicator, or (None, why not)."""
        if self.ranks_per_gpu > 1:
            return None, (f"{self.local_size} ranks share this host's GPUs: NCCL's device "
                          "communicator needs one GPU per rank")
        comm = self._comm("nccl")
        if isinstance(comm, Exception):
            return None, f"communicator init failed: {comm}"
        reason = self.devapi.refusal(module, dtype.name, op_name, self.register == 2, comm)
        if reason:
            return None, reason
        self._register(comm, buffers)
        base, windows = [], []
        for b in buffers:
            base.append(self._call(module.COLLECTIVE, module.NAME, b[0], b[1],
                                   b[3] if len(b) > 3 else count, dtype, op, 0, comm, {}))
            windows.append(tuple(v for buf in b[:2] for v in (
                buf.allocation.registered[comm][0], buf.ptr - buf.allocation.ptr)))
        return self.devapi.calls(module, dtype, base, windows, comm)

    def _refuse(self, algorithm, count, reason):
        self.unavailable.setdefault(algorithm, {})[count] = reason
        return np.full(1, np.nan), np.full(1, np.nan)

    def _one_call(self, calls):
        """The first call once, unwarmed, whatever the timing mode."""
        return self.lib.time_loop(calls[:1], mode="batch", warmup=0, iters=1)

    def _probe(self, algorithm, count, calls):
        """One untimed call, with NCCL's TUNING log on at rank 0."""
        decisions = []
        ctx = self.tuning.capture(decisions) if self.rank == 0 else nullcontext()
        with ctx:
            self._one_call(calls)
        if self.rank == 0:
            self.ran.setdefault(algorithm, {})[count] = summarize(decisions) or (
                "p2p" if not self.tuning.reason else "")

    def _loop(self, calls, warmup, iters, agg, blocking):
        run = self.lib.time_loop
        kw = dict(mode=self.timing, agg=agg, barrier=self.comm.Barrier,
                  graph_launches=self.graph_launches)
        if not blocking:
            return run(calls, warmup=warmup, iters=iters, **kw)
        if blocking == 3:
            return self._loop_iter_barrier(calls, warmup, iters, agg)
        return self._loop_per_call(calls, warmup, iters, agg, blocking)

    def _loop_iter_barrier(self, calls, warmup, iters, agg):
        """-z 3: each iteration timed alone (its stream synchronised), then
        a barrier outside its span; time_loop's barrier comes after its
        warm-up and before its timed iteration, so barrier i+1 follows
        iteration i.  -C 1 (host-enqueue) becomes the host clock around the
        enqueue and the sync (batch), as nccl-tests' -z 3 cputime includes
        the wait."""
        mode = "batch" if self.timing == "host-enqueue" else self.timing
        lat, start = np.empty(iters), np.empty(iters)
        n = len(calls)
        for i in range(iters):
            k = (i * agg) % n
            l, s = self.lib.time_loop(calls[k:] + calls[:k], mode=mode, agg=agg,
                                      warmup=warmup if i == 0 else 0, iters=1,
                                      barrier=self.comm.Barrier)
            lat[i], start[i] = l[0], s[0]
        self.comm.Barrier()
        return lat, start

    def _loop_per_call(self, calls, warmup, iters, agg, blocking):
        """-z 1 and 2: every operation waited for (1: and a barrier after
        it), the iteration timed by the host clock around all of it, as
        nccl-tests' host timer sees a blocking loop; each call's own
        time_loop (one batch call, synchronised) is inside that span."""
        x, run, n = self._x, self.lib.time_loop, len(calls)
        if warmup:
            run(calls, mode="batch", warmup=warmup, iters=1, agg=agg)
        self.comm.Barrier()
        lat, start = np.empty(iters), np.empty(iters)
        for i in range(iters):
            t0 = x.monotonic_us()
            for j in range(agg):
                k = (i * agg + j) % n
                run(calls[k:k + 1], mode="batch", warmup=0, iters=1, agg=1)
                if blocking == 1:
                    self.comm.Barrier()
            lat[i], start[i] = (x.monotonic_us() - t0) / agg, t0
        return lat, start

    def close(self):
        self.own.close()
        self.devapi.close()  # before the windows and communicators it was made of
        self._pool.close()
        for key, c in list(self._comms.items()):
            if not isinstance(c, Exception):
                try:
                    self.lib.comm_destroy(c)
                except self._x.NcclError:
                    self.lib.comm_destroy(c, abort=True)
        self._comms.clear()
        if self.stream:
            self.lib.stream_destroy(self.stream)
            self.stream = 0
        try:
            for f in os.listdir(self._tmp):
                os.unlink(os.path.join(self._tmp, f))
            os.rmdir(self._tmp)
        except OSError:
            pass



def visible_gpus():
    """(GPUs this process sees, why none): 0 and the reason when libnccl,
    the CUDA runtime or a usable GPU is missing (nothing is raised: a
    CPU-only host answers 0)."""
    try:
        cudart, nccl = nccl_lib.locate()
        return _nccl.Library(cudart, nccl).device_count(), ""
    except Exception as e:  # not found, not loadable, no driver: no GPU here
        return 0, str(e).removeprefix("--backend nccl: ")


def _check_windows(lib, version):
    """ConfigError, in one line, where this NCCL has no symmetric windows."""
    if version < WINDOWS_SINCE_NCCL or not lib.has("ncclCommWindowRegister"):
        raise ConfigError(f"-R 2 (symmetric windows, ncclCommWindowRegister) needs NCCL "
                          f"{version_string(WINDOWS_SINCE_NCCL)} or later; this is NCCL "
                          f"{version_string(version)}", "-R/--local-register")


def _wtime_us():
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    return MPI.Wtime() * 1e6


def _hostname():
    return socket.gethostname()
