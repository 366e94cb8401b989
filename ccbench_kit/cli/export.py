"""``ccbench export FILE... --csv [OUT]``: results as CSV, one row per
(collective, algorithm, placement, size) with time statistics, algbw, busbw.

``--nccl-tuner-csv [OUT]`` writes an algorithm/protocol sweep as the CSV
that NCCL's tuner example (``plugins/tuner/example/scripts/optimize_config.py``)
turns into a ``nccl_tuner.conf``.

``--aws-naming DIR`` writes one CSV per collective into DIR, named as the AWS
nccl-tests recipe names its results
(``nccl_{nodes}_{mode}_{op}_{pattern}[_topo]_{timestamp}_results.csv``).
"""
import sys

from ..errors import ConfigError
from ..formats.csv.write import DEFAULT_STATS, write_aws, write_csv
from ..importers import open_any, unique_names
from .. import argtypes as T
from .._files import atomic_write_text
from ..formats.nccl_tuner.write_csv import tuner_csv
from ..output_path import check_distinct, check_output, check_output_folder


def add_parser(sub):
    p = sub.add_parser("export", help="results (or baselines) as CSV",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", metavar="FILE", help=".nc results or baseline files")
    p.add_argument("--csv", nargs="?", const="-", type=T.path("a CSV file"), metavar="OUT",
                   help="write one CSV (default: standard output)")
    p.add_argument("--nccl-tuner-csv", nargs="?", const="-", metavar="OUT",
                   type=T.path("a CSV file"),
                   help="write the performance CSV of NCCL's tuner example "
                   "(optimize_config.py) from an algorithm/protocol sweep")
    p.add_argument("--placement", default="out_of_place", choices=("out_of_place", "in_place"),
                   help="which placement --nccl-tuner-csv writes (default out_of_place)")
    p.add_argument("--aws-naming", metavar="DIR", type=T.path("a folder"),
                   help="write one CSV per collective into DIR with the AWS recipe's names")
    p.add_argument("--mode", default="ami", choices=("ami", "container"),
                   help="the {mode} of the AWS name (default ami)")
    p.add_argument("--pattern", help="the {pattern} of the AWS name (default: the run's "
                   "NCCL_TESTS_SPLIT mask, else 0x0)")
    p.add_argument("--topo", action="store_true", help="add _topo to the AWS name")
    p.add_argument("--nodes", type=T.positive, help="the {nodes} of the AWS name (default: hosts)")
    p.add_argument("-t", "--stats", nargs="+", default=list(DEFAULT_STATS),
                   help="time statistics; the first sets algbw/busbw (default avg min max p50 p99 std)")
    p.add_argument("--rank-stat", default="max", choices=("max", "min", "mean"))
    p.add_argument("--collective", help="collective of baseline files that do not name it")
    p.add_argument("--nranks", type=T.ranks, help="rank count of baseline files that do not say it")
    p.set_defaults(func=main)


def main(args):
    if args.csv is None and args.aws_naming is None and args.nccl_tuner_csv is None:
        raise ConfigError("say where: --csv [OUT], --nccl-tuner-csv [OUT] or --aws-naming DIR",
                          "--csv")
    for flag, path in (("--csv", args.csv), ("--nccl-tuner-csv", args.nccl_tuner_csv)):
        if path not in (None, "-"):
            check_output(path, flag)
    check_distinct({flag: None if path == "-" else path for flag, path in
                    (("--csv", args.csv), ("--nccl-tuner-csv", args.nccl_tuner_csv))},
                   {f"FILE {path}": path for path in args.files})
    if args.aws_naming:
        check_output_folder(args.aws_naming, "--aws-naming")
    datasets = []
    for path in args.files:
        datasets.extend(open_any(path, collective=args.collective, nranks=args.nranks).values())
    parts = unique_names(datasets)
    empty = [name for name, ds in parts.items() if not ds.sizes.get("size")]
    if empty:
        raise ConfigError(f"{empty[0]}: no size was measured; nothing to export", "FILE")
    if args.csv is not None:
        frame = write_csv(parts, args.csv, args.stats, args.rank_stat)
        if args.csv != "-":
            print(f"# wrote {len(frame)} rows to {args.csv}")
    if args.nccl_tuner_csv is not None:
        _tuner(parts, args)
    if args.aws_naming:
        for path in write_aws(parts, args.aws_naming, args.mode, args.pattern, args.topo,
                              args.nodes, args.stats, args.rank_stat):
            print(f"# wrote {path}")
    return 0


def _tuner(parts, args):

    stat = args.stats[0]
    text, notes = tuner_csv(parts, stat=stat, placement=args.placement)
    rows = text.count("\n") - 1
    if rows == 0:
        raise ConfigError("nothing to write: no result set of a collective the NCCL tuner "
                          "tunes, with algorithm and protocol known (" + "; ".join(notes) + ")",
                          "--nccl-tuner-csv")
    for n in notes:
        print(f"# {n}", file=sys.stderr)
    if args.nccl_tuner_csv == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(args.nccl_tuner_csv, text)
        print(f"# wrote {rows} rows to {args.nccl_tuner_csv} ({stat} time, busbw)")
