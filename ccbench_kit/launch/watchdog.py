"""Watching a running job from the launcher: hung ranks and dead ranks.

The ranks write where they are on the progress board (`progress_board`);
the launcher polls it: a row that has not moved for longer than the operation's
timeout means the job is stuck, and the rows that are behind the others name
the ranks that did not arrive.
"""
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass

import numpy as np

from ..progress_board import ENTERED, LOCAL_WORK, OP, PHASE, PHASES, PID, SIZE


def default_timeout(size):
    """Seconds one collective call may take before the watchdog fires:
    generous on small sizes (oversubscribed ranks stall for ms), and enough
    for 50 MB/s on large ones."""
    return 30.0 + size / 50e6


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
