"""Heartbeats: which rank stopped, and which ranks only wait for it.

Why a heartbeat, and why on stdout
----------------------------------
When a collective stops making progress every rank's progress counters stop
together: the one that stopped (a SIGSTOPped process, a host whose link
died) and the ones blocked inside MPI waiting for it look the same on the
board.  What tells them apart is whether the *process* is still alive and
reachable.  So each rank has a small child process that, every `INTERVAL`
seconds, prints one event line carrying the rank's row of progress
(operation, size, calls entered and left, phase) while the rank runs.  The
rank may sit inside MPI for ever, holding the GIL or not: the child does
not care.  A stopped rank's child falls silent (it checks the rank's state);
a host that lost its link can no longer forward its output; so the rank
whose beats stop is the culprit and the ranks whose beats go on are the
ones waiting.

The beats travel on the job's own stdout, through whatever already relays
it (mpirun's daemons, srun's step daemons): no port to open, no address to
discover, the same path on one host and across hosts, and it needs nothing
on the hosts beyond the rank itself.  The alternatives cost more: a per-host
agent is one more daemon to start and stop on every node, and MPI-level
probing after the timeout needs a communicator that is not the stuck one
(and a stopped rank answers no probe either).  The price is one short line
per rank per `INTERVAL` (4 ranks: 8 lines a second).

The launcher keeps the last beat of every rank (`Beats`); the watchdog
(`watchdog.Monitor`) uses them as the row of ranks whose board it cannot
see (other hosts) and to call a rank "stopped" when its beats are older
than `STALE`.
"""
import os
import signal
import socket
import time
import mmap

import numpy as np

from . import events
from ..progress_board import Board

INTERVAL = 0.5
# A rank whose last beat is older than this is stopped or cut off.  Eight
# missed beats: a 2-core machine under load delays a thread by a second or
# two, never by four (the watchdog's own timeout is larger still).
STALE = 4.0
EVENT = "beat"
_RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")


def launcher_rank():
    """This process's rank as the launcher set it in the environment, before
    MPI is initialised (so a rank stuck in MPI_Init still beats); None if
    no launcher said."""
    for key in _RANK_ENV:
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return None


class Heartbeat:
    """A child process that beats for this rank every `interval` seconds.

    A process, not a thread: a thread needs the GIL, and a rank waiting in
    some MPI calls holds it (mpi4py's pickle-based allreduce does), so a
    thread would fall silent in a rank that only waits and accuse it.  The
    child is forked before MPI_Init, touches no MPI, and beats while its
    parent runs; it stays silent while the parent is stopped (state T in
    /proc) and exits when the parent is gone.

    `shared` is an int64 array in memory shared with the child (see
    `shared_row`): element 0 is the rank, the rest the rank's row when there
    is no board; with `board_path` the child reads the rank's board row.
    """

    def __init__(self, shared, board_path="", interval=INTERVAL):
        self.shared, self.board_path, self.interval = shared, board_path, interval
        self.pid = None

    def start(self):
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                self._beat(parent)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        self.pid = pid
        return self

    def stop(self):
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.pid = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _beat(self, parent):
        host = socket.gethostname()
        board = None
        if self.board_path:
            board = Board(self.board_path)
        n = 0
        while os.getppid() == parent:
            if not _stopped(parent):
                rank = int(self.shared[0])
                row = board.row(rank) if board is not None else self.shared[1:]
                events.emit({"event": EVENT, "rank": rank, "host": host, "pid": parent,
                             "n": n, "row": [int(v) for v in row]})
                n += 1
            time.sleep(self.interval)


def shared_row(width):
    """An int64 array of 1 + `width` in memory a forked child shares."""
    buf = mmap.mmap(-1, 8 * (1 + width))
    return np.frombuffer(buf, dtype=np.int64)


def _stopped(pid):
    """Whether process `pid` is stopped (SIGSTOP, or traced)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("T", "t")


class Beats:
    """The launcher's side: the last beat of each rank, and when it came.

    Feed it every event (`take` ignores those that are not beats); it is
    read from the watchdog's thread, so updates are whole-object swaps."""

    def __init__(self):
        self._last = {}  # rank -> (monotonic time, event)
        self._first = None  # when the first beat of any rank came

    def take(self, event, now=None):
        """Keep `event` if it is a beat; True if it was."""
        if event.get("event") != EVENT or not isinstance(event.get("rank"), int):
            return False
        now = time.monotonic() if now is None else now
        self._last = {**self._last, event["rank"]: (now, event)}
        if self._first is None:
            self._first = now
        return True

    def __len__(self):
        return len(self._last)

    def heard(self, rank):
        return rank in self._last

    def age(self, rank, now=None):
        """Seconds since `rank`'s last beat; None if it never beat."""
        got = self._last.get(rank)
        if got is None:
            return None
        return (time.monotonic() if now is None else now) - got[0]

    def since_first(self, now=None):
        """Seconds since the first beat of any rank (None before any): how
        long the ranks that did start have waited for the others."""
        if self._first is None:
            return None
        return (time.monotonic() if now is None else now) - self._first

    def host(self, rank):
        got = self._last.get(rank)
        return got[1].get("host", "") if got else ""

    def pid(self, rank):
        got = self._last.get(rank)
        return int(got[1].get("pid", 0)) if got else 0

    def row(self, rank, width):
        """The rank's last progress row (zeros if never heard)."""
        got = self._last.get(rank)
        row = np.zeros(width, dtype=np.int64)
        if got:
            vals = got[1].get("row", [])[:width]
            row[:len(vals)] = vals
        return row
