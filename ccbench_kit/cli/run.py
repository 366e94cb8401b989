"""``ccbench run COLLECTIVE``: nccom-test's flags, nccl-tests' table."""
import shlex
import sys

from .. import api, backends
from .. import run_fields as F
from ..dataset.stats import check_average
from ..errors import EXIT_CHECK_FAILED, ConfigError, print_warning
from ..formats.nccl_tests.write_table import run_lines
from ..inputs.sizes import parse_size_list, read_msglen
from ..launch.cycles import check_cycles
from ..launch.stable import check_target
from ..mpi_env import start_mpi
from ..output import json_paths, write_json
from ..output_path import check_output
from ..units import format_size
from .. import argtypes as T
from .cluster import add_launch_arguments, launch_options
from .history import add_history_flag, file_results

def add_parser(sub):
    """``ccbench run``: one flag per field of `run_fields`, in its help group,
    and around them the flags of the command line alone (sizes from a list
    or file, how the table is printed, JSON beside the results)."""
    p = sub.add_parser("run", help="benchmark one collective over a size sweep",
                       description="Benchmark a collective; print nccl-tests' table and "
                                   "write the per-rank, per-iteration Dataset.")
    p.add_argument("collective", type=T.name_list("collective names"),
                   help="all_reduce (allr), all_gather (allg), ...; "
                                      "several, comma-separated, go into one file")
    p.add_argument("-r", "--nworkers", type=T.ranks, default=2, help="ranks (default 2)")
    g = _field_group(p, F.SIZES)
    g.add_argument("--sizes", default=None, metavar="LIST", type=T.text("a size list"),
                   help="exactly these sizes, in this order (8,1K,1M), in place of -b/-e/-f/-i")
    g.add_argument("--msglen", default=None, metavar="FILE", type=T.text("a file"),
                   help="sizes from a file as IMB's -msglen: one per line, K/M suffixes, "
                        "# comments")
    for title in (F.ITERATIONS, F.DATA, F.GROUPS):
        _field_group(p, title)
    g = _field_group(p, F.BACKEND)
    for name in backends.names():  # each backend owns its flags (backends.base)
        backends.backend_class(name).add_arguments(g)
    add_launch_arguments(p)
    g = _field_group(p, F.OUTPUT)
    add_history_flag(g)
    g.add_argument("-a", "--average", default=None, metavar="0|1|2|3",
                   help="the table as nccl-tests -a: each rank's time over its iterations, "
                   "then rank 0's (0), the avg (1), min (2) or max (3) across ranks "
                   "(default: the max over ranks of each iteration); the file keeps every rank")
    g.add_argument("--show-algorithm", action="store_true",
                   help="the algorithm in the JSON, and what the library ran at each size "
                        "(NCCL's choice; Open MPI's where the environment forces it) at the "
                        "end of each row")
    g.add_argument("--show-input-output-size", action="store_true",
                   help="each rank's input and output bytes, in the table and the JSON")
    g.add_argument("--report-to-json-file", dest="json_file", default=None,
                   type=T.path("a JSON file"), metavar="PATH",
                   help="also write the results as JSON (one file per collective)")
    g.add_argument("--json-format", default=None, choices=("nccom-test", "nccl-tests"),
                   help="for --report-to-json-file: nccom-test's keys (default) or "
                        "nccl-tests' -J format, version 3")
    g.add_argument("--non-interactive", action="store_true", help="no progress lines")
    p.set_defaults(func=main)


def _field_group(parser, title):
    """A help group of `parser` holding the flag of every field of `title`."""
    g = parser.add_argument_group(title)
    for f in F.in_group(title):
        g.add_argument(*f.flags, **f.argparse_keywords())
    return g


def _backend_options(args):
    """The backend flags given, as `make_config`'s backend_options; the chosen
    backend refuses the ones it doesn't have (--timing with mpi)."""
    given = {}
    for name in backends.names():
        given.update(backends.backend_class(name).options_from_args(args))
    return given


# nccl-tests' -c 0|1, beside nccom-test's bare -c and the kit's modes
_NCCL_TESTS_CHECK = {"0": None, "1": "random"}


def _config_keywords(args, argv):
    """`api.make_config`'s keywords from the parsed flags (the seed is rank 0's):
    every field's flag by its name, and what the command line adds."""
    kw = {f.name: getattr(args, f.name) for f in F.FIELDS
          if f.flags and f.section in F.SECTIONS and f.name != "out"}
    kw.update(check=_NCCL_TESTS_CHECK.get(args.check, args.check), command=shlex.join(argv),
              backend_options=_backend_options(args))
    return kw


def _check_json_outputs(args, names):
    """--report-to-json-file's paths, checked now, not after the sweep."""
    if args.json_file:
        for path in json_paths(args.json_file, names).values():
            check_output(path, "--report-to-json-file")


def main(args):
    # why long: the flags that only the command line has (the table, JSON,
    # the history), checked before the run, then one call of api.run_many
    names = [c for c in args.collective.split(",") if c]
    out = args.out or api.default_out("-".join(n.replace("-", "_") for n in names))
    argv = sys.argv if sys.argv and sys.argv[0].endswith("ccbench") else ["ccbench", "run"]
    if args.nworkers < 1:
        raise ConfigError(f"need at least 1 rank, got {args.nworkers}", "-r/--nworkers")
    if args.json_format and not args.json_file:
        raise ConfigError("needs --report-to-json-file PATH", "--json-format")
    json_format = args.json_format or "nccom-test"
    rank_stat = "max"
    if args.average is not None:
        rank_stat = check_average(args.average)
    # built once, here: every part (collective, -d all, -o all) shares rank 0's seed
    cfgs = api.make_configs(names, api.job_size(args.nworkers), _explicit_sizes(args),
                            **_config_keywords(args, argv))
    parts = api.part_names(cfgs)
    progress = None if args.non_interactive or args.debug else \
        Progress({p: len(c.sweep.sizes) for p, c in zip(parts, cfgs)})
    _check_json_outputs(args, parts)
    if cfgs[0].inputs.check == "random" and _prints():  # every rank runs rank 0's seed (api)
        print(f"# check: random, seed {cfgs[0].inputs.seed}", file=sys.stderr)
    cycles = check_cycles(args.cycles)
    if args.until_stable is not None:
        if cycles > 1:
            raise ConfigError("repeats sizes itself; not with --cycles", "--until-stable")
        check_target(args.until_stable, args.stable_cap, args.iters)

    table = dict(stats=list(args.stats), rank_stat=rank_stat,
                 show_io=args.show_input_output_size, show_ran=args.show_algorithm)
    tables = RankTables(table, progress)

    def print_cycle(c, results):
        print(f"# cycle {c + 1} of {cycles}")
        _print_tables(results, tables)

    results = api.run_many(cfgs, out=out, cycles=cycles, job_per_cycle=args.job_per_cycle,
                           until_stable=args.until_stable,
                           stable_cap=args.stable_cap, on_cycle=print_cycle, progress=tables,
                           # the tables of one sweep, each part's once, from rank 0
                           table=table if cycles == 1 and args.until_stable is None else None,
                           **launch_options(args))
    if results is None:
        return 0  # a rank other than 0 of the user's own mpirun: rank 0 prints
    if cycles > 1:
        print(f"# all {cycles} cycles")
    _print_tables(results, tables)
    if args.json_file:
        for path in write_json(results, args.json_file, json_format, stats=args.stats,
                               show_algorithm=args.show_algorithm,
                               show_io=args.show_input_output_size):
            print(f"# json ({json_format}): {path}")
    print(f"# results: {out}")
    file_results(args, out)
    return _check_verdict(results, tables)


def _check_verdict(results, tables):
    """EXIT_CHECK_FAILED, with nccom-test's closing line, when the data check
    found wrong elements in any result; 0 otherwise.  Said after every
    table and file is written (and filed), so a failed check keeps every size."""
    failed = sum(tables.failed(name, results) for name in results)
    if not failed:
        return 0
    print(f"{failed} errors found - test failed")
    return EXIT_CHECK_FAILED


def _print_tables(results, tables):
    for name in results:
        for line in tables.lines(name, results):
            print(line)


def _explicit_sizes(args):
    """--sizes or --msglen (IMB), or None for the -b/-e/-f/-i sweep."""
    if args.sizes is None and args.msglen is None:
        return None
    flag = "--sizes" if args.sizes is not None else "--msglen"
    if args.sizes is not None and args.msglen is not None:
        raise ConfigError("give --sizes or --msglen, not both", flag)
    if args.maxbytes or args.stepfactor or args.stepbytes or args.minbytes != F.default("minbytes"):
        raise ConfigError("replaces -b/-e/-f/-i: give one or the other", flag)
    return parse_size_list(args.sizes) if args.sizes is not None else read_msglen(args.msglen)


def _prints():
    """False on the ranks other than 0 of the user's own MPI job
    (`mpirun -np 4 ccbench run ...`), where rank 0 alone prints."""
    if not api.inside_mpi_job():
        return True
    return start_mpi().COMM_WORLD.Get_rank() == 0


class RankTables:
    """`api.run_many`'s `progress`: keeps rank 0's ``table`` events by part
    name and hands every other event to `progress` (the progress lines;
    None: none).  A part's table and failed checks are rank 0's where it
    sent them, else made here from the part's Dataset with `table`
    (`write_table.run_lines`' keywords), which reads its file."""

    def __init__(self, table, progress=None):
        self.table = table
        self.progress = progress
        self.received = {}

    def __call__(self, ev):
        if ev.get("event") == "table":
            self.received[ev["name"]] = ev
        elif self.progress is not None:
            self.progress(ev)

    def lines(self, name, results):
        if name in self.received:
            return self.received[name]["lines"]
        return run_lines(name, results[name], **self.table)

    def failed(self, name, results):
        if name in self.received:
            return self.received[name]["failed"]
        return results[name].ccb.failed_checks()


class Progress:
    """Progress lines counted over the whole run: ``[all_gather 7/24]``.

    `planned` maps each collective, in run order, to its number of sizes;
    a sweep that merges sizes (equal after rounding) reports its own
    total, which replaces the plan.
    """

    def __init__(self, planned):
        self.totals = dict(planned)
        self.done = {name: 0 for name in self.totals}

    def line(self, ev):
        name = ev.get("collective") or next(iter(self.totals))
        self.totals[name] = int(ev["total"])
        self.done[name] = int(ev["index"]) + 1
        names = list(self.totals)
        before = sum(self.totals[n] for n in names[:names.index(name)]) if name in names else 0
        return (f"  [{name} {before + self.done[name]}/{sum(self.totals.values())}] "
                f"{format_size(ev['size'])} done, best busbw {ev['busbw']:.3g} GB/s")

    def __call__(self, ev):
        if ev.get("event") == "size":
            print(self.line(ev), file=sys.stderr, flush=True)
        elif ev.get("event") == "warning":
            print_warning(ev.get("message"))
