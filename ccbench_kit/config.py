"""One run's parameters: built and validated once, frozen, shipped to every
rank as JSON.

`RunConfig` holds five typed sections, each a frozen dataclass:

- `SweepConfig` (``cfg.sweep``): what is measured: the collective, sizes,
  algorithms, data type, iterations;
- `InputConfig` (``cfg.inputs``): the data and its checks: ``--check``, the
  seed, replica groups, alltoallv counts, permute pairs, coalesced ratios;
- `OutputConfig` (``cfg.output``): the results file and how often it is
  rewritten, the statistics, the command line recorded;
- `LaunchConfig` (``cfg.launch``): ranks, the watchdog's timeout, what to do
  with sizes that don't fit;
- `BackendConfig` (``cfg.backend``): the backend's name and its own options
  (the backend's `Options` dataclass, as a dict; see `backends.base`).

`build` makes one from the keywords of `ccbench_kit.run` (the CLI passes the
same keywords); nothing changes it afterwards.  `RunConfig.replace` makes a
changed copy (another output file, the seed rank 0 drew).
"""
import dataclasses
import hashlib
import json
import secrets
from dataclasses import dataclass, field

from . import collectives
from .dataset.schema import PLACEMENTS
from .dataset.stats import check_stat
from .dtypes import get_dtype, get_op
from .errors import ConfigError
from .units import parse_size, sweep
from .backends.blocking import BLOCKING_MODES
from .backends import backend_class
from .inputs import parse_inputs, split_layout
from .inputs.skew import FLAG, parse_pattern

# Seconds between rewrites of the results file during a sweep (sizes in
# between go to sidecars; see dataset.checkpoint).
DEFAULT_CHECKPOINT_EVERY = 10.0


@dataclass(frozen=True)
class SweepConfig:
    collective: str
    sizes: tuple                     # bytes, each with at least one element per rank
    algorithms: tuple = ("mpi",)
    dtype: str = "fp32"
    op: str = "sum"                  # "none" for collectives that don't reduce
    root: int = 0                    # -1 for collectives without a root
    placements: tuple = PLACEMENTS
    warmup: int = 5
    iters: int = 20
    agg_iters: int = 1
    blocking: int = 0                # nccl-tests -z 0|1|2|3 (BLOCKING_MODES)
    report_cputime: bool = False     # nccl-tests -C: the host's time (the backend's cputime_timing)
    skipped_sizes: tuple = ()        # asked for, but too small for this rank count


@dataclass(frozen=True)
class InputConfig:
    check: str = ""                  # "", "random" or "all_ones"
    seed: int = 0
    unique_buff: bool = False
    # Parsed (and validated) from JSON files or specs by ccbench_kit/inputs/;
    # the harness and collectives only read them.  groups: lists of world
    # ranks, all the same size (() = one group of all); a collective runs on
    # its group, where ranks, roots and the vectors below count within it.
    groups: tuple = ()
    alltoallv: tuple = ()            # per WORLD rank: {send_counts, send_displs,
                                     #  recv_counts, recv_displs} in elements
    pairs: tuple = ()                # permute: [src, dst] pairs of group ranks
    coalesced_ratio: tuple = ()      # --coalesced-cc-size-ratio
    alltoallv_pattern: str = ""      # --alltoallv-pattern (inputs/skew.py), drawn with `seed`


@dataclass(frozen=True)
class OutputConfig:
    out: str = ""
    stats: tuple = ("avg",)
    command: str = ""
    checkpoint_every: float = DEFAULT_CHECKPOINT_EVERY
    per_iter_timing: bool = False    # nccl-tests -I: i_min i_max i_p99 i_cv% and *_per_iter JSON
    per_iter_skip: int = 0           # nccl-tests -K: leading iterations left out of those
    memory_report: bool = False      # nccl-tests -M: the memory usage line


@dataclass(frozen=True)
class LaunchConfig:
    nranks: int = 2
    timeout: float = None            # seconds per call; None: launch.watchdog's default
    skip_oversize: bool = False


@dataclass(frozen=True)
class BackendConfig:
    name: str = "mpi"
    options: dict = field(default_factory=dict)  # the backend's Options, as a dict


_SECTIONS = {"sweep": SweepConfig, "inputs": InputConfig, "output": OutputConfig,
             "launch": LaunchConfig, "backend": BackendConfig}


@dataclass(frozen=True)
class RunConfig:
    sweep: SweepConfig
    inputs: InputConfig = InputConfig()
    output: OutputConfig = OutputConfig()
    launch: LaunchConfig = LaunchConfig()
    backend: BackendConfig = BackendConfig()

    @property
    def collective(self):
        return self.sweep.collective

    @property
    def nranks(self):
        return self.launch.nranks

    def replace(self, **changes):
        """A copy with fields changed, each found in its section:
        ``cfg.replace(out="x.nc", seed=3)``."""
        by_section = {}
        for key, value in changes.items():
            section = next((s for s, cls in _SECTIONS.items()
                            if key in {f.name for f in dataclasses.fields(cls)}), None)
            if section is None:
                raise TypeError(f"RunConfig has no field {key!r}")
            by_section.setdefault(section, {})[key] = value
        return dataclasses.replace(self, **{
            s: dataclasses.replace(getattr(self, s), **kv) for s, kv in by_section.items()})

    def backend_options(self):
        """The backend's validated `Options` (a frozen dataclass)."""
        return backend_class(self.backend.name).make_options(**self.backend.options)

    def record(self):
        """The configuration as one flat dict, for the Dataset's ``config``
        attr (keys as ``ccbench_kit.run``'s keywords name them)."""
        flat = {}
        for name in _SECTIONS:
            if name != "backend":
                flat.update(_plain(dataclasses.asdict(getattr(self, name))))
        flat.update(backend=self.backend.name, backend_options=dict(self.backend.options))
        return flat

    def to_json(self):
        return json.dumps(_plain(dataclasses.asdict(self)), sort_keys=True)

    @classmethod
    def from_json(cls, text):
        d = json.loads(text)
        return cls(**{s: _SECTIONS[s](**{k: _frozen(v) for k, v in d[s].items()})
                      for s in d})

    def digest(self):
        """Hash of the parsed configuration, compared across ranks at start."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]


def _plain(value):
    """Tuples as lists, recursively (JSON's view of the configuration)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _frozen(value):
    """Lists as tuples at the top level of a field (the sections' own view)."""
    return tuple(value) if isinstance(value, list) else value


# -- building one ----------------------------------------------------------------
# The keywords `build` takes (besides collective, nranks and sizes), by the
# section they fill; the suite file and the widgets list them from here.
KEYWORDS = {
    "sweep": ("minbytes", "maxbytes", "stepfactor", "stepbytes", "algorithms", "dtype", "op",
              "root", "placement", "warmup", "iters", "agg_iters", "blocking", "report_cputime"),
    "inputs": ("check", "seed", "unique_buff", "split", "data_parallel_dimension",
               "replica_groups", "alltoallv_metadata", "src_target_pairs", "coalesced_ratio",
               "alltoallv_pattern"),
    "output": ("out", "stats", "command", "checkpoint_every", "per_iter_timing", "per_iter_skip",
               "memory_report"),
    "launch": ("timeout", "skip_oversize"),
    "backend": ("backend", "timing", "backend_options"),
}


def build(collective, nranks=2, sizes=None, **keywords):
    """A validated, frozen `RunConfig` from `ccbench_kit.run`'s keywords.

    Raises ConfigError naming the flag for anything wrong, and TypeError for
    a keyword that is not one (`KEYWORDS` lists them)."""
    known = {k for names in KEYWORDS.values() for k in names}
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r} (run configuration "
                        f"keywords: {', '.join(sorted(known))})")
    kw = {s: {k: keywords[k] for k in names if k in keywords} for s, names in KEYWORDS.items()}
    coll = collectives.get(collective)
    if not isinstance(nranks, int) or nranks < 1:
        raise ConfigError(f"need at least 1 rank, got {nranks}", "-r/--nworkers")
    cputime = _flag01(kw["sweep"].pop("report_cputime", False), "-C/--report_cputime")
    backend = _backend(**kw["backend"], report_cputime=cputime)
    sweep_ = _sweep(coll, nranks, sizes, backend, **kw["sweep"])
    sweep_ = dataclasses.replace(sweep_, report_cputime=cputime)
    output = _output(**kw["output"])
    _check_timing_flags(output, sweep_, backend)
    launch = _launch(nranks, **kw["launch"])
    inputs = _inputs(coll, nranks, sweep_, **kw["inputs"])
    group_size = len(inputs.groups[0]) if inputs.groups else nranks
    if coll.rooted and sweep_.root >= group_size:
        raise ConfigError(f"root {sweep_.root} is not a rank of the replica groups' "
                          f"0..{group_size - 1}", "--root")
    valid, skipped = _sizes_that_fit(coll, sweep_, group_size, inputs.coalesced_ratio)
    sweep_ = dataclasses.replace(sweep_, sizes=valid, skipped_sizes=skipped)
    return RunConfig(sweep_, inputs, output, launch, backend)


def _backend(backend="mpi", timing="", backend_options=None, report_cputime=False):
    cls = backend_class(backend)
    values = dict(backend_options or {})
    if timing:
        values["timing"] = timing
    if report_cputime and cls.cputime_timing != cls.timing:
        # nccl-tests -C: the host's time, which is a timing mode of this backend
        given = values.get("timing") or cls.cputime_timing
        if given != cls.cputime_timing:
            raise ConfigError(f"times with the host clock ({cls.cputime_timing}); not with "
                              f"--timing {given}", "-C/--report_cputime")
        values["timing"] = cls.cputime_timing
    opts = cls.make_options(**values)
    return BackendConfig(backend, dataclasses.asdict(opts))


def _sweep(coll, nranks, sizes, backend, *, minbytes="32M", maxbytes=None, stepfactor=None,
           stepbytes=None, algorithms=None, dtype="fp32", op="sum", root=0, placement="both",
           warmup=5, iters=20, agg_iters=1, blocking=0):
    if sizes is None:
        sizes = sweep(minbytes, maxbytes if maxbytes is not None else minbytes,
                      stepfactor, stepbytes)
    else:
        sizes = [parse_size(s, "sizes") for s in ([sizes] if isinstance(sizes, (int, str))
                                                   else sizes)]
    if not sizes:
        raise ConfigError("no sizes to run", "-b/--minbytes")
    cls = backend_class(backend.name)
    if algorithms is None:  # the library's own: MPI's or NCCL's
        algorithms = [cls.default_algorithm]
    if isinstance(algorithms, str):
        algorithms = [a.strip() for a in algorithms.split(",") if a.strip()]
    dtype = get_dtype(dtype).name
    op = get_op(op) if coll.reduces else "none"
    if coll.rooted and not 0 <= root < nranks:
        raise ConfigError(f"root {root} is not a rank of 0..{nranks - 1}", "--root")
    for name, value, flag, low in (("warmup", warmup, "-w/--warmup_iters", 0),
                                   ("iters", iters, "-n/--iters", 1),
                                   ("agg_iters", agg_iters, "-m/--agg-iters", 1)):
        if not isinstance(value, int) or value < low:
            raise ConfigError(f"must be an integer >= {low}, got {value!r}", flag)
    if isinstance(blocking, bool):  # the API's old blocking=True/False
        blocking = int(blocking)
    if not isinstance(blocking, int) or blocking not in BLOCKING_MODES:
        raise ConfigError(f"must be 0, 1, 2 or 3 (nccl-tests' -z), got {blocking!r}",
                          "-z/--blocking")
    placements = _placements(placement)
    bad = [p for p in placements if p not in PLACEMENTS]
    if bad or not placements:
        raise ConfigError(f"unknown placement {bad[0] if bad else ''!r}; use "
                          "out_of_place, in_place or both", "--placement")
    available = cls.algorithms_for(coll.name)
    if not available:  # e.g. a collective whose line in collectives.def gives no NCCL form
        raise ConfigError(f"{coll.name} does not run on backend {backend.name}; choose "
                          "another backend", "--backend")
    if list(algorithms) == ["all"]:
        algorithms = list(available)
    for a in algorithms:
        if a not in available:
            raise ConfigError(
                f"unknown algorithm {a!r} for {coll.name} on backend {backend.name}; "
                f"choose from {', '.join(available)} or all", "--algorithms")
    return SweepConfig(
        collective=coll.name, sizes=tuple(sizes), algorithms=tuple(dict.fromkeys(algorithms)),
        dtype=dtype, op=op, root=root if coll.rooted else -1, placements=tuple(placements),
        warmup=warmup, iters=iters, agg_iters=agg_iters, blocking=blocking)


def _placements(placement):
    if placement in (None, "both"):
        return list(PLACEMENTS)
    if isinstance(placement, str):
        return [p.strip() for p in placement.replace("-", "_").split(",")]
    return list(placement)


def _inputs(coll, nranks, sweep_, *, check=None, seed=None, unique_buff=False, split=None,
            data_parallel_dimension=None, replica_groups=None, alltoallv_metadata=None,
            src_target_pairs=None, coalesced_ratio=None, alltoallv_pattern=None):
    if check is True:
        check = "random"
    check = check or ""
    if check not in ("", "random", "all_ones"):
        raise ConfigError(f"unknown check {check!r}; use random or all_ones", "-c/--check")
    if check == "random" and seed is None:
        seed = secrets.randbelow(2**31)
    parsed = parse_inputs(coll.name, nranks, split=split,
                          data_parallel_dimension=data_parallel_dimension,
                          replica_groups=replica_groups, alltoallv_metadata=alltoallv_metadata,
                          src_target_pairs=src_target_pairs, coalesced_ratio=coalesced_ratio)
    if alltoallv_pattern:
        if coll.name != "alltoallv" or alltoallv_metadata not in (None, ""):
            raise ConfigError("is for alltoallv without --alltoallv-metadata", FLAG)
        parse_pattern(alltoallv_pattern, nranks)
    return InputConfig(check=check, seed=int(seed or 0), unique_buff=bool(unique_buff),
                       alltoallv_pattern=str(alltoallv_pattern or ""),
                       **{k: tuple(v) for k, v in parsed.items()})


def _output(*, out=None, stats=("avg",), command="", checkpoint_every=None,
            per_iter_timing=False, per_iter_skip=0, memory_report=False):
    per_iter_timing = _flag01(per_iter_timing, "--per_iter_timing")
    memory_report = _flag01(memory_report, "-M/--memory")
    if isinstance(per_iter_skip, bool) or not isinstance(per_iter_skip, int) or per_iter_skip < 0:
        raise ConfigError(f"must be a whole number of iterations >= 0, got {per_iter_skip!r}",
                          "-K/--per_iter_skip")
    if checkpoint_every is None:
        checkpoint_every = DEFAULT_CHECKPOINT_EVERY
    elif not checkpoint_every >= 0:
        raise ConfigError(f"must be a number of seconds >= 0, got {checkpoint_every}",
                          "--checkpoint-every")
    return OutputConfig(out=out or "", stats=tuple(check_stat(s) for s in stats),
                        command=command, checkpoint_every=float(checkpoint_every),
                        per_iter_timing=per_iter_timing, per_iter_skip=per_iter_skip,
                        memory_report=memory_report)


def _flag01(value, flag):
    """nccl-tests' 0/1 switches (-C, -I, -M): 0, 1, False or True."""
    if value in (0, 1) and not isinstance(value, float):
        return bool(value)
    raise ConfigError(f"must be 0 or 1, got {value!r}", flag)


def _check_timing_flags(output, sweep_, backend):
    """-I, -K and -z against each other and the backend's timing, as
    nccl-tests checks them, refused in one line where nccl-tests warns and
    carries on: -K needs -I and leaves at least one iteration; -I needs a
    timing that keeps each iteration, -z one that can wait between
    operations (nccl-tests refuses -I and -z 3 with -G)."""
    skip = output.per_iter_skip
    if skip and not output.per_iter_timing:
        raise ConfigError("needs --per_iter_timing 1 (nccl-tests' -I 1)", "-K/--per_iter_skip")
    if skip >= sweep_.iters:
        raise ConfigError(f"must leave an iteration: 0 to {sweep_.iters - 1} with -n "
                          f"{sweep_.iters}, got {skip}", "-K/--per_iter_skip")
    timing = backend.options.get("timing", "")
    if sweep_.blocking and timing == "graph":
        raise ConfigError("a CUDA graph cannot wait or barrier between its operations; not "
                          "with -G/--timing graph (as nccl-tests refuses -z 3 -G)", "-z/--blocking")
    if output.per_iter_timing and timing in backend_class(backend.name).aggregated_timings:
        raise ConfigError(f"--timing {timing} stores one average per iteration; per-iteration "
                          "timing needs --timing cuda-events or host-enqueue",
                          "--per_iter_timing")


def _launch(nranks, *, timeout=None, skip_oversize=False):
    if timeout is not None and not timeout > 0:
        raise ConfigError(f"must be a positive number of seconds, got {timeout}", "--timeout")
    return LaunchConfig(nranks=nranks, timeout=None if timeout is None else float(timeout),
                        skip_oversize=bool(skip_oversize))


def _sizes_that_fit(coll, sweep_, group_size, coalesced_ratio):
    """(sizes with one element per rank at least, sizes dropped): as
    nccl-tests prints empty rows for them; none left is an error."""
    itemsize = get_dtype(sweep_.dtype).itemsize
    valid, first_error = [], None
    for s in sweep_.sizes:
        try:
            lay = coll.layout(s, itemsize, group_size)
            if coalesced_ratio:
                split_layout(coll, lay.size, itemsize, group_size, list(coalesced_ratio))
            valid.append(s)
        except ConfigError as e:
            first_error = first_error or e
    if not valid:
        raise first_error
    return tuple(valid), tuple(s for s in sweep_.sizes if s not in valid)
