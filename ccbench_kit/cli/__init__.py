"""``ccbench``: a thin shell over the Python API.

Each subcommand is one module here with ``add_parser(subparsers)`` and
``main(args)``; one that may talk to a Dask cluster sets ``uses_dask`` (a
function of its arguments) beside its ``func``.  A `CCBenchError` becomes
one line on stderr and a non-zero exit; anything else is a bug and keeps
its traceback.  `main` runs a command in the calling process (a notebook, a
test); `console` is the ``ccbench`` command, a process of its own.
"""
import argparse
import importlib
import os
import re
import signal
import sys

from .._optional import DASK, IRI_CHECKER, again, without
from ..blas_threads import one_blas_thread
from .._version import __version__
from ..errors import (EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_CODES, EXIT_SIGINT,
                      EXIT_SIGTERM, CCBenchError, Interrupted)
from ..markup import terminal

SUBCOMMANDS = ("run", "report", "show", "cluster", "import", "compare", "export", "suite",
               "doctor", "recover", "history")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, naming the problem, exit 2
        # a value typed with a newline or carriage return is shown escaped
        message = re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], message)
        self.exit(EXIT_BAD_INPUT, f"ccbench: error: {message}\n")


def build_parser(argv=None):
    """The ``ccbench`` parser.  Given the arguments it will parse (`argv`),
    it holds only the subcommand they name: a command imports its own
    module, not every other one's (the doctor's and compare's GPU modules
    cost every `ccbench run` 0.1 s of CPU); for ``--version`` none;
    without a subcommand name (``--help``, a mistyped one) it holds them
    all, so that the help and the error list every choice
    (`_parsers_needed`)."""
    epilog = "exit status:\n" + "\n".join(f"  {code:>3}  {what}"
                                          for code, what in EXIT_CODES.items())
    parser = _Parser(prog="ccbench", description="Benchmark and analyse collective communication.",
                     epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ccbench_kit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in _parsers_needed(argv):
        importlib.import_module(f"{__name__}.{name.replace('-', '_')}{'_' if name == 'import' else ''}").add_parser(sub)
    return parser


def _parsers_needed(argv):
    """The subcommands whose parsers `argv` needs: the one its first word
    names; none for ``--version`` (printed before a subcommand is looked
    for; their modules cost half a second); all for ``--help`` or a word
    that names none (the help and the error list every choice)."""
    first = argv[0] if argv else None
    if first in SUBCOMMANDS:
        return (first,)
    return () if first == "--version" else SUBCOMMANDS


def _terminate(signum, frame):
    raise Interrupted()


def main(argv=None):
    """Run ``ccbench ARGV`` in this process; returns the exit status."""
    return _dispatch(build_parser(argv).parse_args(argv))


def console():
    """The ``ccbench`` command (its console script, ``python -m ccbench_kit``).

    The process is the command's own, so the optional modules no command
    uses are made unimportable before the parser imports xarray (`without`:
    about a second of CPU less in every command that reads or writes
    results, 2.4 s more in one that runs a notebook); a command that talks
    to a Dask cluster gets dask back for distributed's client (no command
    holds a dask array); numpy, its children's too, loads with one BLAS
    thread (`blas_threads`)."""
    one_blas_thread()
    without(DASK + IRI_CHECKER)
    args = build_parser(sys.argv[1:]).parse_args()
    uses_dask = getattr(args, "uses_dask", None)
    if uses_dask and uses_dask(args):
        again(DASK)
    sys.exit(_dispatch(args))


def _dispatch(args):
    # SIGTERM unwinds like Ctrl-C, so a running job is stopped and its
    # partial results are marked, instead of the launcher vanishing.
    signal.signal(signal.SIGTERM, _terminate)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # a shell without job control starts a background command with SIGINT
        # ignored; `kill -INT` (or the testbed's wrapper passing Ctrl-C on)
        # must still stop the run with its partial results, exit 130
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return args.func(args) or 0
    except CCBenchError as e:
        print(f"ccbench: error: {terminal(e)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("ccbench: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    except BrokenPipeError:  # `ccbench show x.nc | head`: the reader is gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Interrupted:
        print("ccbench: terminated", file=sys.stderr)
        return EXIT_SIGTERM


if __name__ == "__main__":
    console()
