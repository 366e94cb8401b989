"""``ccbench``: a thin shell over the Python API.

Each subcommand is one module here with ``add_parser(subparsers)`` and
``main(args)``.  A `CCBenchError` becomes one line on stderr and a non-zero
exit; anything else is a bug and keeps its traceback.
"""
import argparse
import importlib
import sys

from ..errors import CCBenchError

SUBCOMMANDS = ("run", "report", "show", "cluster", "import", "compare", "export")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, naming the problem, exit 2
        self.exit(2, f"ccbench: error: {message}\n")


def build_parser():
    parser = _Parser(prog="ccbench", description="Benchmark and analyse collective communication.")
    from .. import __version__
    parser.add_argument("--version", action="version", version=f"ccbench_kit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name.replace('-', '_')}{'_' if name == 'import' else ''}").add_parser(sub)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except CCBenchError as e:
        print(f"ccbench: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("ccbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
