"""``ccbench show FILE``: the table of a results file, as ``run`` printed it;
for a GPU check (``doctor --local``), its verdict and every GPU's state."""
from ..dataset import open_parts
from ..dataset.io import analysis_ready, file_kind
from ..dataset.schema import GPU_CHECK, library_name
from ..formats.nccl_tests.write_table import format_table
from ..dataset.stats import check_average
from ..health.gpu import check as gpu_check, report as gpu_report
from ..markup import terminal


def add_parser(sub):
    p = sub.add_parser("show", help="print the table of a results file (a GPU check: its "
                       "verdict and state)")
    p.add_argument("results", help="a .nc results file")
    p.add_argument("-t", "--stats", nargs="+", default=["avg"], help="avg p50 p99 ...")
    p.add_argument("--rank-stat", default="max", choices=("max", "min", "mean"),
                   help="reduction over ranks of each iteration (default max)")
    p.add_argument("-a", "--average", default=None, metavar="0|1|2|3",
                   help="as nccl-tests: each rank's time over its iterations, then rank 0's "
                   "(0), the avg (1), min (2) or max (3) across ranks; replaces --rank-stat")
    p.set_defaults(func=main)


def main(args):
    if file_kind(args.results) == GPU_CHECK:
        for line in gpu_report.summary_lines(gpu_check.load(args.results)):
            print(terminal(line))
        return 0
    rank_stat = check_average(args.average) if args.average is not None else args.rank_stat
    for name, ds in open_parts(args.results).items():
        ds = analysis_ready(ds)  # a big run is summarized from disk, chunk by chunk
        a = ds.attrs
        print(terminal(f"# {name}: {a.get('nranks')} ranks, {a.get('dtype')}, backend "
                       f"{a.get('backend')} ({library_name(a)}), created {a.get('created')}"
                       + ("" if a.get("complete", "true") == "true" else " — INCOMPLETE")))
        if not ds.sizes.get("size"):
            print("# no size was measured: nothing to show")
            continue
        for line in format_table(ds, stats=args.stats, rank_stat=rank_stat):
            print(terminal(line))
    return 0
