"""Watching a running job from the launcher: hung ranks and dead ranks.

Every rank owns one row of a small shared-memory board (a file mapped by all
ranks on this host and by the launcher).  The rank writes where it is (which
size, algorithm and placement) and the engine's timed loop counts the calls it
entered and left, without the GIL and without any message.  The launcher
polls the board: a row that has not moved for longer than the operation's
timeout means the job is stuck, and the rows that are behind the others name
the ranks that did not arrive.
"""
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

import numpy as np

# Columns of a rank's row.
PID, OP, SIZE, ALG, PLACEMENT, ENTERED, LEFT, PHASE = range(8)
WIDTH = 8
PHASES = ("starting", "preparing", "timing", "checking", "gathering", "saving", "done")
# Phases of local work (making inputs and golden results, writing files): a
# rank there is busy, not stuck, however long it takes, and the others may
# wait for it inside a collective meanwhile.
LOCAL_WORK = tuple(PHASES.index(p) for p in ("starting", "preparing", "saving"))


def default_timeout(size):
    """Seconds one collective call may take before the watchdog fires:
    generous on small sizes (oversubscribed ranks stall for ms), and enough
    for 50 MB/s on large ones."""
    return 30.0 + size / 50e6


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


@dataclass
class Stall:
    laggards: list   # ranks that did not arrive (or all, when every rank is stuck)
    all_stuck: bool
    row: np.ndarray  # the row of the furthest rank: where the others wait
    seconds: float
    hosts: list      # host of each rank, "" where unknown


class Monitor:
    """The launcher's side: call `poll()` often; it returns a `Stall` once a
    row has not moved for longer than its operation's timeout."""

    def __init__(self, board, timeout=None):
        self.board = board
        self.timeout = timeout
        self._last = None
        self._since = None

    def poll(self, now=None):
        now = time.monotonic() if now is None else now
        snap = self.board.snapshot()
        if self._last is None or snap.shape != self._last.shape:
            self._last, self._since = snap, np.full(len(snap), now)
        moved = (snap != self._last).any(axis=1)
        self._since[moved] = now
        self._last = snap
        active = snap[:, PHASE] < PHASES.index("done")
        if not active.any() or not (snap[:, PID] > 0).all():
            return None
        if np.isin(snap[active, PHASE], LOCAL_WORK).any():
            self._since[:] = now
            return None
        pos = [(int(r[OP]), int(r[ENTERED])) for r in snap]
        front = max(pos)
        row = snap[pos.index(front)]
        limit = self.timeout or default_timeout(int(row[SIZE]))
        idle = now - self._since.max()  # nobody has moved for this long
        if idle < limit:
            return None
        laggards = [i for i, p in enumerate(pos) if p < front]
        return Stall(laggards or list(range(len(snap))), not laggards, row, idle,
                     [self._host(r) for r in range(len(snap))])

    def _host(self, rank):
        try:
            with open(f"{self.board.path}.host{rank}") as f:
                return f.read().strip()
        except OSError:
            return ""


_NOTICED = re.compile(r"process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+)")


def dead_ranks(text):
    """(rank, host, signal) for each rank mpirun reports as killed."""
    return [(int(m.group(1)), m.group(3), int(m.group(4))) for m in _NOTICED.finditer(text)]


def kill_tree(proc, run_id, grace=3.0):
    """Stop mpirun (SIGTERM lets it take its ranks down), then SIGKILL its
    process group and any process still carrying this run's id."""
    _quietly(os.killpg, proc.pid, signal.SIGTERM)
    _quietly(proc.wait, timeout=grace)
    _quietly(os.killpg, proc.pid, signal.SIGKILL)
    for pid in processes_with_env("CCB_RUN_ID", run_id):
        _quietly(os.kill, pid, signal.SIGKILL)
    _quietly(proc.wait, timeout=grace)


def _quietly(fn, *args, **kwargs):
    """Signals and waits on processes that may already be gone."""
    try:
        fn(*args, **kwargs)
    except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
        pass


def processes_with_env(key, value):
    """PIDs of this user's processes whose environment has key=value."""
    needle = f"{key}={value}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids
