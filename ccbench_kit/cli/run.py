"""``ccbench run COLLECTIVE``: nccom-test's flags, nccl-tests' table."""
import json
import shlex
import sys

from .. import api, backends
from ..dataset.schema import library_name
from ..dataset.stats import check_average
from ..errors import EXIT_CHECK_FAILED, ConfigError
from ..formats.nccl_tests.write_table import format_table
from ..inputs.sizes import parse_size_list, read_msglen
from ..launch.cycles import check_cycles, run_cycles
from ..launch.stable import check_target, run_until_stable
from ..output import json_paths, write_json
from ..output_path import check_output
from ..units import format_size
from . import argtypes as T
from .cluster import add_launch_arguments, launch_options
from .history import add_history_flag, file_results

def add_parser(sub):
    # why long: one declaration per flag of `ccbench run`, in the order --help
    # lists them; the backends add their own flags (Backend.add_arguments).
    p = sub.add_parser("run", help="benchmark one collective over a size sweep",
                       description="Benchmark a collective; print nccl-tests' table and "
                                   "write the per-rank, per-iteration Dataset.")
    p.add_argument("collective", type=T.name_list("collective names"),
                   help="all_reduce (allr), all_gather (allg), ...; "
                                      "several, comma-separated, go into one file")
    p.add_argument("-r", "--nworkers", type=T.ranks, default=2, help="ranks (default 2)")
    g = p.add_argument_group("sizes")
    g.add_argument("-b", "--minbytes", default="32M", type=T.text("a size"),
                   help="first size (8, 1K, 64M, 1kb, 1MB...)")
    g.add_argument("-e", "--maxbytes", default=None, type=T.text("a size"),
                   help="last size (default: minbytes)")
    g.add_argument("-f", "--stepfactor", default=None, type=T.text("a factor"),
                   help="multiply the size by this each step")
    g.add_argument("-i", "--stepbytes", default=None, type=T.text("a size"),
                   help="add this many bytes each step")
    g.add_argument("--sizes", default=None, metavar="LIST", type=T.text("a size list"),
                   help="exactly these sizes, in this order (8,1K,1M), in place of -b/-e/-f/-i")
    g.add_argument("--msglen", default=None, metavar="FILE", type=T.text("a file"),
                   help="sizes from a file as IMB's -msglen: one per line, K/M suffixes, "
                        "# comments")
    g = p.add_argument_group("iterations")
    g.add_argument("-n", "--iters", type=T.iterations, default=20,
                   help="measured iterations (default 20)")
    g.add_argument("-w", "--warmup_iters", "--warmup-iters", dest="warmup",
                   type=T.warmup_iterations, default=5,
                   help="warm-up iterations, not returned (default 5)")
    g.add_argument("--cycles", type=int, default=1, metavar="N",
                   help="run the whole sweep N times, as nccl-tests -N; each cycle's table "
                        "is printed and every cycle's iterations kept (coordinate cycle)")
    g.add_argument("--until-stable", type=float, default=None, metavar="HALF_WIDTH",
                   help="run a size again (-n more iterations a round) until the 95%% CI of "
                        "its mean time is within ±HALF_WIDTH (0.05 = 5%%) or --stable-cap")
    g.add_argument("--stable-cap", type=int, default=None, metavar="N",
                   help="most iterations per size for --until-stable (default 10 x -n)")
    g.add_argument("-m", "--agg-iters", dest="agg_iters", type=T.int_in(1, 10**6), default=1,
                   help="operations aggregated into one timed iteration")
    g.add_argument("-z", "--blocking", type=int, choices=(0, 1), default=0,
                   help="1: barrier before every iteration")
    g = p.add_argument_group("data")
    g.add_argument("-d", "--datatype", dest="dtype", default="fp32", type=T.text("a data type"),
                   help="fp32, bf16, int8... (nccl-tests names too)")
    g.add_argument("-o", "--op", default="sum", type=T.text("an op"),
                   help="sum, prod, min, max, avg")
    g.add_argument("--root", type=T.non_negative, default=0, help="root rank of rooted collectives")
    g.add_argument("-c", "--check", nargs="?", const="random", default=None,
                   choices=("random", "all_ones", "0", "1"),
                   help="check results against numpy (nccl-tests' -c 1 = random, -c 0 = off)")
    g.add_argument("--seed", type=T.seed, default=None, help="seed for --check random")
    g.add_argument("--placement", default="both", type=T.text("a placement"),
                   help="out_of_place, in_place or both")
    g.add_argument("--unique-buff", action="store_true",
                   help="a different buffer set for every operation (up to 1 GiB per rank)")
    g.add_argument("--coalesced-cc-size-ratio", dest="coalesced_ratio", nargs="+", default=None,
                   metavar="RATIO", help="run each operation as coalesced parts, e.g. [1,2,1]")
    g.add_argument("--alltoallv-metadata", default=None, metavar="JSON",
                   help="alltoallv counts and displacements (nccom-test's format)")
    g.add_argument("--alltoallv-pattern", default=None, metavar="uniform|zipf:S|hot:R[:F]",
                   help="alltoallv: skewed traffic (MoE-like) drawn with --seed: uniform "
                        "weights, Zipf with exponent S over a random popularity order, or one "
                        "hot rank R with F times the weight (default F = ranks)")
    g.add_argument("--custom-src-target-pairs", dest="src_target_pairs", default=None,
                   metavar="JSON", help="permute's [src, target] pairs (nccom-test's format)")
    g = p.add_argument_group("replica groups (run concurrently; at most one of these)")
    g.add_argument("--split", default=None, type=T.text("a split spec"), metavar="SPEC",
                   help="NCCL_TESTS_SPLIT syntax: 'AND 0x7', 'MOD 8', 'DIV 4', 'OR 1', "
                        "'%%8'...; the variable applies when no flag is given")
    g.add_argument("--data-parallel-dimension", type=T.positive, default=None, metavar="D",
                   help="groups of D ranks, nranks/D apart")
    g.add_argument("--custom-replica-group", dest="replica_groups", default=None,
                   metavar="JSON", help='{"replica_groups": [[0, 1], [2, 3]]}')
    g = p.add_argument_group("algorithms and backend")
    g.add_argument("--algorithms", default=None, type=T.name_list("algorithm names"),
                   help="comma-separated, or all (default: the library's own, mpi or nccl)")
    g.add_argument("--backend", default="mpi", type=T.text("a backend"),
                   help="mpi (CPU) or nccl (GPU)")
    for name in backends.names():  # each backend owns its flags (backends.base)
        backends.backend_class(name).add_arguments(g)
    add_launch_arguments(p)
    g = p.add_argument_group("output")
    g.add_argument("--out", default=None, type=T.path("a results file"),
                   help="results file (default results/COLL-TIME.nc)")
    add_history_flag(g)
    g.add_argument("-t", "--stats", nargs="+", default=["avg"], type=T.text("a statistic"),
                   help="avg p50 p99 ...")
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
    g.add_argument("--timeout", type=T.seconds, default=None,
                   help="seconds one collective call may take before the run is stopped "
                        "and the ranks that did not arrive are named (default 30 s + 1 s "
                        "per 50 MB)")
    g.add_argument("--checkpoint-every", type=T.float_in(0, 10**7), default=None, metavar="SECONDS",
                   help="rewrite the results file at most this often (default 10; 0: after "
                        "every size); sizes in between go to small sidecar files, merged "
                        "into the results if the run dies")
    g.add_argument("--skip-oversize", action="store_true",
                   help="skip sizes that don't fit in memory instead of stopping there")
    p.set_defaults(func=main)


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
    """`api.make_config`'s keywords from the parsed flags (the seed is rank 0's)."""
    return dict(
        minbytes=args.minbytes, maxbytes=args.maxbytes, stepfactor=args.stepfactor,
        stepbytes=args.stepbytes, algorithms=args.algorithms, dtype=args.dtype, op=args.op,
        root=args.root, placement=args.placement, warmup=args.warmup, iters=args.iters,
        agg_iters=args.agg_iters, blocking=bool(args.blocking),
        check=_NCCL_TESTS_CHECK.get(args.check, args.check),
        seed=args.seed, stats=args.stats, backend=args.backend,
        command=shlex.join(argv), timeout=args.timeout, skip_oversize=args.skip_oversize,
        checkpoint_every=args.checkpoint_every,
        split=args.split, data_parallel_dimension=args.data_parallel_dimension,
        replica_groups=args.replica_groups, alltoallv_metadata=args.alltoallv_metadata,
        src_target_pairs=args.src_target_pairs, unique_buff=args.unique_buff,
        coalesced_ratio=args.coalesced_ratio, alltoallv_pattern=args.alltoallv_pattern,
        backend_options=_backend_options(args))


def _check_json_outputs(args, cfgs):
    """--report-to-json-file's paths, checked now, not after the sweep."""
    if args.json_file:
        for path in json_paths(args.json_file, [c.collective for c in cfgs]).values():
            check_output(path, "--report-to-json-file")


def main(args):
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
    cfg_kw = _config_keywords(args, argv)
    # built once, here: every collective shares rank 0's seed
    nranks = api.job_size(args.nworkers)
    sizes = _explicit_sizes(args)
    cfgs = [api.make_config(names[0], nranks, sizes, out=out, **cfg_kw)]
    seed = cfgs[0].inputs.seed
    cfg_kw["seed"] = seed
    cfgs += [api.make_config(name, nranks, sizes, **cfg_kw) for name in names[1:]]
    progress = None if args.non_interactive or args.debug else \
        Progress({c.collective: len(c.sweep.sizes) for c in cfgs})
    _check_json_outputs(args, cfgs)
    if cfgs[0].inputs.check == "random" and _prints():  # every rank runs rank 0's seed (api)
        print(f"# check: random, seed {seed}", file=sys.stderr)
    launch = {"progress": progress, **launch_options(args)}
    cycles = check_cycles(args.cycles)

    def run_configs(these, path):
        if len(these) == 1:
            ds = api.run(these[0].replace(out=path), **launch)
            return None if ds is None else {these[0].collective: ds}
        return api.run_many(these, out=path, **launch)

    def print_cycle(c, parts):
        print(f"# cycle {c + 1} of {cycles}")
        _print_tables(parts, args, rank_stat)

    if args.until_stable is not None:
        if cycles > 1:
            raise ConfigError("repeats sizes itself; not with --cycles", "--until-stable")
        target, cap = check_target(args.until_stable, args.stable_cap, args.iters)
        results = run_until_stable(
            lambda some, part: run_configs(
                [api.make_config(n, nranks, some, **cfg_kw) for n in names], part),
            [int(x) for x in cfgs[0].sweep.sizes], target, cap, args.iters, out)
    elif cycles == 1:
        results = run_configs(cfgs, out)
    else:
        results = run_cycles(lambda out: run_configs(cfgs, out), cycles, out,
                             on_cycle=print_cycle)
    if results is None or any(ds is None for ds in results.values()):
        return 0  # a rank other than 0 of the user's own mpirun: rank 0 prints
    if cycles > 1:
        print(f"# all {cycles} cycles")
    _print_tables(results, args, rank_stat)
    if args.json_file:
        for path in write_json(results, args.json_file, json_format, stats=args.stats,
                               show_algorithm=args.show_algorithm,
                               show_io=args.show_input_output_size):
            print(f"# json ({json_format}): {path}")
    print(f"# results: {out}")
    file_results(args, out)
    return _check_verdict(results)


def _check_verdict(results):
    """EXIT_CHECK_FAILED, with nccom-test's closing line, when the data check
    found wrong elements in any result; 0 otherwise.  Said after every
    table and file is written (and filed), so a failed check keeps every size."""
    failed = sum(ds.ccb.failed_checks() for ds in results.values())
    if not failed:
        return 0
    print(f"{failed} errors found - test failed")
    return EXIT_CHECK_FAILED


def _print_tables(results, args, rank_stat):
    for name, ds in results.items():
        print(f"# ccbench {name}: {ds.attrs['nranks']} ranks, {ds.attrs['dtype']}, backend "
              f"{ds.attrs['backend']} ({library_name(ds.attrs)}), {ds.attrs['warmup']} warm-up + "
              f"{ds.attrs['iters']} iterations" + _groups_note(ds))
        if args.show_algorithm and "library_algorithm" in ds.attrs:
            print(f"# algorithm mpi: {ds.attrs['library_algorithm']}")
        for line in format_table(ds, stats=args.stats, rank_stat=rank_stat,
                                 show_io=args.show_input_output_size,
                                 show_ran=args.show_algorithm):
            print(line)


def _explicit_sizes(args):
    """--sizes or --msglen (IMB), or None for the -b/-e/-f/-i sweep."""
    if args.sizes is None and args.msglen is None:
        return None
    flag = "--sizes" if args.sizes is not None else "--msglen"
    if args.sizes is not None and args.msglen is not None:
        raise ConfigError("give --sizes or --msglen, not both", flag)
    if args.maxbytes or args.stepfactor or args.stepbytes or args.minbytes != "32M":
        raise ConfigError("replaces -b/-e/-f/-i: give one or the other", flag)
    return parse_size_list(args.sizes) if args.sizes is not None else read_msglen(args.msglen)


def _prints():
    """False on the ranks other than 0 of the user's own MPI job
    (`mpirun -np 4 ccbench run ...`), where rank 0 alone prints."""
    if not api.inside_mpi_job():
        return True
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    return MPI.COMM_WORLD.Get_rank() == 0


def _groups_note(ds):
    groups = ds.attrs.get("groups")
    if not groups:
        return ""
    g = json.loads(groups)
    return f", {len(g)} concurrent groups of {len(g[0])} (busbw per group)"


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
            print(f"ccbench: warning: {ev.get('message')}", file=sys.stderr, flush=True)
