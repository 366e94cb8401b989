"""The backend interface: what the harness may ask of a backend, and nothing else.

A backend decides where buffers live and how one collective is run and
timed.  The harness (`ccbench_kit.harness.Sweep`) drives every backend the
same way, through the members of `Backend` below; it never asks whether a
member exists.  A new backend subclasses `Backend`, fills in the abstract
members, overrides the defaults that differ, and registers its class under a
name (`ccbench_kit.backends.register`, or the ``ccbench_kit.backends`` entry
point group for a separate package).  docs/architecture.md walks through one.

MPI is the control plane of every backend
-----------------------------------------
Whatever moves the data (the MPI engine, NCCL, a numpy loopback), the ranks
are MPI processes and the harness coordinates them over mpi4py's
``COMM_WORLD``: it agrees on the configuration (``allgather``), estimates
clock offsets (ping-pong), splits replica groups (``Split``), counts the ranks
sharing a host (``Split_type(COMM_TYPE_SHARED)``), decides together whether a
size fits (``allreduce``), and gathers every rank's latencies to rank 0
(``gather``).  A backend gets the group's communicator to build its own
(NCCL's unique id is broadcast over it) and the world's to pick devices.

Class side (asked before any rank starts, by the CLI and the API)
-----------------------------------------------------------------
``name``, ``default_algorithm``, ``warms_every_size``, ``host_buffers``,
``aggregated_timings``, ``cputime_timing``,
``Options`` (a frozen dataclass of the backend's own options),
``algorithms_for(collective)``, ``default_algorithms(collective, options)``
(what runs when none is named), ``data_types()`` and ``reduction_ops()``
(what ``-d all`` and ``-o all`` run), ``dtype_refusal(name)`` (a ``-d``
type it has in no version, refused before launch), ``default_preset(ds)``,
``check_local_setup()`` (what the ranks load, before they start here),
``add_arguments(group)`` (its CLI flags), ``options_from_args(args)`` and
``make_options(**values)`` (validated `Options`).

Rank side (one instance per rank, made by the harness)
------------------------------------------------------
``library``, ``device_name``, ``timing``, ``algorithms(collective)``,
``alloc``, ``upload``, ``download``, ``scratch_bytes``, ``scratch``, ``rotating_sets``,
``time``, ``memory_available()``, ``memory_usage(buffer_bytes)``, ``timing_clock``,
``blocking_mode(mode)``, ``dataset_attrs(layouts)``, ``close()``.
"""
import abc
import dataclasses
from typing import ClassVar

from .blocking import BLOCKING_MODES
from ..dtypes import DTYPES, OPS
from ..errors import ConfigError
from ..resources import memory_available


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """The options of a backend that has none."""


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a rank sits on its host: its index among the job's ranks there
    (the GPU it drives, for a backend with one device per rank) and their
    count.  Decided once for the job (`host_placement` on the job's world),
    so that every backend a rank makes (a pair's, a group's, the job's) uses
    the same device."""

    local_rank: int
    local_size: int


def host_placement(comm):
    """The `Placement` of this rank among the ranks of `comm` on its host: an
    MPI shared-memory split, so it holds under mpirun, srun and Dask-MPI
    alike.  A collective over `comm`: every rank of it calls."""
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    shm = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    try:
        return Placement(shm.Get_rank(), shm.Get_size())
    finally:
        shm.Free()


def host_memory_available():
    """Bytes this host may still allocate: MemAvailable, and the cgroup and
    Slurm limits of this process (`resources.memory_available`)."""
    return memory_available()


class Backend(abc.ABC):
    """Base class of every backend; see the module docstring."""

    #: The name ``--backend`` and ``backend=`` take.
    name: ClassVar[str] = ""
    #: The algorithm run when none is asked for: the library's own.
    default_algorithm: ClassVar[str] = ""
    #: True: the harness warms every size up before timing any (nccl-tests'
    #: way; an idle GPU otherwise slows the first sizes down).
    warms_every_size: ClassVar[bool] = False
    #: The frozen dataclass of this backend's options (`make_options`).
    Options: ClassVar[type] = NoOptions
    #: How `time` measures (recorded as the Dataset's ``timing`` attr).
    timing = "host-clock"
    #: True: its buffers live in host memory, so the run measures the host's
    #: memcpy rate (the report's peak: `hostinfo.run_facts`) and preflight
    #: counts its buffers against this host's memory.
    host_buffers: ClassVar[bool] = False
    #: Its `timing` values that time the iterations together and store their
    #: average in every iteration slot (no spread: the report says so and
    #: draws no interval).
    aggregated_timings: ClassVar[tuple] = ()
    #: The `timing` that measures the host's time, as nccl-tests -C 1
    #: (report_cputime) does; equal to `timing` where the host clock is
    #: already the timer (config picks it for ``-C 1``).
    cputime_timing: ClassVar[str] = "host-clock"
    #: The all_reduce algorithm whose busbw is its slowest link's rate (a
    #: ring): the doctor's bisection groups run it.  None: `default_algorithm`.
    ring_algorithm: ClassVar[str] = None
    #: The backend a health check runs a node's own all_reduce through,
    #: where it is not this one: a backend for the network between hosts
    #: names one for the ranks of a host (tcp: mpi, whose ranks poll, so a
    #: node whose cores are taken shows it).  None: this backend.
    node_backend: ClassVar[str] = None
    #: (name, value) pairs ``--debug`` puts in the ranks' environment where
    #: the user set no such variable: the library's own log (NCCL's).
    debug_env: ClassVar[tuple] = ()

    # -- class side -----------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def algorithms_for(cls, collective):
        """Algorithm names this backend runs `collective` with, without
        starting MPI or opening a device; [] for a collective it lacks."""

    @classmethod
    def phase_algorithms(cls, collective):
        """{algorithm: (whole algorithm, phase)} of the algorithms that time
        one phase of another's work alone (the nccl backend's
        ``oneshot:launch``).  ``--algorithms`` takes them and ``all`` does
        not; their output is not the collective's, so they are never checked
        and never a winner: the report shows them as where the whole one's
        time goes.  {} (the default): none."""
        return {}

    @classmethod
    def default_algorithms(cls, collective, options):
        """The algorithms run when none is asked for, with these `options`
        (a dict of `Options`' fields): ``[default_algorithm]``."""
        return [cls.default_algorithm]

    @classmethod
    def data_types(cls):
        """The data type names this backend runs (``-d all`` runs each)."""
        return tuple(DTYPES)

    @classmethod
    def dtype_refusal(cls, name):
        """Why this backend cannot run data type `name` (one line, as the
        error says it), or None where it can or only a rank can tell (a
        library version).  Checked before launch and again on the ranks
        (`check_dtype`)."""
        return None

    @classmethod
    def check_dtype(cls, name):
        """ConfigError naming -d where `dtype_refusal` says why not."""
        refusal = cls.dtype_refusal(name)
        if refusal:
            raise ConfigError(refusal, "-d/--datatype")

    @classmethod
    def reduction_ops(cls):
        """The reduction op names this backend runs (``-o all`` runs each)."""
        return tuple(OPS)

    @classmethod
    def default_preset(cls, ds):
        """The theory preset (`theory.presets`) a report takes for `ds`, a
        run of this backend, under ``--theory auto``; None where no preset is
        safe (the network decides)."""
        return None

    @classmethod
    def doctor_ranks_per_node(cls, remote):
        """Ranks a node runs in a health check (``ccbench doctor``) when the
        user gives none: 2 (the local check's all_reduce needs two).  A
        backend of one rank per device says its devices; `remote`: the nodes
        are not this host.  ConfigError where it cannot tell."""
        return 2

    @classmethod
    def doctor_check(cls, remote):
        """ConfigError, before a health check, where this host cannot run
        this backend's ranks (`remote`: the nodes are elsewhere)."""

    @classmethod
    def check_local_setup(cls):
        """Raise, before any rank starts here, where this host lacks what
        this backend's ranks load (a library): the machine's setup, exit 2,
        not a run that failed.  Default: nothing to check."""

    @classmethod
    def doctor_env(cls, pair_bytes):
        """Environment variables for the ranks of a health check whose pairs
        exchange `pair_bytes` each way (default: none)."""
        return {}

    @classmethod
    def add_arguments(cls, group):
        """Add this backend's flags to `group` (an argparse group of
        ``ccbench run``).  Flags are shared by every backend's parser: name
        them after the backend where they could clash."""

    @classmethod
    def options_from_args(cls, args):
        """{option: value} for this backend's flags given on the command
        line (flags left at their default are left out)."""
        return {}

    @classmethod
    def make_options(cls, **values):
        """The validated `Options`; ConfigError, naming the flag, for a
        value this backend can't take or an option it doesn't have."""
        known = {f.name: f for f in dataclasses.fields(cls.Options)}
        for key in values:
            if key not in known:
                raise ConfigError(f"the {cls.name} backend has no option {key!r}"
                                  + (f"; its options: {', '.join(known)}" if known else ""),
                                  "--backend")
        return cls.Options(**values)

    # -- rank side ------------------------------------------------------------
    def __init__(self, comm, options=None, world=None, placement=None):
        """`comm` runs the collectives (a replica group's communicator);
        `world` spans every rank of the job (default `comm`); `placement`
        (a `Placement`), where the rank sits on its host when the caller
        decided it once for the job (default: a backend that needs it
        splits `world`, a collective over every rank of `world`)."""
        self.comm = comm
        self.world = world if world is not None else comm
        self.placement = placement
        self.options = options if options is not None else self.make_options()

    @property
    @abc.abstractmethod
    def library(self):
        """One line naming the library and its version (the ``library`` attr)."""

    @property
    @abc.abstractmethod
    def device_name(self):
        """This rank's device, as the Dataset's ``device`` coordinate shows it."""

    def algorithms(self, collective):
        """Algorithms available on this rank (default: `algorithms_for`)."""
        return self.algorithms_for(collective)

    @abc.abstractmethod
    def alloc(self, nelems, dtype):
        """A buffer of `nelems` elements of `dtype` (a `dtypes.DType`); it
        supports ``len``, slicing and, for in-place layouts, views."""

    @abc.abstractmethod
    def upload(self, buf, host):
        """Copy the numpy array `host` into `buf`."""

    @abc.abstractmethod
    def download(self, buf):
        """`buf`'s contents as a new numpy array."""

    def scratch_bytes(self, collective, algorithm, count, dtype, nranks):
        """Bytes of scratch an algorithm needs besides send and receive."""
        return 0

    def scratch(self, collective, algorithm, count, dtype, nranks):
        """The scratch buffer itself (None when it needs none)."""
        return None

    def rotating_sets(self, set_bytes, operations):
        """Buffer sets (of `set_bytes` each) the timed loop should cycle
        through so that no iteration finds its data in a cache (IMB's
        -off_cache); 1: one set, reused."""
        return 1

    @abc.abstractmethod
    def time(self, collective, algorithm, buffers, *, count, dtype, op, root, warmup, iters,
             agg=1, blocking=0, progress=None, once=False, **vectors):
        """Per-iteration latency and local start (µs, ``MPI.Wtime``'s clock),
        two arrays of `iters` values; NaN where the backend refuses this
        algorithm.

        `buffers`: (send, recv, scratch[, count]) sets the iterations cycle
        through; `agg` calls make one iteration; `blocking`: nccl-tests' -z
        mode, 0 to 3 (`ccbench_kit.backends.blocking.BLOCKING_MODES`);
        `progress`: the two int64 counters (entered, left) of this rank's
        row of the progress board, or None; `once`: the checked call,
        exactly one, unwarmed; `vectors`: the collective's per-rank counts
        and peers (`collectives.base.Collective.engine_vectors`)."""

    def memory_available(self):
        """Bytes this host's ranks can still allocate for buffers (the
        harness compares one rank's need times the ranks on the host)."""
        return host_memory_available()

    @property
    def timing_clock(self):
        """Which clock `time` reads, in words (the ``timing_clock`` attr)."""
        return "host: MPI_Wtime around each iteration's calls"

    def blocking_mode(self, mode):
        """What -z `mode` did on this backend, in words (the ``blocking_mode`` attr)."""
        return BLOCKING_MODES[int(mode)]

    def memory_usage(self, buffer_bytes):
        """nccl-tests -M's entries, {name: bytes} in print order, for this
        rank; `buffer_bytes`: the most bytes of buffers the harness held for
        one timed call (nccl-tests' User-Allocated)."""
        return {"User-Allocated": int(buffer_bytes)}

    def dataset_attrs(self, layouts):
        """Attrs this backend adds to the Dataset (rank 0), e.g. versions and
        what the library ran; `layouts` are the sizes done."""
        return {}

    def check_algorithms(self, collective, algorithms):
        """Raise ConfigError, before any size, when none of `algorithms` can
        run here at all (default: every one can; one that cannot is refused
        at its size, the others still measured)."""

    def begin_part(self):
        """A part of the job starts on this backend (`session.Session` keeps
        one instance for every part of a job): forget what the previous part
        recorded for its Dataset's attrs, keep communicators and buffers."""

    def close(self):
        """Free buffers, communicators and devices."""
