"""``ccbench report RESULTS... [--baseline FILE] [--theory PRESET] -o reports/NAME.html``."""
import sys

from .. import argtypes as T
from ..report import driver


def add_parser(sub):
    p = sub.add_parser("report", help="render an HTML report (papermill + nbconvert)",
                       description="Execute notebooks/report.ipynb (or compare.ipynb with "
                       "--compare) on results files and write one self-contained HTML file.")
    p.add_argument("results", nargs="+", help="results files (.nc, or baselines the kit imports)")
    p.add_argument("-o", "--output", required=True, type=T.path("an HTML file"),
                   help="the HTML file to write (reports/NAME.html)")
    p.add_argument("--baseline", default=None, help="a baseline file to compare against")
    p.add_argument("--theory", default="auto",
                   help="hardware preset for the peak line and bound: auto (default), none, or "
                        "a name such as h100-nvlink4, ib-ndr, efa-p5, cpu; FILE#NAME for your own")
    p.add_argument("-t", "--stats", nargs="+", default=["avg", "p50", "p99"],
                   help="statistics over iterations (the first is plotted)")
    p.add_argument("--title", default="")
    p.add_argument("--compare", action="store_true",
                   help="compare the results files with each other (compare.ipynb)")
    p.add_argument("--timeout", type=T.seconds, default=600, help="seconds per notebook cell")
    p.set_defaults(func=main)


def main(args):

    if args.compare:
        path = driver.render_compare(args.results, args.output, baseline=args.baseline,
                                     stats=args.stats, title=args.title, timeout=args.timeout)
    else:
        path = driver.render(args.results, args.output, baseline=args.baseline,
                             theory=args.theory, stats=args.stats, title=args.title,
                             timeout=args.timeout)
    print(f"report: {path}", file=sys.stderr)
    return 0
