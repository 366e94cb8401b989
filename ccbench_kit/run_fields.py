"""The keywords of a run, each declared once: its flag, default, help and check.

Every keyword of `ccbench_kit.run` that sets up the sweep is one `Field`
here.  What reads this table:

- ``ccbench run``'s parser adds one flag per field with flags, in this
  order, in the field's help group (`cli.run`);
- `config.build` takes each field's default and check from here, and
  `config.KEYWORDS` (the keywords `make_config` takes) is this table's
  fields by `RunConfig` section;
- a suite file's ``run:`` keys are the fields with ``suite=True``
  (`suite.spec`);
- the notebook's Run panel names the fields it shows (`widgets.run_panel`).

- `config`'s section dataclasses have an attribute for each field stored
  as given (`config.make_section`).

Adding a sweep-level flag is therefore one `Field` here and the code that
uses it (see "A sweep-level flag" in docs/architecture.md).

A field's `check` takes the value as the Python API receives it (after the
CLI's `type` parsed the flag's text) and returns the value stored, or raises
ConfigError naming the flag.  Keywords with checks that need other keywords
(sizes, the root, the algorithms, the data type) have none here: `config`
checks them together.
"""
import numbers
import os
from dataclasses import dataclass, field

from . import argtypes as T
from .dataset.stats import check_stat
from .backends.blocking import BLOCKING_MODES
from .errors import ConfigError

# Seconds between rewrites of the results file during a sweep (sizes in
# between go to sidecars; see dataset.checkpoint).
DEFAULT_CHECKPOINT_EVERY = 10.0

# the sections a field fills: RunConfig's, and REPEAT for the keywords of
# `ccbench_kit.run` that run the whole configuration several times
SECTIONS = ("sweep", "inputs", "output", "launch", "backend")
REPEAT = "repeat"
# where and how the ranks start: keywords of `ccbench_kit.run` that choose
# the hosts (flags shared by ``ccbench run``, ``cluster start`` and
# ``doctor``) and the launcher (`api.LAUNCH_KEYWORDS`)
PLACE = "place"

# ``ccbench run --help``'s groups, in order
SIZES = "sizes"
ITERATIONS = "iterations"
DATA = "data"
GROUPS = "replica groups (run concurrently; at most one of these)"
BACKEND = "algorithms and backend"
OUTPUT = "output"
HOSTS = "hosts and Slurm"


@dataclass(frozen=True)
class Field:
    """One keyword of `ccbench_kit.run`, and the flag of ``ccbench run`` for it.

    Parameters
    ----------
    name : str
        The keyword (also the flag's argparse ``dest`` and the suite's key).
    section : str
        The `RunConfig` section it fills (`SECTIONS`), or `REPEAT`.
    flags : tuple of str
        The CLI's spellings; none: a keyword of the Python API alone.
    help : str
        ``--help``'s text (argparse's ``%`` escapes).
    default : object
        The value when the keyword is not given (the flag's default too).
    type : callable, optional
        argparse's ``type=`` for the flag's text (`argtypes`).
    check : callable, optional
        ``check(value, flag)``: the value stored, or ConfigError naming `flag`.
    group : str
        The ``--help`` group the flag is listed in.
    cli : dict
        More argparse keywords: metavar, nargs, choices, const, action.
    suite : bool
        Whether a suite file's ``run:`` may set it.
    """

    name: str
    section: str
    flags: tuple
    help: str = ""
    default: object = None
    type: object = None
    check: object = None
    group: str = ""
    cli: dict = field(default_factory=dict)
    suite: bool = True

    @property
    def flag(self):
        """The flag as error lines name it: ``-n/--iters``, or the first long
        spelling alone where there is no short one (``--per_iter_timing``)."""
        if not self.flags:
            return self.name
        return self.flags[0] if self.flags[0].startswith("--") else "/".join(self.flags[:2])

    def validate(self, value):
        """`value` checked (and normalised) by the field's `check`."""
        return self.check(value, self.flag) if self.check else value

    def argparse_keywords(self):
        """``add_argument``'s keywords for the flag."""
        kw = dict(dest=self.name, default=self.default, help=self.help, **self.cli)
        if self.type is not None:
            kw["type"] = self.type
        return kw


# -- checks of values given to the Python API ---------------------------------------

def integer_at_least(low):
    def check(value, flag):
        if not isinstance(value, int) or value < low:
            raise ConfigError(f"must be an integer >= {low}, got {value!r}", flag)
        return value
    return check


def boolean(value, flag):
    return bool(value)


def flag01(value, flag):
    """nccl-tests' 0/1 switches (-C, -I, -M): 0, 1, False or True."""
    if value in (0, 1) and not isinstance(value, float):
        return bool(value)
    raise ConfigError(f"must be 0 or 1, got {value!r}", flag)


def blocking_mode(value, flag):
    """nccl-tests' -z: 0, 1, 2 or 3 (the API's old True/False as 1/0)."""
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int) or value not in BLOCKING_MODES:
        raise ConfigError(f"must be 0, 1, 2 or 3 (nccl-tests' -z), got {value!r}", flag)
    return value


def whole_iterations(value, flag):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"must be a whole number of iterations >= 0, got {value!r}", flag)
    return value


def text_or_empty(value, flag):
    """A path (text or os.PathLike) as text, "" when not given; anything
    else (``out=123``) is refused naming the keyword."""
    if value is None or value == "":
        return ""
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"{value!r} is {_a(value)}, not a path", flag)
    return os.fspath(value)


def ranks(value, flag):
    """A number of ranks: a whole number of at least 1.  A bool or text
    (``ccb.run("all_reduce", "2")``) is refused as what it is, not
    compared with 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{value!r} is {_a(value)}, not a whole number of "
                          "ranks (an int: ccb.run(\"all_reduce\", 2))", flag)
    if value < 1:
        raise ConfigError(f"need at least 1 rank, got {value}", flag)
    return int(value)


def environment(value, flag):
    """The ranks' extra environment: {name: value}, both text (a number is
    refused, not turned into text: os.environ would refuse it later, in a
    traceback)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(f"{_short(value)} is {_a(value)}, not a dict of "
                          "variables ({\"NAME\": \"value\"})", flag)
    for k, v in value.items():
        if not isinstance(k, str) or not k or "=" in k or "\0" in k:
            raise ConfigError(f"{_short(k)} is not a variable name", flag)
        if not isinstance(v, str):
            raise ConfigError(f"{k}={_short(v)} is {_a(v)}, not text; give "
                              f"{k}={_short(str(v))}", flag)
        if "\0" in v:
            raise ConfigError(f"{k}: a NUL character cannot go in the environment", flag)
        if len(f"{k}={v}".encode(errors="surrogateescape")) + 1 > ENV_ENTRY_MAX:
            raise ConfigError(f"{k}: a value of {len(v.encode(errors='surrogateescape')):,} "
                              f"bytes cannot be passed to a process (Linux takes at most "
                              f"{ENV_ENTRY_MAX:,} bytes for one variable, its name included)",
                              flag)
    total = sum(len(f"{k}={v}".encode(errors="surrogateescape")) + 1 for k, v in value.items())
    if total > env_total_max():
        raise ConfigError(f"the variables take {total:,} bytes, more than the "
                          f"{env_total_max():,} a launch can pass besides its own command line "
                          "and environment (half of ARG_MAX)", flag)
    return value


#: Linux's MAX_ARG_STRLEN: 32 pages, the most one argument or environment
#: entry ("NAME=value" and its NUL) may take in an exec; past it the launch
#: fails with "Argument list too long"
ENV_ENTRY_MAX = 32 * 4096


def env_total_max():
    """Bytes the extra variables may take in all: half of ARG_MAX (the
    exec's arguments and environment together), the rest left to the
    launcher's command line and the environment it inherits."""
    try:
        return os.sysconf("SC_ARG_MAX") // 2
    except (OSError, ValueError):
        return 1 << 20


def _a(value):
    """'a str', 'an int': the type of `value` with its article."""
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def statistics(value, flag):
    return tuple(check_stat(s) for s in value)


def _is_number(value):
    """A real number, not a bool nor a string ("5" from the API is refused
    in one line, not compared with 0 in a TypeError)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def positive_seconds(value, flag):
    if value is None:
        return None
    if not (_is_number(value) and value > 0):
        raise ConfigError(f"must be a positive number of seconds, got {value!r}", flag)
    return float(value)


def checkpoint_seconds(value, flag):
    if value is None:
        return DEFAULT_CHECKPOINT_EVERY
    if not (_is_number(value) and value >= 0):
        raise ConfigError(f"must be a number of seconds >= 0, got {value!r}", flag)
    return float(value)


# -- the table -------------------------------------------------------------------------
# why one long list: one entry per keyword, in --help's order; each entry is
# everything the CLI, the API, the suite file and the widgets know of it.
FIELDS = (
    Field("minbytes", "sweep", ("-b", "--minbytes"), "first size (8, 1K, 64M, 1kb, 1MB...)",
          default="32M", type=T.text("a size"), group=SIZES),
    Field("maxbytes", "sweep", ("-e", "--maxbytes"), "last size (default: minbytes)",
          type=T.text("a size"), group=SIZES),
    Field("stepfactor", "sweep", ("-f", "--stepfactor"), "multiply the size by this each step",
          type=T.text("a factor"), group=SIZES),
    Field("stepbytes", "sweep", ("-i", "--stepbytes"), "add this many bytes each step",
          type=T.text("a size"), group=SIZES),
    Field("iters", "sweep", ("-n", "--iters"), "measured iterations (default 20)",
          default=20, type=T.iterations, check=integer_at_least(1), group=ITERATIONS),
    Field("warmup", "sweep", ("-w", "--warmup_iters", "--warmup-iters"),
          "warm-up iterations, not returned (default 5)",
          default=5, type=T.warmup_iterations, check=integer_at_least(0), group=ITERATIONS),
    Field("cycles", REPEAT, ("--cycles",),
          "run the whole sweep N times, as nccl-tests -N; each cycle's table is printed and "
          "every cycle's iterations kept (coordinate cycle)",
          default=1, type=int, group=ITERATIONS, cli={"metavar": "N"}, suite=False),
    Field("job_per_cycle", REPEAT, ("--job-per-cycle",),
          "with --cycles: a fresh job (launch, MPI init, communicators) for each cycle, so the "
          "spread between cycles includes start-up; by default all cycles run in one job, as "
          "nccl-tests -N does in one process",
          default=False, check=boolean, group=ITERATIONS, cli={"action": "store_true"},
          suite=False),
    Field("until_stable", REPEAT, ("--until-stable",),
          "run a size again (-n more iterations a round) until the 95%% CI of its mean time "
          "is within ±HALF_WIDTH (0.05 = 5%%) or --stable-cap",
          type=float, group=ITERATIONS, cli={"metavar": "HALF_WIDTH"}, suite=False),
    Field("stable_cap", REPEAT, ("--stable-cap",),
          "most iterations per size for --until-stable (default 10 x -n)",
          type=int, group=ITERATIONS, cli={"metavar": "N"}, suite=False),
    Field("agg_iters", "sweep", ("-m", "--agg-iters"),
          "operations aggregated into one timed iteration",
          default=1, type=T.int_in(1, 10**6), check=integer_at_least(1), group=ITERATIONS),
    Field("blocking", "sweep", ("-z", "--blocking"),
          "as nccl-tests: 1 a barrier after every operation (timed), 2 a wait after every "
          "operation, 3 a wait and barrier after every iteration (not timed); default 0",
          default=0, type=int, check=blocking_mode, group=ITERATIONS,
          cli={"choices": BLOCKING_MODES}),
    # nccl-tests 2.19's -C, -I, -K (docs/parity.md); -I is nccom-test's
    # --neff_iters, so -I is spelled long only
    Field("report_cputime", "sweep", ("-C", "--report_cputime"),
          "1: time with the host clock as nccl-tests' cputime (nccl: each iteration's "
          "enqueue; mpi: its clock already); the column says cputime",
          default=False, type=int, check=flag01, group=ITERATIONS, cli={"choices": (0, 1)}),
    Field("per_iter_timing", "output", ("--per_iter_timing", "--per-iter-timing"),
          "nccl-tests -I: per-iteration columns i_min i_max i_p99 i_cv%% (of each "
          "iteration's max over ranks) and the JSON *_per_iter blocks",
          default=False, type=int, check=flag01, group=ITERATIONS, cli={"choices": (0, 1)}),
    Field("per_iter_skip", "output", ("-K", "--per_iter_skip", "--per-iter-skip"),
          "nccl-tests -K: leave the first K iterations out of the per-iteration statistics "
          "(the file and times_us keep them); needs --per_iter_timing 1",
          default=0, type=T.non_negative, check=whole_iterations, group=ITERATIONS),
    Field("dtype", "sweep", ("-d", "--datatype"),
          "fp32, bf16, int8... (nccl-tests names too); several, comma-separated, or all "
          "(every type the backend has) run one after another into one results file",
          default="fp32", type=T.text("a data type"), group=DATA),
    Field("op", "sweep", ("-o", "--op"),
          "sum, prod, min, max, avg; several, comma-separated, or all run one after "
          "another into one results file", default="sum", type=T.text("an op"), group=DATA),
    Field("root", "sweep", ("--root",), "root rank of rooted collectives",
          default=0, type=T.non_negative, group=DATA),
    Field("check", "inputs", ("-c", "--check"),
          "check results against numpy (nccl-tests' -c 1 = random, -c 0 = off)",
          group=DATA, cli={"nargs": "?", "const": "random",
                           "choices": ("random", "all_ones", "0", "1")}),
    Field("seed", "inputs", ("--seed",), "seed for --check random", type=T.seed, group=DATA),
    Field("placement", "sweep", ("--placement",), "out_of_place, in_place or both",
          default="both", type=T.text("a placement"), group=DATA),
    Field("unique_buff", "inputs", ("--unique-buff",),
          "a different buffer set for every operation (up to 1 GiB per rank)",
          default=False, check=boolean, group=DATA, cli={"action": "store_true"}),
    Field("coalesced_ratio", "inputs", ("--coalesced-cc-size-ratio",),
          "run each operation as coalesced parts, e.g. [1,2,1]",
          group=DATA, cli={"nargs": "+", "metavar": "RATIO"}),
    Field("alltoallv_metadata", "inputs", ("--alltoallv-metadata",),
          "alltoallv counts and displacements (nccom-test's format)",
          group=DATA, cli={"metavar": "JSON"}),
    Field("alltoallv_pattern", "inputs", ("--alltoallv-pattern",),
          "alltoallv: skewed traffic (MoE-like) drawn with --seed: uniform weights, Zipf with "
          "exponent S over a random popularity order, or one hot rank R with F times the "
          "weight (default F = ranks)",
          group=DATA, cli={"metavar": "uniform|zipf:S|hot:R[:F]"}),
    Field("src_target_pairs", "inputs", ("--custom-src-target-pairs",),
          "permute's [src, target] pairs (nccom-test's format)",
          group=DATA, cli={"metavar": "JSON"}),
    Field("split", "inputs", ("--split",),
          "NCCL_TESTS_SPLIT syntax: 'AND 0x7', 'MOD 8', 'DIV 4', 'OR 1', '%%8'...; the "
          "variable applies when no flag is given",
          type=T.text("a split spec"), group=GROUPS, cli={"metavar": "SPEC"},
          suite=False),  # a suite's matrix.split / split_mask sets it
    Field("data_parallel_dimension", "inputs", ("--data-parallel-dimension",),
          "groups of D ranks, nranks/D apart", type=T.positive, group=GROUPS,
          cli={"metavar": "D"}),
    Field("replica_groups", "inputs", ("--custom-replica-group",),
          '{"replica_groups": [[0, 1], [2, 3]]}', group=GROUPS, cli={"metavar": "JSON"}),
    Field("algorithms", "sweep", ("--algorithms",),
          "comma-separated, or all (default: the library's own, mpi or nccl)",
          type=T.name_list("algorithm names"), group=BACKEND,
          suite=False),  # a suite's matrix.algorithms sets it
    Field("backend", "backend", ("--backend",),
          "mpi (CPU), nccl (GPU) or torch (torch.distributed: NCCL on GPUs, gloo on CPUs)",
          default="mpi", type=T.text("a backend"), group=BACKEND),
    Field("out", "output", ("--out",), "results file (default results/COLL-TIME.nc)",
          type=T.path("a results file"), check=text_or_empty, group=OUTPUT,
          suite=False),  # a suite names its own files
    Field("stats", "output", ("-t", "--stats"), "avg p50 p99 ...",
          default=("avg",), type=T.text("a statistic"), check=statistics, group=OUTPUT, cli={"nargs": "+"}),
    Field("timeout", "launch", ("--timeout",),
          "seconds one collective call may take before the run is stopped and the ranks "
          "that did not arrive are named (default 30 s + 1 s per 50 MB)",
          type=T.seconds, check=positive_seconds, group=OUTPUT),
    Field("checkpoint_every", "output", ("--checkpoint-every",),
          "rewrite the results file at most this often (default 10; 0: after every size); "
          "sizes in between go to small sidecar files, merged into the results if the run "
          "dies", type=T.float_in(0, 10**7), check=checkpoint_seconds, group=OUTPUT,
          cli={"metavar": "SECONDS"}),
    Field("memory_report", "output", ("-M", "--memory"),
          "nccl-tests -M: print the memory usage line (max over ranks)",
          default=False, type=int, check=flag01, group=OUTPUT, cli={"choices": (0, 1)}),
    Field("skip_oversize", "launch", ("--skip-oversize",),
          "skip sizes that don't fit in memory instead of stopping there",
          default=False, check=boolean, group=OUTPUT, cli={"action": "store_true"}),
    Field("hosts", PLACE, ("--hosts",),
          "hosts to run on (name or name:slots; spaces or commas); ranks are placed in equal "
          "blocks in this order", type=T.text("a host"), group=HOSTS,
          cli={"nargs": "+", "metavar": "HOST"}, suite=False),  # a suite's are top-level keys
    Field("hosts_file", PLACE, ("--hosts-file",),
          "hosts, one per line (Open MPI's `name slots=N` accepted); with -N > 1 and no hosts "
          "given, ~/hosts as nccom-test", type=T.path("a host file"), group=HOSTS,
          cli={"metavar": "FILE"}, suite=False),
    Field("nnodes", PLACE, ("-N", "--nnodes"), "nodes to use (default: every host given, else 1)",
          type=T.positive, group=HOSTS, suite=False),
    Field("ranks_per_node", PLACE, ("--ranks-per-node",),
          "ranks on each node (default: ranks / nodes)", type=T.positive, group=HOSTS,
          suite=False),
    # how the ranks start, beside where (launch keywords of the Python API;
    # the CLI's flags for them are `cli.cluster.add_launch_arguments`'s own)
    Field("slurm", PLACE, (), "launch with srun, in an allocation or a new one (-S): True, "
          "a dict or a launch.slurm.SlurmOptions", suite=False),
    Field("env", PLACE, (), "environment variables for the ranks ({name: value})",
          check=environment, suite=False),
    Field("mpi_log_dir", PLACE, (), "also keep each rank's output in files in this folder "
          "(--mpi-log-dir)", suite=False),
    Field("debug", PLACE, (), "print the launch command and the ranks' environment, relay "
          "their stderr (--debug)", default=False, suite=False),
    Field("client", PLACE, (), "run on the workers of a Dask-MPI cluster (a "
          "distributed.Client)", suite=False),
    Field("progress", PLACE, (), "called with each progress event", suite=False),
    # keywords of the Python API alone: the CLI fills them itself
    Field("command", "output", (), "the command line recorded in the results",
          default="", suite=False),
    Field("timing", "backend", (), "the backend's timing mode (nccl: --timing)", default=""),
    Field("backend_options", "backend", (),
          "the backend's own options, as a dict (the backends' flags)"),
)

# The helpers below read FIELDS when called (not when imported), so a
# field added to the table is seen everywhere at once.

def get(name):
    """The field of keyword `name` (KeyError for one there is not)."""
    for f in FIELDS:
        if f.name == name:
            return f
    raise KeyError(name)


def default(name):
    """The default of keyword `name`."""
    return get(name).default


def in_section(section):
    """The fields of one section, in table order."""
    return [f for f in FIELDS if f.section == section]


def in_group(group):
    """The fields with a flag in one ``--help`` group, in table order."""
    return [f for f in FIELDS if f.group == group and f.flags]


def by_section():
    """{section: its keyword names} for `RunConfig`'s sections."""
    return {s: tuple(f.name for f in in_section(s)) for s in SECTIONS}
