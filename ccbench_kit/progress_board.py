"""The progress board: where each rank of a running sweep is, in shared memory.

Every rank owns one row of a small board (a file mapped by all ranks on this
host and by the launcher).  The rank writes where it is (which size,
algorithm and placement) and the engine's timed loop counts the calls it
entered and left, without the GIL and without any message.  The harness
writes the board (`RankReporter`); the launcher's watchdog
(`launch.watchdog.Monitor`) reads it.  It sits below both, so that neither
imports the other.
"""
import os
import socket

import numpy as np

# Columns of a rank's row.
PID, OP, SIZE, ALG, PLACEMENT, ENTERED, LEFT, PHASE = range(8)
WIDTH = 8
PHASES = ("starting", "preparing", "timing", "checking", "gathering", "saving", "done")
# Phases of local work (making inputs and golden results, writing files): a
# rank there is busy, not stuck, however long it takes, and the others may
# wait for it inside a collective meanwhile.
LOCAL_WORK = tuple(PHASES.index(p) for p in ("starting", "preparing", "saving"))


class Board:
    """The shared board: `nranks` rows of int64, backed by a file."""

    def __init__(self, path, nranks=None, create=False):
        self.path = path
        if create:
            arr = np.zeros((nranks, WIDTH), dtype=np.int64)
            arr.tofile(path)
        self.rows = np.memmap(path, dtype=np.int64, mode="r+").reshape(-1, WIDTH)

    def row(self, rank):
        return self.rows[rank]

    def snapshot(self):
        return np.array(self.rows, copy=True)


class RankReporter:
    """A rank's writer for its row (a no-op without a board)."""

    def __init__(self, board, rank):
        self._row = board.row(rank) if board is not None else np.zeros(WIDTH, np.int64)
        if board is not None:
            with open(f"{board.path}.host{rank}", "w") as f:
                f.write(socket.gethostname())
        self._row[PID] = os.getpid()
        self._op = 0

    def enter(self, size, alg_index, placement_index, phase="timing"):
        self._op += 1
        r = self._row
        r[SIZE], r[ALG], r[PLACEMENT] = size, alg_index, placement_index
        r[ENTERED] = r[LEFT] = 0
        r[PHASE] = PHASES.index(phase)
        r[OP] = self._op  # last: the launcher reads OP to see a new operation

    def phase(self, phase):
        self._row[PHASE] = PHASES.index(phase)

    @property
    def calls(self):
        """The two counters the engine's loop updates (entered, left)."""
        return self._row[ENTERED:LEFT + 1]
