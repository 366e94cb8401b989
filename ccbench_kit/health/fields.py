"""The doctor's options, each declared once: its flag, default, check and help.

Every option of ``ccbench doctor`` (and keyword of `ccbench_kit.doctor`)
that is the doctor's own is one `Option` here, as `run_fields` declares a
run's.  What reads this table:

- ``ccbench doctor``'s parser adds one flag per option of the groups
  `MEASURE_GROUP` and `GPU_GROUP`, in this order (`cli.doctor`); the
  options of `run_fields.HOSTS` (``--ranks-per-node``) come with the launch
  flags every command shares (`cli.cluster.add_launch_arguments`);
- `health.api.make_plan` takes each `PLAN` option's default and check from
  here, and the plan the ranks follow holds them under their names;
- `reproduce` writes the command line of a plan from the `PLAN` options,
  and `plan_keywords` reads it back: ``make_plan(**plan_keywords(parse(
  reproduce(plan))))`` is the plan again;
- `health.api.doctor`'s keywords from the command line are `keywords(args)`.

Adding a doctor option is therefore one `Option` here and the code that
uses it (a `PLAN` option: the ranks' side, `health/probe.py`, reads it
from the plan).
"""
import argparse
import shlex
from dataclasses import dataclass

from .. import argtypes as T
from .. import run_fields
from ..errors import ConfigError
from ..run_fields import Field, integer_at_least, positive_seconds
from ..units import parse_size

# the sections: in the plan the ranks follow (and so in `reproduce`); a
# keyword of `health.api.doctor` outside the plan; the command line's own
PLAN, CHECK, CLI = "plan", "check", "cli"

# ``ccbench doctor --help``'s groups
MEASURE_GROUP = "measurement"
GPU_GROUP = "GPU checks of this node (ccbench doctor --local)"

# from this many nodes on, bisection replaces the pair matrix (docs/doctor.md)
BISECT_FROM = 16

# what ``--per-gpu`` fixes itself: one rank per GPU, through nccl
PER_GPU_FIXES = {"ranks_per_node": 1, "backend": "nccl"}


@dataclass(frozen=True)
class Option(Field):
    """One option of the doctor: a `run_fields.Field` (its `section` one of
    `PLAN`, `CHECK`, `CLI`) and how a plan records it.

    Parameters
    ----------
    recorded : callable, optional
        ``recorded(plan)``: the value the option was given, read back from
        a plan (default ``plan[name]``); `PLAN` options only.
    """

    recorded: object = None
    suite: bool = False

    def given(self, plan):
        """The value this option had when `plan` was made."""
        return self.recorded(plan) if self.recorded else plan.get(self.name, self.default)

    def argv(self, value):
        """The flag and its words that give `value` (nothing for the default
        of a switch or an option not given)."""
        action = self.cli.get("action")
        if value is None:
            return []
        if action is argparse.BooleanOptionalAction:
            return [self.flags[0] if value else "--no-" + self.flags[0][2:]]
        if action == "store_true":
            return [self.flags[0]] if value else []
        return [self.flags[0], str(value)]


def _size(value, flag):
    """A message size: a positive multiple of 8 bytes (the pair tests
    exchange float64 words), given as bytes or text (``2M``)."""
    size = parse_size(value, flag)
    if size < 8 or size % 8:
        raise ConfigError(f"must be a positive multiple of 8 bytes, got {size}", flag)
    return size


def _bisecting(plan):
    return bool(plan.get("bisect"))


# why one long list: one entry per option, in --help's order; each entry is
# everything the CLI, the API, the plan and `reproduce` know of it.
FIELDS = (
    # the plan: what the ranks measure
    Option("ranks_per_node", PLAN, run_fields.get("ranks_per_node").flags,
           "ranks on each node: the local check is an all_reduce among them",
           default=2, check=integer_at_least(1), group=run_fields.HOSTS),
    Option("repeats", PLAN, ("--repeats",), "repeats of every test (default %(default)s)",
           default=5, type=int, check=integer_at_least(1), group=MEASURE_GROUP),
    Option("bw_bytes", PLAN, ("--bw-size",), "pair bandwidth message (default %(default)s)",
           default="2M", check=_size, group=MEASURE_GROUP, cli={"metavar": "SIZE"}),
    Option("local_bytes", PLAN, ("--local-size",),
           "local all_reduce size (default %(default)s)",
           default="1M", check=_size, group=MEASURE_GROUP, cli={"metavar": "SIZE"}),
    Option("lat_iters", PLAN, ("--lat-iters",),
           "8 B ping-pongs (sendrecvs through a backend) per test (default %(default)s)",
           default=50, type=int, check=integer_at_least(1), group=MEASURE_GROUP),
    Option("bw_iters", PLAN, ("--bw-iters",), "exchanges per test (default %(default)s)",
           default=3, type=int, check=integer_at_least(1), group=MEASURE_GROUP),
    Option("topology", CHECK, ("--topology",),
           "DescribeInstanceTopology JSON: pairs sharing a leaf uplink don't run at once, and "
           "the verdict judges the uplinks between leaves",
           group=MEASURE_GROUP, cli={"metavar": "FILE"}),
    Option("bisect", PLAN, ("--bisect",),
           "bisection of a slow all_reduce (O(log N) rounds) instead of the pair matrix; "
           f"default: from {BISECT_FROM} nodes on", group=MEASURE_GROUP,
           cli={"action": argparse.BooleanOptionalAction}, recorded=_bisecting),
    Option("backend", PLAN, ("--backend",),
           "what the pair tests, the local all_reduce and the bisection run through: nccl "
           "(one rank per GPU), mpi (the kit's MPI engine) or tcp (sockets, the management "
           "network); default nccl where this host has GPUs, else mpi",
           group=MEASURE_GROUP, cli={"metavar": "{tcp,mpi,nccl}"}),
    Option("save_baseline", CHECK, ("--save-baseline",),
           "save this run's figures as the healthy baseline of these nodes (the pairs' rates; "
           "with --local, the GPUs' figures)", group=MEASURE_GROUP, cli={"metavar": "FILE"}),
    Option("baseline", CHECK, ("--baseline",),
           "also score against a saved baseline (sees a fault that hits several nodes or "
           "GPUs alike)", group=MEASURE_GROUP, cli={"metavar": "FILE"}),
    Option("timeout", CHECK, ("--timeout",),
           "seconds without progress before the hang is attributed",
           type=T.float_in(0, 7 * 24 * 3600, low_open=True), check=positive_seconds,
           group=MEASURE_GROUP),
    Option("out", CHECK, ("--out",), "results file (default results/doctor-STAMP.nc)",
           group=MEASURE_GROUP),
    Option("report", CLI, ("--report",), "also write the report page", group=MEASURE_GROUP,
           cli={"metavar": "HTML"}),
    Option("scheduler_file", CLI, ("--scheduler-file",),
           "check the hosts of a Dask-MPI cluster (ccbench cluster start)",
           group=MEASURE_GROUP),
    # the GPU checks of this node
    Option("local", CLI, ("--local",),
           "check this node's GPUs (HBM copy, bf16 matmul, PCIe both ways, NVML state) "
           "against each other, the preset and --baseline; no MPI",
           default=False, group=GPU_GROUP, cli={"action": "store_true"}),
    Option("per_gpu", PLAN, ("--per-gpu",),
           "check this host's GPUs as nodes through nccl, one rank each: the pairs of GPUs, "
           "each GPU's own all_reduce and the host's all_reduce over all of them (mpirun on "
           "this host; no --hosts); with --local, after the GPU checks, one verdict for both",
           default=False, group=GPU_GROUP, cli={"action": "store_true"}),
    Option("gpus", CLI, ("--gpus",),
           "with --local: CUDA indices to check, e.g. 0,2 (default: all)",
           group=GPU_GROUP, cli={"metavar": "LIST"}),
    Option("pairs", CLI, ("--pairs",),
           "with --local: the NVLink pair matrix (every pair's peer copy rate each way and "
           "both ways, latency, NVLink error counters); default on with 2 GPUs or more",
           group=GPU_GROUP, cli={"action": argparse.BooleanOptionalAction}),
)

# The helpers below read FIELDS when called (not when imported), so an
# option added to the table is seen everywhere at once.


def get(name):
    """The option `name` (KeyError for one there is not)."""
    for f in FIELDS:
        if f.name == name:
            return f
    raise KeyError(name)


def in_section(section):
    """The options of one section, in table order."""
    return [f for f in FIELDS if f.section == section]


def in_group(group):
    """The options ``ccbench doctor``'s parser adds to one ``--help`` group."""
    return [f for f in FIELDS if f.group == group]


def flag(name):
    """The flag an error line names for `name`: a doctor option's, else a
    launch keyword's (`run_fields`)."""
    try:
        return get(name).flag
    except KeyError:
        return run_fields.get(name).flag


def measurement():
    """{name: default} of the plan's measured options: what the ranks do
    unless told otherwise (``ccbench doctor``'s and `make_plan`'s
    defaults)."""
    return {f.name: f.default for f in _measured()}


def _measured():
    """The `PLAN` options `make_plan` checks and stores as given (the
    others, backend, bisect and per_gpu, it works out itself)."""
    return [f for f in in_section(PLAN) if f.check is not None]


def checked_measurement(given):
    """{name: value} of every measured option: `given`'s, else the
    default, each through its check (TypeError for a keyword there is not,
    as a function's signature would)."""
    names = {f.name for f in _measured()}
    unknown = sorted(set(given) - names)
    if unknown:
        raise TypeError(f"make_plan() got an unexpected keyword argument {unknown[0]!r}")
    return {f.name: f.validate(given.get(f.name, f.default)) for f in _measured()}


def keywords(args, section):
    """{name: value} of one section's options from parsed flags."""
    return {f.name: getattr(args, f.name) for f in in_section(section)}


def reproduce(names, plan):
    """A command line that runs the check of `plan` on the nodes `names`
    again (``--per-gpu``: this host's GPUs, its settings its own)."""
    per_gpu = bool(plan.get("per_gpu"))
    argv = ["ccbench", "doctor", *([] if per_gpu else [run_fields.get("hosts").flags[0],
                                                         *names])]
    for f in in_section(PLAN):
        if not (per_gpu and f.name in PER_GPU_FIXES):
            argv += f.argv(f.given(plan))
    return shlex.join(argv)


def plan_keywords(args):
    """`make_plan`'s keywords from parsed flags (``--per-gpu``: its fixed
    settings): the inverse of `reproduce`."""
    kw = keywords(args, PLAN)
    if kw["ranks_per_node"] is None:
        kw["ranks_per_node"] = get("ranks_per_node").default
    if kw["per_gpu"]:
        kw.update(PER_GPU_FIXES)
    return kw
