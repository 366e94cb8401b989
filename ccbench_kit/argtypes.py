"""argparse ``type=`` functions: every flag value checked by the parser,
before anything runs.

Each raises ``argparse.ArgumentTypeError`` with a message that argparse
prints as one line, after the flag (``argument -n/--iters: ...``), exit 2.
The bounds are sanity limits, far beyond any real run; memory and disk are
checked later against what the machine really has (`ccbench_kit.resources`,
`ccbench_kit.output_path`).
"""
import argparse
import math

#: seeds are 32-bit, as nccl-tests' and numpy's legacy generators take them
SEED_MAX = 2**32 - 1
#: iterations (measured or warm-up) of one size: 10^9 would take days even at 1 µs each
ITERS_MAX = 10**9
#: ranks ccbench starts: far more than any single launch here can hold
RANKS_MAX = 1 << 20


def int_in(low, high=None):
    """An integer in [low, high] (high None: no upper bound)."""
    def parse(text):
        try:
            value = int(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            span = f">= {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"must be an integer {span}, got {value}")
        return value
    parse.__name__ = "integer"
    return parse


def float_in(low, high=None, low_open=False, high_open=False):
    """A finite number in [low, high]; `low_open`, `high_open` exclude the ends."""
    def parse(text):
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value < low or (low_open and value == low) or \
                (high is not None and (value > high or (high_open and value == high))):
            lo = f"> {low:g}" if low_open else f">= {low:g}"
            hi = f"< {high:g}" if high_open else f"<= {high:g}"
            span = lo if high is None else f"{lo} and {hi}"
            raise argparse.ArgumentTypeError(f"must be a finite number {span}, got {text!r}")
        return value
    parse.__name__ = "number"
    return parse


def text(what="a value"):
    """A string with something in it (not empty or blank, no NUL)."""
    def parse(value):
        if not value.strip():
            raise argparse.ArgumentTypeError(f"expected {what}, got an empty string")
        if "\0" in value:
            raise argparse.ArgumentTypeError(f"{what} may not contain a NUL character")
        return value
    parse.__name__ = "text"
    return parse


def name_list(what):
    """A comma-separated list of names, none of them empty."""
    def parse(value):
        names = [n.strip() for n in value.split(",")]
        if not value.strip() or any(not n for n in names):
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {what} with none empty, got {value!r}")
        if "\0" in value:
            raise argparse.ArgumentTypeError(f"{what} may not contain a NUL character")
        return value
    parse.__name__ = "names"
    return parse


def path(what="a path"):
    """A file or folder path: not empty, no NUL (the OS refuses it)."""
    return text(what)


seed = int_in(0, SEED_MAX)
ranks = int_in(1, RANKS_MAX)
positive = int_in(1)
non_negative = int_in(0)
iterations = int_in(1, ITERS_MAX)
warmup_iterations = int_in(0, ITERS_MAX)
seconds = float_in(0, 10**7, low_open=True)
