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
import numbers
import secrets
from dataclasses import dataclass, field

from . import collectives
from .dataset.schema import PLACEMENTS
from .dataset.stats import check_stat
from .dtypes import get_dtype, get_op
from .errors import ConfigError
from .units import parse_size, sweep
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
    blocking: bool = False
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
              "root", "placement", "warmup", "iters", "agg_iters", "blocking"),
    "inputs": ("check", "seed", "unique_buff", "split", "data_parallel_dimension",
               "replica_groups", "alltoallv_metadata", "src_target_pairs", "coalesced_ratio",
               "alltoallv_pattern"),
    "output": ("out", "stats", "command", "checkpoint_every"),
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
    backend = _backend(**kw["backend"])
    sweep_ = _sweep(coll, nranks, sizes, backend, **kw["sweep"])
    output = _output(**kw["output"])
    launch = _launch(nranks, **kw["launch"])
    inputs = _inputs(coll, nranks, sweep_, **kw["inputs"])
    group_size = len(inputs.groups[0]) if inputs.groups else nranks
    if coll.rooted and sweep_.root >= group_size:
        raise ConfigError(f"root {sweep_.root} is not a rank of the replica groups' "
                          f"0..{group_size - 1}", "--root")
    valid, skipped = _sizes_that_fit(coll, sweep_, group_size, inputs.coalesced_ratio)
    sweep_ = dataclasses.replace(sweep_, sizes=valid, skipped_sizes=skipped)
    return RunConfig(sweep_, inputs, output, launch, backend)


def _backend(backend="mpi", timing="", backend_options=None):
    cls = backend_class(backend)
    values = dict(backend_options or {})
    if timing:
        values["timing"] = timing
    opts = cls.make_options(**values)
    return BackendConfig(backend, dataclasses.asdict(opts))


def _sweep(coll, nranks, sizes, backend, *, minbytes="32M", maxbytes=None, stepfactor=None,
           stepbytes=None, algorithms=None, dtype="fp32", op="sum", root=0, placement="both",
           warmup=5, iters=20, agg_iters=1, blocking=False):
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
    if coll.rooted and not (isinstance(root, int) and not isinstance(root, bool)
                            and 0 <= root < nranks):
        raise ConfigError(f"root {root!r} is not a rank of 0..{nranks - 1}", "--root")
    for name, value, flag, low in (("warmup", warmup, "-w/--warmup_iters", 0),
                                   ("iters", iters, "-n/--iters", 1),
                                   ("agg_iters", agg_iters, "-m/--agg-iters", 1)):
        if not isinstance(value, int) or value < low:
            raise ConfigError(f"must be an integer >= {low}, got {value!r}", flag)
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
        warmup=warmup, iters=iters, agg_iters=agg_iters, blocking=bool(blocking))


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


def _is_number(value):
    """A real number, not a bool nor a string ("5" from the API is refused
    in one line, not compared with 0 in a TypeError)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _output(*, out=None, stats=("avg",), command="", checkpoint_every=None):
    if checkpoint_every is None:
        checkpoint_every = DEFAULT_CHECKPOINT_EVERY
    elif not (_is_number(checkpoint_every) and checkpoint_every >= 0):
        raise ConfigError(f"must be a number of seconds >= 0, got {checkpoint_every!r}",
                          "--checkpoint-every")
    return OutputConfig(out=out or "", stats=tuple(check_stat(s) for s in stats),
                        command=command, checkpoint_every=float(checkpoint_every))


def _launch(nranks, *, timeout=None, skip_oversize=False):
    if timeout is not None and not (_is_number(timeout) and timeout > 0):
        raise ConfigError(f"must be a positive number of seconds, got {timeout!r}", "--timeout")
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
