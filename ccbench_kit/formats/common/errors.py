"""What an importer raises or warns about."""
from ...errors import CCBenchError
from ...markup import terminal


class ImporterError(CCBenchError, ValueError):
    """A file the importers cannot read, naming where and what was expected.

    Attributes
    ----------
    path : str
        The file (or the name given to in-memory text).
    line : int or None
        1-based line where reading stopped; None when the problem is the
        whole file (an empty file, say).
    expected : str
        What a reader of that format expected there.
    found : str or None
        A short quote of what was there instead.
    """

    def __init__(self, path, line, expected, found=None):
        expected = _one_line(expected)
        self.path, self.line, self.expected, self.found = path, line, expected, found
        where = f"{path}:{line}" if line else f"{path}"
        msg = f"{where}: expected {expected}"
        if found is not None:
            found = _one_line(str(found).strip())
            if len(found) > 60:
                found = found[:57] + "..."
            msg += f"; found {found!r}"
        super().__init__(msg)


def _one_line(text):
    """The CLI prints one line: control characters from a file are escaped."""
    return terminal(text)


class ReportedMismatchWarning(UserWarning):
    """The bandwidths a tool printed disagree with size / time and the bus
    factor by more than the printed rounding."""


class BrokenTimesWarning(ReportedMismatchWarning):
    """Times that are no times (NaN on a printed row, ±inf, negative, zero)
    were kept as missing; the message counts them and names their lines."""
