"""One run's parameters: built and validated once, frozen, shipped to every
rank as JSON.

`RunConfig` holds five typed sections, each a frozen dataclass (made from
`run_fields` by `make_section`, but for `BackendConfig`):

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
from .dtypes import get_dtype, get_op
from .errors import ConfigError
from .units import parse_size, sweep
from .backends import backend_class
from .inputs import parse_inputs, split_layout
from .inputs.skew import FLAG, parse_pattern
from . import run_fields
from .run_fields import default


def make_section(section):
    """The frozen dataclass of one `RunConfig` section (`SECTION_SHAPES`): the
    attributes `build` works out from the keywords, then one attribute for
    every `run_fields` field of `section` stored as given, its default the
    table's (through the field's check), in table order.  A new field is
    therefore an attribute of its section with no edit here."""
    cls_name, doc, computed, made_from = SECTION_SHAPES[section]
    declared = {c[0] for c in computed}
    stored = [(f.name, object, field(default=f.validate(f.default)))
              for f in run_fields.in_section(section)
              if f.name not in declared and f.name not in made_from]
    return dataclasses.make_dataclass(cls_name, [*computed, *stored], frozen=True,
                                      namespace={"__doc__": doc, "__module__": __name__})


# Each section's shape: (class name, docstring, the attributes `build`
# works out itself as (name, type[, default]), the keywords it turns into
# them and does not store).  The fields stored as given come from
# `run_fields` (`make_section`).
SECTION_SHAPES = {
    "sweep": ("SweepConfig", "What is measured: the collective, sizes, algorithms, data type.", [
        ("collective", str),
        ("sizes", tuple),                # bytes, each with at least one element per rank
        ("algorithms", tuple, ("mpi",)),
        ("dtype", str, default("dtype")),
        ("op", str, default("op")),      # "none" for collectives that don't reduce
        ("root", int, 0),                # -1 for collectives without a root
        ("placements", tuple, PLACEMENTS),
        ("skipped_sizes", tuple, ()),    # asked for, but too small for this rank count
    ], ("minbytes", "maxbytes", "stepfactor", "stepbytes", "placement")),
    "inputs": ("InputConfig", "The data and its checks.", [
        ("check", str, ""),              # "", "random" or "all_ones"
        ("seed", int, 0),
        # Parsed (and validated) from JSON files or specs by ccbench_kit/inputs/;
        # the harness and collectives only read them.  groups: lists of world
        # ranks, all the same size (() = one group of all); a collective runs on
        # its group, where ranks, roots and the vectors below count within it.
        ("groups", tuple, ()),
        ("alltoallv", tuple, ()),        # per WORLD rank: {send_counts, send_displs,
                                         #  recv_counts, recv_displs} in elements
        ("pairs", tuple, ()),            # permute: [src, dst] pairs of group ranks
        ("coalesced_ratio", tuple, ()),  # --coalesced-cc-size-ratio
        ("alltoallv_pattern", str, ""),  # --alltoallv-pattern (inputs/skew.py), drawn with `seed`
    ], ("split", "data_parallel_dimension", "replica_groups", "alltoallv_metadata",
        "src_target_pairs")),
    "output": ("OutputConfig", "The results file, its statistics and the command "
               "recorded.", [], ()),
    "launch": ("LaunchConfig", "Ranks, the watchdog's timeout, sizes that don't fit.",
               [("nranks", int, 2)], ()),
}

SweepConfig = make_section("sweep")
InputConfig = make_section("inputs")
OutputConfig = make_section("output")
LaunchConfig = make_section("launch")


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
# section they fill: `run_fields` declares them (flag, default, help, check),
# and `build` asks it on every call.
KEYWORDS = run_fields.by_section()


def build(collective, nranks=2, sizes=None, **keywords):
    """A validated, frozen `RunConfig` from `ccbench_kit.run`'s keywords.

    Raises ConfigError naming the flag for anything wrong, and TypeError for
    a keyword that is not one (`KEYWORDS` lists them)."""
    sections = run_fields.by_section()
    known = {k for names in sections.values() for k in names}
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r} (run configuration "
                        f"keywords: {', '.join(sorted(known))})")
    kw = {s: {k: keywords.get(k, run_fields.default(k)) for k in names}
          for s, names in sections.items()}
    coll = collectives.get(collective)
    nranks = run_fields.ranks(nranks, "nranks" if not isinstance(nranks, int)
                              or isinstance(nranks, bool) else "-r/--nworkers")
    cputime = run_fields.get("report_cputime").validate(kw["sweep"]["report_cputime"])
    backend = _backend(**kw["backend"], report_cputime=cputime)
    sweep_ = _sweep(coll, nranks, sizes, backend, **kw["sweep"])
    output = _stored(OutputConfig, kw["output"])
    _check_timing_flags(output, sweep_, backend)
    launch = _stored(LaunchConfig, kw["launch"], nranks=nranks)
    inputs = _inputs(coll, nranks, sweep_, **kw["inputs"])
    group_size = len(inputs.groups[0]) if inputs.groups else nranks
    if coll.rooted and sweep_.root >= group_size:
        raise ConfigError(f"root {sweep_.root} is not a rank of the replica groups' "
                          f"0..{group_size - 1}", "--root")
    valid, skipped = _sizes_that_fit(coll, sweep_, group_size, inputs.coalesced_ratio)
    sweep_ = dataclasses.replace(sweep_, sizes=valid, skipped_sizes=skipped)
    return RunConfig(sweep_, inputs, output, launch, backend)


def _stored(section, values, **computed):
    """A `section` (a config dataclass) from its keywords' values, each
    through its field's check (`run_fields`), and the values `computed` from
    them here.  A new field of the section needs nothing more here."""
    names = {f.name for f in dataclasses.fields(section)}
    homeless = sorted(set(values) - names - set(computed))
    if homeless:  # a field added to run_fields after its section was made (make_section)
        raise TypeError(f"{section.__name__} has no attribute {homeless[0]!r}")
    checked = {k: run_fields.get(k).validate(v) for k, v in values.items() if k not in computed}
    return section(**checked, **computed)


def _backend(backend, timing, backend_options, report_cputime=False):
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


def _sweep(coll, nranks, sizes, backend, *, minbytes, maxbytes, stepfactor, stepbytes,
           algorithms, dtype, op, root, placement, **plain):
    if sizes is None:
        sizes = sweep(minbytes, maxbytes if maxbytes is not None else minbytes,
                      stepfactor, stepbytes)
    else:
        sizes = [parse_size(s, "sizes") for s in ([sizes] if isinstance(sizes, (int, str))
                                                   else sizes)]
    if not sizes:
        raise ConfigError("no sizes to run", "-b/--minbytes")
    cls = backend_class(backend.name)
    if algorithms is None:  # the library's own: MPI's or NCCL's (or what -D picks)
        algorithms = cls.default_algorithms(coll.name, backend.options)
    if isinstance(algorithms, str):
        algorithms = [a.strip() for a in algorithms.split(",") if a.strip()]
    dtype = get_dtype(dtype).name
    cls.check_dtype(dtype)  # said before launch, not by every rank after it
    op = get_op(op) if coll.reduces else "none"
    if coll.rooted and not (isinstance(root, int) and not isinstance(root, bool)
                            and 0 <= root < nranks):
        raise ConfigError(f"root {root!r} is not a rank of 0..{nranks - 1}", "--root")
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
    phases = cls.phase_algorithms(coll.name)
    for a in algorithms:
        if a not in available and a not in phases:
            raise ConfigError(
                f"unknown algorithm {a!r} for {coll.name} on backend {backend.name}; "
                f"choose from {', '.join([*available, *phases])} or all", "--algorithms")
    return _stored(SweepConfig, plain,
                   collective=coll.name, sizes=tuple(sizes),
                   algorithms=tuple(dict.fromkeys(algorithms)), dtype=dtype, op=op,
                   root=root if coll.rooted else -1, placements=tuple(placements))


def _placements(placement):
    if placement in (None, "both"):
        return list(PLACEMENTS)
    if isinstance(placement, str):
        return [p.strip() for p in placement.replace("-", "_").split(",")]
    return list(placement)


def _inputs(coll, nranks, sweep_, *, check, seed, split, data_parallel_dimension,
            replica_groups, alltoallv_metadata, src_target_pairs, coalesced_ratio,
            alltoallv_pattern, **plain):
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
    return _stored(InputConfig, plain, check=check, seed=int(seed or 0),
                   alltoallv_pattern=str(alltoallv_pattern or ""),
                   **{k: tuple(v) for k, v in parsed.items()})


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
