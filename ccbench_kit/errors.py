"""Exceptions the kit raises on purpose.

The CLI prints ``str(error)`` of a `CCBenchError` as one line and exits
non-zero; anything else is a bug and keeps its traceback.
"""


class CCBenchError(Exception):
    """Base of every error the kit reports to the user."""

    exit_code = 2


class ConfigError(CCBenchError, ValueError):
    """Bad input, naming the flag (or file) it came from."""

    def __init__(self, message, flag=None):
        self.flag = flag
        super().__init__(f"{flag}: {message}" if flag else message)


class RunError(CCBenchError, RuntimeError):
    """A benchmark run failed (a rank died, hung, or MPI reported an error)."""

    exit_code = 3


class MissingDependency(CCBenchError, ImportError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, module, extra):
        super().__init__(f"{module} is required for this; install it with "
                         f"`pip install ccbench_kit[{extra}]`")
