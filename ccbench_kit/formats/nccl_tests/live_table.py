"""nccl-tests' table written row by row as sizes complete.

A job that runs without ``ccbench run`` around it (a suite's sbatch job)
has only its log: nccl-tests users follow a job with ``tail -f
logs/JOB.out``, where nccl-tests prints each size's row as it is timed.
Rank 0 of such a job writes the header before the first size, the size's
rows after each, and the check and average lines at the end; the rows are
`write_table.table_parts`' for a Dataset of that one size, so the log and
``ccbench show`` of the results file print the same numbers.
"""
import sys

from .write_table import table_parts


class LiveTable:
    """The table on `stream` (default stdout), a size at a time."""

    def __init__(self, stream=None):
        self.stream = stream
        self.started = False

    def _write(self, lines):
        stream = self.stream or sys.stdout
        for line in lines:
            stream.write(line + "\n")
        stream.flush()

    def add(self, ds):
        """The rows of `ds`, a Dataset of the size just done (the header first)."""
        head, rows, _ = table_parts(ds)
        if not self.started:
            self._write(head)
            self.started = True
        self._write(rows)

    def close(self, ds):
        """The lines below the rows, from the whole run's Dataset `ds`."""
        self._write(table_parts(ds)[2])
