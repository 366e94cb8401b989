"""``ccbench import FILE... [-o out.nc]``: baselines into one results file.

Reads nccl-tests logs and ``-J`` JSON, nccom-test tables and JSON, the
AllgatherP bench table and NCCL Inspector dumps (found by content; an
Inspector folder or its files are read together), prints what each file held,
and writes them all to one results file that ``show``, ``compare`` and
``report`` take like a run of the kit.
"""
import warnings

from ..dataset import save
from ..errors import ConfigError, print_warning
from ..markup import terminal
from ..formats.nccl_tests.write_table import format_table
from ..importers import ReportedMismatchWarning, read_all, unique_names
from .. import argtypes as T
from .history import add_history_flag, file_results

from ..output_path import check_distinct, check_output


def add_parser(sub):
    p = sub.add_parser("import", help="import nccl-tests / nccom-test / AllgatherP / "
                       "NCCL Inspector outputs",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", metavar="FILE", help="logs or JSON files to import "
                   "(an NCCL Inspector dump folder, or its files, are read together; a log "
                   "directory of NVIDIA's NCCL microbenchmark recipe, LOG_*_sweep_N*/ or "
                   "the folder above, as a whole)")
    p.add_argument("-o", "--out", type=T.path("a results file"),
                   help="write every imported result set to this .nc file")
    p.add_argument("--collective", help="collective of files that do not name it "
                   "(nccom-test output, old nccl-tests logs)")
    p.add_argument("--nranks", type=T.ranks, help="rank count of files that do not say it")
    p.add_argument("--partial", action="store_true",
                   help="keep the complete rows of a truncated table (marked incomplete)")
    p.add_argument("--table", action="store_true", help="also print each table")
    add_history_flag(p)
    p.set_defaults(func=main)


def main(args):
    if args.out:
        check_output(args.out, "-o/--out")
        check_distinct({"-o/--out": args.out}, {f"FILE {path}": path for path in args.files})
    datasets = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ReportedMismatchWarning)
        datasets = read_all(args.files, collective=args.collective, nranks=args.nranks,
                            partial=args.partial)
    for w in caught:
        print_warning(w.message)
    parts = unique_names(datasets)
    for name, ds in parts.items():
        a = ds.attrs
        sizes = ds["size"].values
        span = f"{int(sizes.min())}..{int(sizes.max())} B" if len(sizes) else "no sizes"
        print(terminal(f"# {name}: {a.get('source')} ({a.get('format')}), {a.get('collective')} "
                       f"{a.get('dtype') or '?'} {a.get('nranks')} ranks, {len(sizes)} sizes "
                       f"{span}, algorithms {', '.join(map(str, ds['algorithm'].values))}"
                       + ("" if a.get("complete", "true") == "true" else " — INCOMPLETE")))
        print(terminal(f"#   check: {a.get('reported_check')}"))
        if a.get("skipped") not in (None, "", "{}"):
            print(terminal(f"#   not imported: {a['skipped']}"))
        if a.get("reported_bw_unit"):
            print(terminal(f"#   bandwidth unit: {a['reported_bw_unit']}"))
        if args.table:
            for line in format_table(ds):
                print(terminal(line))
    if args.out:
        save(parts, args.out)
        print(f"# wrote {len(parts)} result set{'s' if len(parts) != 1 else ''} to {args.out}")
    elif args.history:
        raise ConfigError("needs -o/--out: the history files the results file", "--history")
    file_results(args, args.out)
    return 0
