"""Exceptions the kit raises on purpose, and the one way it warns a user.

The CLI prints ``str(error)`` of a `CCBenchError` as one line and exits
non-zero; anything else is a bug and keeps its traceback.
"""
import sys

from .markup import terminal

# Exit statuses of ``ccbench``: one meaning each, defined here only.
EXIT_OK = 0            # done
EXIT_BELOW = 1         # a comparison fell below its threshold (compare --min-ratio)
EXIT_BAD_INPUT = 2     # bad input: a flag, a file, a path; nothing was run
EXIT_RUN_FAILED = 3    # the run failed (a rank died or hung, a write failed); partial results kept
EXIT_CHECK_FAILED = 4  # the run ended but --check found wrong elements; every size kept
EXIT_BROKEN_PIPE = 141  # the reader of standard output went away (`| head`)
EXIT_SIGINT = 130      # interrupted by Ctrl-C (SIGINT); partial results kept
EXIT_SIGTERM = 143     # terminated by SIGTERM; partial results kept

EXIT_CODES = {
    EXIT_OK: "done",
    EXIT_BELOW: "a comparison below its threshold (--min-ratio)",
    EXIT_BAD_INPUT: "bad input (a flag, a file, an output path); nothing was run",
    EXIT_RUN_FAILED: "the run failed; the sizes done are kept (the message says where)",
    EXIT_CHECK_FAILED: "the data check (--check) found wrong elements; every size is kept",
    EXIT_SIGINT: "interrupted by SIGINT (Ctrl-C); the sizes done are kept",
    EXIT_SIGTERM: "terminated by SIGTERM; the sizes done are kept",
}


class CCBenchError(Exception):
    """Base of every error the kit reports to the user."""

    exit_code = EXIT_BAD_INPUT


class ConfigError(CCBenchError, ValueError):
    """Bad input, naming the flag (or file) it came from."""

    def __init__(self, message, flag=None):
        self.flag = flag
        super().__init__(f"{flag}: {message}" if flag else message)


class RunError(CCBenchError, RuntimeError):
    """A benchmark run failed (a rank died, hung, or MPI reported an error).

    `lost`: on a rank, the ranks (of the job) whose connection it lost, the
    cause of its failure; its error event carries them to the launcher,
    which names their death as the cause (`launch.watchdog.cause_first`)."""

    exit_code = EXIT_RUN_FAILED
    lost = ()


class Interrupted(Exception):
    """SIGTERM, turned into an exception so that a launcher cleans up
    (the CLI's handler raises it; the launcher stops the job, then the CLI
    exits with `exit_code`)."""

    signal_name = "SIGTERM"
    exit_code = EXIT_SIGTERM


def print_warning(message):
    """One ``ccbench: warning:`` line on stderr: something the user should
    know that does not stop the command (the run goes on).  Made safe for
    the terminal (`markup.terminal`): a warning often quotes a file."""
    print(terminal(f"ccbench: warning: {message}"), file=sys.stderr, flush=True)


class MissingDependency(CCBenchError, ImportError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, module, extra):
        super().__init__(f"{module} is required for this; install it with "
                         f"`pip install ccbench_kit[{extra}]`")
