"""Backend `torch`: the kit's collectives through ``torch.distributed``.

What PyTorch users run, timed like the nccl backend's loop, so that a run of
each gives the framework's cost over raw NCCL per size.

Ranks and process group
-----------------------
The ranks are the kit's MPI ranks (MPI stays the control plane): the
process group's rank and size are the replica group's communicator's, and
its rendezvous is a ``TCPStore`` whose port the OS picks (port 0: two jobs
on a host never collide) and whose address rank 0 broadcasts over MPI (no
MASTER_ADDR/MASTER_PORT in the environment).  The address is loopback
(127.0.0.1) when every rank of the group is on rank 0's host, the usual
case, so the rendezvous never leaves the machine; across hosts it is rank
0's own address, as its hostname resolves (the name mpirun and Slurm reach
it by; where that is loopback, its default route's source address:
`own_address`).  torch's store server listens on every interface of rank 0's host
for as long as the run lasts.  On one host gloo is pinned to the loopback
interface (``GLOO_SOCKET_IFNAME=lo`` unless the environment sets it).

CUDA tensors and the ``nccl`` process group where this rank sees a GPU (one
GPU per rank of a host, the local rank's, as the nccl backend picks it),
else CPU tensors and ``gloo``; ``--torch-device cpu`` asks for gloo on a GPU
host.  torch is the optional extra ``ccbench_kit[torch]``, imported here
only, when a rank starts.

Calls (the kit's layouts and golden results)
--------------------------------------------
all_reduce ``all_reduce``, reduce ``reduce``, broadcast ``broadcast``: torch
has in-place forms only; out of place, the receive buffer takes a copy of
the send buffer first, inside the timed span, which is what torch's own
out-of-place form (the functional ``all_reduce``) does.  all_gather
``all_gather_single``, reduce_scatter ``reduce_scatter_single`` (torch
2.13's names; ``all_gather_into_tensor`` and ``reduce_scatter_tensor``
before, which 2.13 still has but warns at every call; in place, the send
block is a view of the receive buffer, or the reverse, as nccl-tests lays
them out), alltoall ``all_to_all_single``, alltoallv
``all_to_all_single`` with split sizes (displacements must be packed in
rank order, as torch takes no displacements), gather ``gather`` and scatter
``scatter`` with lists of views into the kit's buffer, sendrecv and permute
``batch_isend_irecv`` (a grouped send and receive).  hypercube has no torch
call: `algorithms_for` gives [], so the run is refused in one line.

Algorithms: ``torch`` (eager: one Python call per operation, what a PyTorch
program pays) and ``torch:graph`` (each iteration's calls captured once in
a CUDA graph and replayed: the per-call host work gone; CUDA tensors only,
refused in one line on gloo).  The functional collectives and a
``torch.compile``'d call are not offered: the functional forms run the same
process-group calls plus a wait, and torch.compile recompiles for every
size of a sweep (minutes of compiling before a GPU moves a byte).

Timing (``--timing``, as the nccl backend's): per iteration, a CUDA event
pair around each iteration on GPU (``cuda-events``) and the host clock on
CPU (``host-clock``: gloo's calls have completed when they return);
``batch`` (the host clock around all iterations and one sync);
``host-enqueue`` (``-C 1``: the host clock around each iteration's calls,
one sync after the last; on gloo the same as ``host-clock``).  ``-z``
modes as the nccl backend runs them.
"""
import os
import socket
import sys
import time
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from .. import _optional
from ..dtypes import OPS
from ..errors import ConfigError, RunError
from .base import Backend, host_memory_available, host_placement
from .blocking import BLOCKING_MODES, BLOCKING_ON_RETURN
from .torch_loop import CaptureFailed, GraphLoop, run_loop

EXTRA = "torch"
EAGER, GRAPH = "torch", "torch:graph"
# the collectives torch.distributed has a call for (the module docstring says which)
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "alltoallv",
               "sendrecv", "permute", "broadcast", "reduce", "gather", "scatter")
# the kit's dtypes torch.distributed reduces and moves on both gloo and NCCL
# (gloo refuses 16-bit integers, unsigned 16-64 bit and fp8: "Invalid scalar type")
TORCH_DTYPES = {"uint8": "uint8", "int8": "int8", "int32": "int32", "int64": "int64",
                "fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}
TORCH_OPS = {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX", "avg": "AVG"}
_OP_NAMES = {v: k for k, v in OPS.items()}
TIMINGS = ("cuda-events", "host-clock", "batch", "host-enqueue")
DEVICES = ("auto", "cpu", "cuda")
# collectives whose send and receive buffers must not overlap (the data a
# rank sends would be overwritten by what it receives, mid-call)
NO_IN_PLACE = ("alltoall", "alltoallv", "sendrecv", "permute")
STORE_TIMEOUT = timedelta(minutes=5)


@dataclass(frozen=True)
class TorchOptions:
    timing: str = ""        # --timing; "": cuda-events on GPU, host-clock on CPU
    device: str = "auto"    # --torch-device: auto (a GPU where there is one), cpu, cuda


def _refuse_graph_timing():
    raise ConfigError("the torch backend captures CUDA graphs as the algorithm torch:graph "
                      "(--algorithms torch,torch:graph); -G and --timing graph are the nccl "
                      "backend's", "-G/--cudagraph")


class TorchBackend(Backend):
    name = "torch"
    default_algorithm = EAGER
    warms_every_size = True          # as the nccl backend (an idle GPU slows the first sizes)
    aggregated_timings = ("batch",)  # one average per iteration slot
    timing = "cuda-events"           # the rank resolves "" by its device (`resolved_timing`)
    cputime_timing = "host-enqueue"  # nccl-tests -C 1
    Options = TorchOptions

    # -- class side (no torch imported) -----------------------------------------
    @classmethod
    def algorithms_for(cls, collective):
        return [EAGER, GRAPH] if collective in COLLECTIVES else []

    @classmethod
    def data_types(cls):
        return tuple(TORCH_DTYPES)

    @classmethod
    def dtype_refusal(cls, name):
        if name not in TORCH_DTYPES:
            return (f"torch.distributed has no {name} on both gloo and NCCL; "
                    f"use one of {', '.join(TORCH_DTYPES)}")
        return None

    @classmethod
    def default_preset(cls, ds):
        """NCCL on one host of H100/H200: their NVLink4 preset (the nccl
        backend's rule); gloo on CPU tensors: ``cpu``."""
        from .nccl import NCCLBackend  # lazy: the nccl backend's rule, only when asked
        devices = {str(d) for d in ds["device"].values} if "device" in ds.coords else set()
        if devices == {"cpu"}:
            return "cpu"
        return NCCLBackend.default_preset(ds)

    @classmethod
    def add_arguments(cls, g):
        g.add_argument("--torch-device", default=None, choices=DEVICES,
                       help="torch: tensors on the GPU with the nccl process group (auto: "
                            "where the rank sees a GPU) or on the host with gloo")

    @classmethod
    def options_from_args(cls, args):
        return {"device": args.torch_device} if args.torch_device else {}

    @classmethod
    def make_options(cls, **values):
        """Validated options; torch must be installed (checked without
        importing it, before any rank starts)."""
        if "graph_launches" in values or values.get("timing") == "graph":
            _refuse_graph_timing()
        opts = super().make_options(**values)
        if opts.timing not in ("",) + TIMINGS:
            raise ConfigError(f"unknown timing {opts.timing!r} for the torch backend; use "
                              f"{', '.join(TIMINGS)}", "--timing")
        if opts.device not in DEVICES:
            raise ConfigError(f"must be one of {', '.join(DEVICES)}, got {opts.device!r}",
                              "--torch-device")
        if opts.device == "cpu" and opts.timing == "cuda-events":
            raise ConfigError("cuda-events needs CUDA tensors; --torch-device cpu runs gloo on "
                              "host tensors (timed with the host clock)", "--timing")
        _optional.require_installed("torch", EXTRA)
        return opts

    # -- rank side -----------------------------------------------------------------
    def __init__(self, comm, options=None, world=None, placement=None):
        super().__init__(comm, options, world, placement)
        self.torch = torch = _optional.require("torch", EXTRA)
        self.dist = dist = _optional.require("torch.distributed", EXTRA)
        if not dist.is_available():
            raise ConfigError(f"this torch build ({torch.__version__}) has no "
                              "torch.distributed", "--backend")
        if dist.is_initialized():
            raise ConfigError("torch.distributed is already initialised in this process; the "
                              "torch backend makes its own process group", "--backend")
        self.rank, self.nranks = comm.Get_rank(), comm.Get_size()
        where = self.placement or host_placement(self.world)
        self.local_rank, self.local_size = where.local_rank, where.local_size
        want = self.options.device
        gpus = torch.cuda.device_count() if want != "cpu" and torch.cuda.is_available() else 0
        if want == "cuda" and not gpus:
            raise ConfigError("no GPU visible to torch on this rank", "--torch-device")
        self.on_gpu = gpus > 0
        if self.on_gpu and gpus < self.local_size:
            raise ConfigError(f"{self.local_size} ranks share this host but torch sees {gpus} "
                              "GPU(s); NCCL needs one GPU per rank", "-r/--nworkers")
        if self.on_gpu:
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        self.process_group = "nccl" if self.on_gpu else "gloo"
        if not self.on_gpu and self.options.timing == "cuda-events":
            raise ConfigError("cuda-events needs CUDA tensors; this rank runs gloo on host "
                              "tensors (no GPU visible, or --torch-device cpu)", "--timing")
        self.timing = self.options.timing or ("cuda-events" if self.on_gpu else "host-clock")
        if not self.on_gpu and self.timing == "host-enqueue":
            self.timing = "host-clock"  # -C 1: gloo's calls complete before they return
        self.begin_part()
        self._store, self.rendezvous = self._make_store()
        # torch wraps sys.excepthook at every init (a rank prefix on each
        # line); the process's own hook comes back at close()
        self._excepthook = sys.excepthook
        dist.init_process_group(self.process_group, store=self._store, rank=self.rank,
                                world_size=self.nranks, timeout=STORE_TIMEOUT,
                                device_id=self.device if self.on_gpu else None)

    def begin_part(self):
        # what one part's collective ran and refused (a job keeps this backend)
        self.unavailable = {}  # algorithm -> {engine count: reason}
        self.calls_used = {}   # collective -> the torch call that ran it

    def check_algorithms(self, collective, algorithms):
        """torch:graph on gloo: refused before any size."""
        if GRAPH in algorithms and not self.on_gpu:
            raise ConfigError("torch:graph captures a CUDA graph and needs CUDA tensors; this "
                              "rank runs gloo on host tensors (no GPU visible, or "
                              "--torch-device cpu)", "--algorithms")

    def _make_store(self):
        """The TCPStore of the rendezvous, and where it listens, in words;
        the module docstring says why this address."""
        hosts = self.comm.allgather(socket.gethostname())
        one_host = len(set(hosts)) == 1
        if one_host:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        store_cls = self.dist.TCPStore
        if self.rank == 0:
            addr = "127.0.0.1" if one_host else own_address()
            store = store_cls(addr, 0, self.nranks, True, timeout=STORE_TIMEOUT,
                              wait_for_workers=False)
            where = self.comm.bcast((addr, store.port), root=0)
        else:
            where = self.comm.bcast(None, root=0)
            store = store_cls(where[0], where[1], self.nranks, False, timeout=STORE_TIMEOUT)
        how = "loopback, every rank on one host" if one_host else "rank 0's own address"
        return store, f"TCPStore {where[0]}:{where[1]} ({how}), address sent over MPI"

    # -- what the harness reads ------------------------------------------------
    @property
    def library(self):
        t = self.torch
        if self.on_gpu:
            return (f"PyTorch {t.__version__}, NCCL {self.nccl_version()}, CUDA "
                    f"{t.version.cuda}")
        return f"PyTorch {t.__version__}, gloo"

    def nccl_version(self):
        """The NCCL torch loaded, 'major.minor.patch' ('' on gloo)."""
        if not self.on_gpu:
            return ""
        v = self.torch.cuda.nccl.version()
        return ".".join(map(str, v[:3])) if isinstance(v, tuple) else str(v)

    @property
    def device_name(self):
        if not self.on_gpu:
            return "cpu"
        p = self.torch.cuda.get_device_properties(self.device)
        bus = ""
        if hasattr(p, "pci_bus_id"):
            bus = f" ({p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0)"
        return f"cuda:{self.device.index} {p.name}{bus}"

    def dataset_attrs(self, layouts):
        """Versions, the process group, its rendezvous, the torch call of
        each collective, and what was refused."""
        size_of = {l.engine_count: l.size for l in layouts}
        refused = {alg: {str(size_of.get(c, c)): why for c, why in m.items()}
                   for alg, m in self.unavailable.items()}
        out = {"torch_version": str(self.torch.__version__),
               "torch_process_group": self.process_group, "torch_device": self.device.type,
               "torch_rendezvous": self.rendezvous, "torch_calls": dict(self.calls_used),
               "not_available": refused}
        if self.on_gpu:
            out.update(nccl_version=self.nccl_version(), cuda_runtime=str(self.torch.version.cuda))
        return out

    @property
    def timing_clock(self):
        return {"cuda-events": "device: a CUDA event pair around each iteration",
                "host-clock": "host: perf_counter around each iteration (gloo's calls complete "
                              "before they return)",
                "batch": "host: perf_counter around all iterations and one sync",
                "host-enqueue": "host: perf_counter around each iteration's calls, one sync "
                                "after the last"}[self.timing]

    def blocking_mode(self, mode):
        mode = int(mode)
        if not self.on_gpu:
            return BLOCKING_MODES[mode] + (f" ({BLOCKING_ON_RETURN})" if mode == 2 else "")
        how = {1: "; each iteration timed with the host clock",
               2: "; each iteration timed with the host clock",
               3: f"; each iteration timed as --timing {self.timing}"}
        return BLOCKING_MODES[mode] + how.get(mode, "")

    def memory_available(self):
        if not self.on_gpu:
            return host_memory_available()
        return self.torch.cuda.mem_get_info(self.device)[0] * self.local_size

    # -- buffers -------------------------------------------------------------------
    def _tdtype(self, dtype):
        self.check_dtype(dtype.name)
        return getattr(self.torch, TORCH_DTYPES[dtype.name])

    def alloc(self, nelems, dtype):
        return self.torch.zeros(nelems, dtype=self._tdtype(dtype), device=self.device)

    def upload(self, buf, host):
        host = np.ascontiguousarray(host).reshape(-1)
        if host.size != buf.numel():
            raise ValueError(f"uploading {host.size} elements into a buffer of {buf.numel()}")
        # through bytes: numpy has no bf16 and the kit keeps its bit patterns
        raw = self.torch.from_numpy(host.view(np.uint8)).view(buf.dtype)
        buf.copy_(raw)

    def download(self, buf):
        host = buf.detach().to("cpu").contiguous()
        storage = {self.torch.bfloat16: np.uint16}.get(buf.dtype)
        out = host.view(self.torch.uint8).numpy()
        return out.view(storage or host.numpy().dtype).copy()

    # -- the calls -------------------------------------------------------------------
    def _call(self, collective, send, recv, count, op, root, vectors):
        """One operation as a function of no arguments, or the reason torch
        cannot run it (a str)."""
        # why long: one branch per collective, each a few lines mapping the
        # kit's buffers onto its torch call; apart, they would share nothing.
        d, p, me = self.dist, self.nranks, self.rank
        if collective in NO_IN_PLACE and _overlap(send, recv):
            return (f"torch.distributed has no in-place {collective}: its send and receive "
                    "buffers must not overlap")
        self.calls_used[collective] = _call_name(d, collective)
        if collective in ("all_reduce", "reduce", "broadcast"):
            s, r = send[:count], recv[:count]
            copy = not _same(s, r) and (collective != "broadcast" or me == root)
            if collective == "all_reduce":
                run = lambda: d.all_reduce(r, op=op)  # noqa: E731
            elif collective == "reduce":
                run = lambda: d.reduce(r, dst=root, op=op)  # noqa: E731
            else:
                run = lambda: d.broadcast(r, src=root)  # noqa: E731
            if not copy:
                return run

            def copied():
                r.copy_(s)
                run()
            return copied
        if collective == "all_gather":
            s, r, gather = send[:count], recv[:count * p], getattr(d, self.calls_used[collective])
            return lambda: gather(r, s)
        if collective == "reduce_scatter":
            s, r, scatter = send[:count * p], recv[:count], getattr(d, self.calls_used[collective])
            return lambda: scatter(r, s, op=op)
        if collective == "alltoall":
            s, r = send[:count * p], recv[:count * p]
            return lambda: d.all_to_all_single(r, s)
        if collective == "alltoallv":
            return self._alltoallv(send, recv, vectors)
        if collective in ("sendrecv", "permute"):
            to, frm = vectors.get("peers") if vectors.get("peers") is not None else (
                (me + 1) % p, (me - 1) % p)
            s, r = send[:count], recv[:count]
            if to == me and frm == me:
                return lambda: r.copy_(s)
            ops = [d.P2POp(d.isend, s, int(to)), d.P2POp(d.irecv, r, int(frm))]
            return lambda: [w.wait() for w in d.batch_isend_irecv(ops)]
        if collective == "gather":
            s = send[:count]
            blocks = list(recv[:count * p].split(count)) if me == root else None
            return lambda: d.gather(s, blocks, dst=root)
        if collective == "scatter":
            r = recv[:count]
            blocks = list(send[:count * p].split(count)) if me == root else None
            return lambda: d.scatter(r, blocks, src=root)
        raise ConfigError(f"the torch backend has no {collective}", "COLLECTIVE")

    def _alltoallv(self, send, recv, v):
        sc, sd = np.asarray(v["sendcounts"]), np.asarray(v["sdispls"])
        rc, rd = np.asarray(v["recvcounts"]), np.asarray(v["rdispls"])
        if not (_packed(sc, sd) and _packed(rc, rd)):
            return ("all_to_all_single takes split sizes, not displacements: this pattern's "
                    "blocks are not packed in rank order")
        s, r = send[:int(sc.sum())], recv[:int(rc.sum())]
        ins, outs = [int(x) for x in sc], [int(x) for x in rc]
        return lambda: self.dist.all_to_all_single(r, s, output_split_sizes=outs,
                                                   input_split_sizes=ins)

    # -- the timed loop ------------------------------------------------------------
    def time(self, collective, algorithm, buffers, *, count, dtype, op, root, warmup, iters,
             agg=1, blocking=0, progress=None, once=False, **vectors):
        """Per-iteration latency and start (µs, MPI_Wtime's clock) of one
        algorithm; NaN where torch cannot run it (reason in `unavailable`).

        `progress` (the MPI engine's watchdog board) is not counted here:
        torch's calls are not the engine's."""
        self._tdtype(dtype)
        op_name = _OP_NAMES.get(op, "sum")
        red = getattr(self.dist.ReduceOp, TORCH_OPS[op_name])
        self.check_algorithms(collective, [algorithm])
        if op_name == "avg" and not self.on_gpu and not dtype.is_float:
            return self._refuse(algorithm, count, "gloo's avg divides the sum in place in "
                                "floating point, which an integer tensor cannot hold")
        calls = []
        for b in buffers:
            c = self._call(collective, b[0], b[1], b[3] if len(b) > 3 else count, red,
                           max(root, 0), vectors)
            if isinstance(c, str):
                return self._refuse(algorithm, count, c)
            calls.append(c)
        to_wtime = _wtime_us() - time.perf_counter() * 1e6
        try:
            if algorithm == GRAPH:
                lat, start = GraphLoop(self, calls, agg).run(warmup, iters, blocking, once)
            else:
                lat, start = self._loop(calls, warmup, iters, agg, blocking, once)
        except CaptureFailed as e:
            return self._refuse(algorithm, count, f"CUDA graph capture failed: {e}")
        except RuntimeError as e:  # torch's errors, DistBackendError included
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise RunError(f"rank {self.rank}: torch.distributed {collective}: {first}") from None
        return lat, start + to_wtime

    def _refuse(self, algorithm, count, reason):
        """NaN times for this size, and why, in the ``not_available`` attr."""
        self.unavailable.setdefault(algorithm, {})[count] = reason
        return np.full(1, np.nan), np.full(1, np.nan)

    def _sync(self):
        if self.on_gpu:
            self.torch.cuda.synchronize(self.device)

    def _loop(self, calls, warmup, iters, agg, blocking, once):
        """The eager loop: `calls` cycled through, `agg` a iteration."""
        if once:
            t0 = time.perf_counter()
            calls[0]()
            self._sync()
            return np.array([(time.perf_counter() - t0) * 1e6]), np.array([t0 * 1e6])
        return run_loop(self, lambda k: calls[k % len(calls)](), warmup, iters, agg, blocking)

    def close(self):
        if self.dist.is_initialized():
            self.dist.destroy_process_group()
        sys.excepthook = self._excepthook
        self._store = None


# the torch call of each collective; all_gather and reduce_scatter: torch
# 2.13 renamed them (*_single), the old names warn at every call
_CALL_NAMES = {"all_reduce": ("all_reduce",), "reduce": ("reduce",), "broadcast": ("broadcast",),
               "all_gather": ("all_gather_single", "all_gather_into_tensor"),
               "reduce_scatter": ("reduce_scatter_single", "reduce_scatter_tensor"),
               "alltoall": ("all_to_all_single",), "alltoallv": ("all_to_all_single",),
               "sendrecv": ("batch_isend_irecv",), "permute": ("batch_isend_irecv",),
               "gather": ("gather",), "scatter": ("scatter",)}


def _call_name(dist, collective):
    """The name of the torch.distributed function that runs `collective`
    (the newest this torch has)."""
    return next(n for n in _CALL_NAMES[collective] if hasattr(dist, n))


def _wtime_us():
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    return MPI.Wtime() * 1e6


def own_address():
    """This host's address as other hosts reach it: its hostname's, or,
    where that resolves to loopback (Debian maps the hostname to
    127.0.1.1), the source address of its default route (a UDP socket's
    connect sends nothing)."""
    addr = socket.gethostbyname(socket.gethostname())
    if not addr.startswith("127."):
        return addr
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))   # TEST-NET-1: never routed beyond the route lookup
            return s.getsockname()[0]
        except OSError:  # no route at all: one host after all
            return addr


def _span(t):
    a = t.data_ptr()
    return a, a + t.numel() * t.element_size()


def _overlap(a, b):
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def _same(a, b):
    return _span(a) == _span(b)


def _packed(counts, displs):
    """Blocks laid out back to back in rank order from 0."""
    return bool(np.array_equal(displs, np.cumsum(counts) - counts))
