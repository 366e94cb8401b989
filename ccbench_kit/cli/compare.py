"""``ccbench compare BASELINE RUN [RUN...]``: each run against the baseline.

Per size: the busbw ratio RUN / BASELINE, a bootstrap confidence interval
when both have per-iteration data (else the plain ratio, said so), and a
verdict.  ``--min-ratio 0.9`` exits 1 when any size falls below (cluster
acceptance).  Inputs are ccbench .nc files or any importable baseline.
"""
import warnings
from pathlib import Path

import pandas as pd
import numpy as np

from ..compare import (CompareWarning, below, compare_parts, format_comparison, plot_comparison,
                       to_frame)
from ..errors import EXIT_BELOW, ConfigError, print_warning
from .._files import atomic_write_text
from ..formats.csv.write import csv_text
from ..markup import terminal
from ..dataset.io import file_kind
from ..dataset.schema import GPU_CHECK, results_kind
from ..health.gpu import check, report
from ..importers import ReportedMismatchWarning, open_any
from ..output_path import check_distinct, check_output
from ..units import parse_size
from .. import argtypes as T


def add_parser(sub):
    p = sub.add_parser("compare", help="compare runs with a baseline (ratio, CI, verdict)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("baseline", help="the reference: a .nc results file or a baseline log/JSON")
    p.add_argument("runs", nargs="+", metavar="RUN", help="results to compare with it")
    p.add_argument("--min-ratio", type=T.float_in(0, 10**6, low_open=True),
                   help="exit 1 if any size's busbw ratio run/baseline is below this")
    p.add_argument("--stat", default="avg", help="statistic over iterations (avg, min, median, pNN)")
    p.add_argument("--rank-stat", default="max", choices=("max", "min", "mean"),
                   help="reduction over ranks of each iteration (default max)")
    p.add_argument("-b", "--minbytes", help="smallest size to compare (e.g. 1M)")
    p.add_argument("-e", "--maxbytes", help="largest size to compare (e.g. 1G)")
    p.add_argument("--algorithm", action="append", metavar="RUN[=BASE]",
                   help="algorithm pair to compare (repeatable); default: same names, "
                   "else each against the baseline's only one")
    p.add_argument("--confidence", type=T.float_in(0, 1, low_open=True, high_open=True),
                   default=0.95,
                   help="CI level (default 0.95)")
    p.add_argument("--bootstrap", type=T.int_in(100, 10**6), default=2000,
                   help="resamples (default 2000)")
    p.add_argument("--tolerance", type=T.float_in(0, 1), default=0.03,
                   help="plain ratios within 1±this are indistinguishable (default 0.03)")
    p.add_argument("--seed", type=T.seed, default=0)
    p.add_argument("--csv", type=T.path("a CSV file"),
                   help="also write the comparison table to this CSV")
    p.add_argument("--plot", type=T.path("an image file"),
                   help="also write a plot (PNG/SVG/PDF) of each comparison; "
                   "several comparisons get -1, -2... before the suffix")
    p.add_argument("--collective", help="collective of baseline files that do not name it")
    p.add_argument("--nranks", type=T.ranks, help="rank count of baseline files that do not say it")
    p.set_defaults(func=main)


PLOT_FORMATS = (".png", ".svg", ".pdf")


def _algorithms(items):
    if not items:
        return None
    return [tuple(i.split("=", 1)) if "=" in i else (i, i) for i in items]


def _collective_results(path, what, hints):
    """The parts of `path`, refused in one line when it is a results file of
    another kind (a doctor's, whose figures are no collective's times)."""
    parts = open_any(path, **hints)
    if any(results_kind(ds.attrs) == "doctor" for ds in parts.values()):
        raise ConfigError(f"{path}: a `ccbench doctor` results file, not a collective's "
                          "results; compare takes `ccbench run` results or an imported "
                          "baseline (a doctor run is judged against `doctor --baseline`)", what)
    return parts


def _plot_path(path, k, n):
    if n == 1:
        return path
    stem, dot, ext = path.rpartition(".")
    return f"{stem}-{k}.{ext}" if dot else f"{path}-{k}"


def _gpu_checks(args):
    """``ccbench compare`` of `ccbench doctor --local` files (exit code), or None
    when the baseline is not one."""
    if file_kind(args.baseline) != GPU_CHECK:
        return None
    failing = []
    base = check.load(args.baseline)
    for path in args.runs:
        if file_kind(path) != GPU_CHECK:
            raise ConfigError(f"{path}: not a GPU check file like the baseline "
                              f"{args.baseline} (ccbench doctor --local)", "RUN")
        lines, too_low = report.compare_lines(base, check.load(path), args.baseline, path,
                                            args.min_ratio)
        print(terminal("\n".join(lines) + "\n", lines=True))
        failing += [(path, *b) for b in too_low]
    if args.min_ratio is not None:
        if failing:
            print(f"FAILED: {len(failing)} figure(s) below the minimum ratio {args.min_ratio:g}:")
            for path, place, figure, ratio in failing:
                print(terminal(f"  {path} {place} {figure}: ratio {ratio:.3f}"))
            return EXIT_BELOW
        print(f"PASSED: every figure is at or above the minimum ratio {args.min_ratio:g}")
    return 0


def main(args):
    if args.bootstrap < 100:
        raise ConfigError("use at least 100 resamples", "--bootstrap")
    opts = dict(stat=args.stat, rank_stat=args.rank_stat, algorithms=_algorithms(args.algorithm),
                confidence=args.confidence, n_boot=args.bootstrap, tolerance=args.tolerance,
                seed=args.seed,
                minbytes=parse_size(args.minbytes, "-b/--minbytes") if args.minbytes else None,
                maxbytes=parse_size(args.maxbytes, "-e/--maxbytes") if args.maxbytes else None)
    if args.csv:
        check_output(args.csv, "--csv")
    if args.plot:
        check_output(args.plot, "--plot")
        if Path(args.plot).suffix.lower() not in PLOT_FORMATS:
            raise ConfigError(f"{args.plot}: a plot is {', '.join(PLOT_FORMATS)}; name it "
                              "NAME.png", "--plot")
    check_distinct({"--csv": args.csv, "--plot": args.plot},
                   {"BASELINE": args.baseline, **{f"RUN {path}": path for path in args.runs}})
    hints = dict(collective=args.collective, nranks=args.nranks)
    gpu = _gpu_checks(args)
    if gpu is not None:
        return gpu
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ReportedMismatchWarning)
        base = _collective_results(args.baseline, "BASELINE", hints)
        runs = [(path, _collective_results(path, "RUN", hints)) for path in args.runs]
    for w in caught:
        print_warning(w.message)
    results = []
    for path, parts in runs:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CompareWarning)
            pairs = compare_parts(parts, base, run_label=path, baseline_label=args.baseline, **opts)
        for w in caught:
            if issubclass(w.category, CompareWarning):
                print_warning(f"{path}: {w.message}")
        results += [(path, rname, bname, res) for rname, bname, res in pairs]
        for name in sorted(set(parts) - {rname for rname, _, _ in pairs}):
            print(terminal(f"# note: {path} [{name}] has no counterpart in {args.baseline}; "
                           "not compared"))
    failing = []
    frames = []
    compared = 0      # sizes with a finite ratio: a gate over none passes nothing
    for path, rname, bname, res in results:
        print(terminal(f"## {path} [{rname}] vs {args.baseline} [{bname}]"))
        for line in format_comparison(res):
            print(terminal(line))
        print()
        if args.min_ratio is not None:
            failing += [(path, *hit) for hit in below(res, args.min_ratio)]
            compared += int(np.isfinite(res["ratio"].values).sum())
        if args.csv:
            frames.append(to_frame(res, path, args.baseline))
    if args.csv:
        atomic_write_text(args.csv, csv_text(pd.concat(frames, ignore_index=True)))
        print(f"# wrote {args.csv}")
    if args.plot:
        for k, (_, _, _, res) in enumerate(results, 1):
            out = _plot_path(args.plot, k, len(results))
            plot_comparison(res, min_ratio=args.min_ratio).savefig(out)
            print(f"# wrote {out}")
    if args.min_ratio is not None:
        if not compared:
            print(f"FAILED: nothing comparable: no size has a busbw ratio (the times are "
                  f"missing on one side or the other), so nothing is at or above "
                  f"{args.min_ratio:g}")
            return EXIT_BELOW
        if failing:
            print(f"FAILED: {len(failing)} size(s) below the minimum busbw ratio "
                  f"{args.min_ratio:g}:")
            for path, alg, pl, size, ratio in failing:
                print(terminal(f"  {path} {alg} {pl} {size} B: ratio {ratio:.3f}"))
            return EXIT_BELOW
        print(f"PASSED: every size is at or above the minimum busbw ratio {args.min_ratio:g}")
    return 0
