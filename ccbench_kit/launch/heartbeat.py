"""Heartbeats: which rank stopped, and which ranks only wait for it.

Why a heartbeat, and why on stdout
----------------------------------
When a collective stops making progress every rank's progress counters stop
together: the one that stopped (a SIGSTOPped process, a host whose link
died) and the ones blocked inside MPI waiting for it look the same on the
board.  What tells them apart is whether the *process* is still alive and
reachable.  So each rank runs a small thread that, every `INTERVAL` seconds,
prints one event line carrying its row of progress (operation, size, calls
entered and left, phase).  The main thread may sit inside MPI for ever: the
engine's loop and mpi4py's blocking calls release the GIL, so the thread
keeps ticking.  A stopped process's thread stops with it; a host that lost
its link can no longer forward its output; so the rank whose beats stop is
the culprit and the ranks whose beats go on are the ones waiting.

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
import socket
import threading
import time

import numpy as np

from . import events

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
    """A daemon thread printing ``row`` (an int64 array the rank updates in
    place) every `interval` seconds, with this rank's host and pid.

    Use as a context manager, or `start()` / `stop()`."""

    def __init__(self, rank, row, interval=INTERVAL, stream=None):
        self.rank, self.row, self.interval, self.stream = rank, row, interval, stream
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="ccbench-heartbeat", daemon=True)
        self._host, self._pid = socket.gethostname(), os.getpid()

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=2 * self.interval + 1)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _beat(self):
        n = 0
        while True:
            try:
                events.emit({"event": EVENT, "rank": self.rank, "host": self._host,
                             "pid": self._pid, "n": n, "row": [int(v) for v in self.row]},
                            self.stream)
            except (OSError, ValueError):  # stdout closed: the job is ending
                return
            n += 1
            if self._stop.wait(self.interval):
                return


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
