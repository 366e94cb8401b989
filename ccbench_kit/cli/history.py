"""``ccbench history add|list|show|check|report|rebuild --history DIR``."""
import argparse
import sys

from .. import history
from ..errors import EXIT_BELOW, CCBenchError, ConfigError
from ..history.api import facts_near
from ..history.index import check_usable
from ..history.store import check_dir
from ..markup import terminal
from .. import argtypes as T

ACTIONS = ("add", "list", "show", "check", "report", "rebuild")


def add_parser(sub):
    p = sub.add_parser("history", help="file runs into a history and find regressions",
                       description="A history DIR keeps every filed results file unchanged "
                       "and an index of their summaries (docs/history.md).")
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    helps = {"add": "file results files into the history", "list": "list the series",
             "show": "one series: its runs and change points",
             "check": "exit 1 when a series got worse beyond noise",
             "report": "an HTML page of every collective's trend (papermill)",
             "rebuild": "rebuild the index from the filed files"}
    for name in ACTIONS:
        a = actions.add_parser(name, help=helps[name])
        a.add_argument("--history", required=True, metavar="DIR", help="the history directory")
        if name == "add":
            a.add_argument("items", nargs="+", metavar="FILE", help="results files")
        if name == "show":
            a.add_argument("items", nargs=1, metavar="SERIES",
                           help="a series as `list` prints it, or a glob of them")
        if name == "check":
            a.add_argument("--since", default=None,
                           help="only changes that start since then: a date, or 7d, 12h, 2w "
                           "back from now")
            a.add_argument("--min-change", default="0%", type=percent,
                           help="ignore changes smaller than this: 5%% or 0.05 (a bare 5 is "
                           "refused: which did you mean?); default 0%%, every change beyond "
                           "noise")
            a.add_argument("--series", default=None, metavar="GLOB",
                           help="only the series that match (all_reduce/*)")
        if name == "report":
            a.add_argument("-o", "--output", required=True, type=T.path("an HTML file"),
                           help="the HTML file to write")
            a.add_argument("--timeout", type=T.seconds, default=600, help="seconds per cell")
        a.set_defaults(func=main)


def add_history_flag(parser):
    """--history DIR on run, suite, doctor and import (checked before anything runs)."""
    parser.add_argument("--history", default=None, metavar="DIR", type=_writable_history,
                        help="also file the results file into this history (docs/history.md)")


def _writable_history(text):
    try:
        directory = check_dir(text, write=True)
        check_usable(directory)  # a corrupt index must cost nothing measured
        return str(directory)
    except ConfigError as e:  # argparse prints it after the flag, as every flag's error
        raise argparse.ArgumentTypeError(str(e).removeprefix(f"{e.flag}: ")) from None
    except CCBenchError as e:  # the corrupt index
        raise argparse.ArgumentTypeError(str(e)) from None


def file_results(args, path):
    """File the results file just written into --history DIR, if given."""
    if getattr(args, "history", None) and path:
        (run_id, new), = history.add(str(path), args.history)
        print(f"# history: {'filed' if new else 'already filed'} in {args.history} as "
              f"{run_id[:12]}")


def percent(text):
    """'5%' or '0.05' as 0.05: a percentage says its unit, a fraction is
    below 1; a bare number of 1 or more ('5') is refused, since 5 % and
    500 % are both what it might mean."""
    s = str(text).strip()
    try:
        value = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (5%) or a fraction "
                                         "(0.05)") from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range (0% to 1000%)")
    if not s.endswith("%") and value >= 1:
        raise argparse.ArgumentTypeError(f"{text!r} needs its unit: write {s}% (or the "
                                         f"fraction {value / 100:g})")
    return value


def main(args):
    if args.action == "add":
        for (run_id, new), path in zip(history.add(args.items, args.history), args.items):
            print(f"{'filed' if new else 'already filed'}: {path} as {run_id[:12]}")
        return 0
    if args.action == "rebuild":
        history.rebuild(args.history)
    if args.action == "report":
        # the report's modules (plots, papermill) for this command only:
        # `ccbench run` imports this module for its --history flag
        from ..history.report import render  # lazy: (above)
        print(f"report: {render(args.history, args.output, timeout=args.timeout)}",
              file=sys.stderr)
        return 0
    if getattr(args, "since", None):
        history.parse_since(args.since)  # a bad --since fails before the index is opened
    with history.open(args.history) as h:
        if args.action in ("list", "rebuild"):
            return _list(h)
        if args.action == "show":
            return _show(h, args.items[0])
        since = history.parse_since(args.since) if args.since else None
        found = h.regressions(since=since, min_change=args.min_change, pattern=args.series)
        for reg in found:
            print(terminal(reg.line()))
        print(f"# {len(found)} regression{'s' if len(found) != 1 else ''} in "
              f"{len(h.series(args.series))} series of {len(h.runs())} runs", file=sys.stderr)
        return EXIT_BELOW if found else 0


def _number(value):
    """A metric for the table: a missing one (a night whose sizes all
    failed: NULL in the index) as a dash."""
    return "-" if value is None or value != value else f"{value:.4g}"


def _list(h):
    runs = h.runs()
    print(terminal(f"# {len(runs)} runs, {runs[0]['created'] if runs else '-'} .. "
                   f"{runs[-1]['created'] if runs else '-'}"))
    for key, n in h.series():
        print(terminal(f"{key}  {n} runs"))
    return 0


def _show(h, pattern):
    keys = [k for k, _ in h.series(pattern)] or [pattern]
    for key in keys:
        pts, verdicts = h.analyse(key)
        print(terminal(f"# {key}: {len(pts)} runs"))
        for metric, v in verdicts.items():
            head = f"#   {metric}: {v.status}"
            if v.noise == v.noise:
                head += f", night-to-night noise {v.noise:.1%}"
            print(head + (f" ({v.note})" if v.note else ""))
            for ch in v.changes:
                why = "; ".join(facts_near(pts, ch.index)) or "no recorded fact changed"
                print(terminal(f"#     change at run {ch.index + 1} "
                               f"({pts[ch.index][0]['created']}): {ch.change:+.1%} "
                               f"({ch.evidence()}): {why}"))
        print(f"{'run':>4}  {'created':<25} {'busbw GB/s':>11} {'p50 us':>10} {'p99 us':>10}  "
              "library / file")
        for n, (run, v) in enumerate(pts, 1):
            print(terminal(f"{n:>4}  {run['created']:<25} {_number(v['busbw']):>11} "
                           f"{_number(v['lat_p50']):>10} {_number(v['lat_p99']):>10}  "
                           f"{run['library'].split(',')[0]} / {run['name']}"))
    return 0
