"""``ccbench report RESULTS... -o reports/NAME.html``."""
import sys


def add_parser(sub):
    p = sub.add_parser("report", help="render an HTML report (papermill + nbconvert)")
    p.add_argument("results", nargs="+", help="results files (.nc)")
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.add_argument("--baseline", default=None, help="a baseline results file to compare against")
    p.add_argument("--theory", default="", help="hardware preset for the peak and theory curve")
    p.add_argument("-t", "--stats", nargs="+", default=["avg", "p50", "p99"])
    p.add_argument("--title", default="")
    p.set_defaults(func=main)


def main(args):
    from ..report.driver import render

    path = render(args.results, args.output, baseline=args.baseline, theory=args.theory,
                  stats=args.stats, title=args.title)
    print(f"report: {path}", file=sys.stderr)
    return 0
