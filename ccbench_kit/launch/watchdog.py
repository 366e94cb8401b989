"""Watching a running job from the launcher: hung ranks and dead ranks.

The ranks write where they are on the progress board (`progress_board`);
the launcher polls it: a row that has not moved for longer than the operation's
timeout means the job is stuck.  The ranks' heartbeats (`heartbeat`) give the
rows of ranks on other hosts and tell the rank that stopped from the ranks
that wait for it; otherwise the rows behind the others name the ranks that
did not arrive.
"""
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..progress_board import (ENTERED, LEFT, LOCAL_WORK, OP, PHASE, PHASES, PID, SIZE,
                              WIDTH)
from .heartbeat import STALE


def default_timeout(size):
    """Seconds one collective call may take before the watchdog fires:
    generous on small sizes (oversubscribed ranks stall for ms), and enough
    for 50 MB/s on large ones."""
    return 30.0 + size / 50e6


@dataclass
class Stall:
    """Why the watchdog fired.

    `kind` is "stopped" (the `culprits` stopped beating: a stopped process,
    a host cut off), "late" (the `culprits` are alive but did not arrive),
    "missing" (the `culprits` never started) or "stuck" (every rank is alive
    and inside the same call: a deadlock or a stuck device; `culprits` is
    every rank).  `row` is where the ranks that wait are: the call really in
    flight."""

    culprits: list
    all_stuck: bool
    row: np.ndarray  # the row of the furthest live rank: where the others wait
    seconds: float
    hosts: list      # host of each rank, "" where unknown
    kind: str = "late"
    culprit_rows: dict = None  # rank -> its own last row (where it stopped)
    beat_ages: dict = None     # rank -> seconds since its last heartbeat


class Monitor:
    """The launcher's side: call `poll()` often; it returns a `Stall` once a
    row has not moved for longer than its operation's timeout.

    Parameters
    ----------
    board : Board
        This host's board (the rows of ranks on other hosts stay empty).
    timeout : float, optional
        Seconds without progress (default: `default_timeout` of the size).
    beats : heartbeat.Beats, optional
        The ranks' heartbeats: rows of ranks on other hosts, and which rank
        stopped.  Without it only this host's ranks are watched.
    hosts : list of str, optional
        Where each rank was placed, to name the host of a rank never heard from.
    bounded_start : bool
        A rank still "starting" (MPI's first messages, its communicators and
        backends: no operation entered yet) is not busy with local work but
        waits on the others: past the timeout that is a stall too (the
        doctor, whose start-up is only that; a sweep's ranks may make large
        inputs there).
    """

    def __init__(self, board, timeout=None, beats=None, hosts=None, bounded_start=False):
        self.board = board
        self.bounded_start = bounded_start
        self.timeout = timeout
        self.beats = beats
        self.placed = list(hosts or [])
        self._last = None
        self._since = None

    def _rows(self):
        snap = self.board.snapshot()
        if self.beats is not None:
            for r in np.flatnonzero(snap[:, PID] == 0):
                if self.beats.heard(int(r)):
                    snap[r] = self.beats.row(int(r), WIDTH)
        return snap

    def _stale(self, n, now):
        """Ranks whose heartbeat stopped (False where never heard)."""
        if self.beats is None:
            return np.zeros(n, bool)
        ages = [self.beats.age(r, now) for r in range(n)]
        return np.array([a is not None and a > STALE for a in ages])

    def poll(self, now=None):
        now = time.monotonic() if now is None else now
        snap = self._rows()
        n = len(snap)
        if self._last is None or snap.shape != self._last.shape:
            self._last, self._since = snap, np.full(n, now)
        moved = (snap != self._last).any(axis=1)
        self._since[moved] = now
        self._last = snap
        started = snap[:, PID] > 0
        if not started.all():
            return self._missing(started, now)
        active = snap[:, PHASE] < PHASES.index("done")
        if not active.any():
            return None
        stale = self._stale(n, now)
        # a rank at local work is busy, not stuck; once a rank has stopped,
        # only a live rank still writing its files is (the others wait for
        # the stopped one, perhaps in MPI_Init, "starting"), so that the
        # size it saves is not named as the one in flight
        busy = active & np.isin(snap[:, PHASE], LOCAL_WORK)
        if self.bounded_start:
            busy &= (snap[:, PHASE] != PHASES.index("starting")) | (snap[:, OP] > 0)
        if stale.any():
            busy &= (snap[:, PHASE] == PHASES.index("saving")) & ~stale
        if busy.any():
            self._since[:] = now
            return None
        pos = [(int(r[OP]), int(r[ENTERED])) for r in snap]
        live = [i for i in range(n) if not stale[i]] or list(range(n))
        front = max(pos[i] for i in live)
        row = snap[pos.index(front)]
        limit = self.timeout or default_timeout(int(row[SIZE]))
        idle = now - self._since.max()  # nobody has moved for this long
        if idle < limit:
            return None
        if stale.any() and not stale.all():
            kind, culprits = "stopped", [int(i) for i in np.flatnonzero(stale)]
        else:
            culprits = [i for i, p in enumerate(pos) if p < front]
            kind = "late" if culprits else "stuck"
        return Stall(culprits or list(range(n)), kind == "stuck", row, idle,
                     [self._host(r) for r in range(n)], kind,
                     {r: snap[r].copy() for r in culprits}, self._ages(n, now))

    def _missing(self, started, now):
        """Ranks that never reported, once the others have waited `timeout`."""
        waited = self.beats.since_first(now) if self.beats is not None else None
        if waited is None or waited < (self.timeout or 30.0) + 1.0:
            return None
        n = len(started)
        missing = [int(r) for r in np.flatnonzero(~started)]
        return Stall(missing, False, np.zeros(WIDTH, np.int64), waited,
                     [self._host(r) for r in range(n)], "missing", {}, self._ages(n, now))

    def _ages(self, n, now):
        if self.beats is None:
            return {}
        return {r: self.beats.age(r, now) for r in range(n)}

    def _host(self, rank):
        try:
            with open(f"{self.board.path}.host{rank}") as f:
                return f.read().strip()
        except OSError:
            pass
        if self.beats is not None and self.beats.host(rank):
            return self.beats.host(rank)
        return self.placed[rank] if rank < len(self.placed) else ""


def where(row, call):
    """Where a row is: `call` (e.g. "all_reduce/ring (out-of-place)") at its
    size, and which of its calls (or the step after them) it is in."""
    size, entered, left = int(row[SIZE]), int(row[ENTERED]), int(row[LEFT])
    phase = PHASES[int(row[PHASE])] if 0 <= row[PHASE] < len(PHASES) else "?"
    at = f"{call} at size {size} B"
    if phase == "gathering":  # the timed calls of this size are done
        return f"{at}, gathering its results (its {left} timed calls had finished)"
    if phase == "checking":
        return f"{at}, checking its result"
    if phase == "preparing":
        return f"{at}, before its first call"
    if phase == "starting" and not int(row[OP]):   # no operation, no size yet
        return f"{call}, starting"
    if phase in ("starting", "saving", "done"):
        return f"{at}, {phase}"
    if entered > left:
        return f"{at}, call {entered}"
    if entered == 0:   # in the step, its buffers being made or its peers awaited
        return f"{at}, before its first call"
    return f"{at}, after call {left} (between calls)"


def _rank_list(stall, ranks, pids=False):
    out = []
    for r in ranks:
        host = stall.hosts[r] if r < len(stall.hosts) else ""
        row = (stall.culprit_rows or {}).get(r)
        pid = int(row[PID]) if pids and row is not None and row[PID] else 0
        detail = ", ".join(filter(None, [f"host {host}" if host else "",
                                         f"pid {pid}" if pid else ""]))
        out.append(f"{r}" + (f" ({detail})" if detail else ""))
    return ", ".join(out)


def describe_stall(stall, call):
    """One paragraph naming the culprits, their hosts, and the call in flight."""
    ranks = stall.culprits
    many = len(ranks) > 1
    s = "s" if many else ""
    flight = where(stall.row, call)
    if stall.kind == "missing":
        return (f"timeout: rank{s} {_rank_list(stall, ranks)} never started (the other ranks "
                f"waited {stall.seconds:.0f} s for {'them' if many else 'it'}); the job was stopped")
    if stall.kind == "stopped":
        ages = [stall.beat_ages.get(r) for r in ranks] if stall.beat_ages else []
        quiet = max((a for a in ages if a is not None), default=stall.seconds)
        own = [f"rank {r} was at {where(stall.culprit_rows[r], call)}" for r in ranks
               if r in (stall.culprit_rows or {})]
        waiting = [r for r in range(len(stall.hosts)) if r not in ranks]
        return (f"timeout: rank{s} {_rank_list(stall, ranks, pids=True)} stopped (no heartbeat "
                f"for {quiet:.0f} s: a stopped process or a lost host); "
                + (f"{'; '.join(own)}; " if own else "")
                + f"rank{'s' if len(waiting) != 1 else ''} {_rank_list(stall, waiting)} "
                f"{'wait' if len(waiting) != 1 else 'waits'} for {'them' if many else 'it'} in "
                f"{flight}; no progress for {stall.seconds:.0f} s (--timeout); the job was stopped")
    if stall.kind == "stuck":
        return (f"timeout: every rank ({_rank_list(stall, ranks)}) is alive but stuck in "
                f"{flight}: no progress for {stall.seconds:.0f} s (a deadlock, a stuck device or "
                "a lost message); the job was stopped")
    return (f"timeout: rank{s} {_rank_list(stall, ranks)} did not arrive at {flight} within "
            f"{stall.seconds:.0f} s (--timeout); the job was stopped")


_NOTICED = re.compile(r"process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+)")
# srun (Slurm 20-24) says "srun: error: node2: task 2: Segmentation fault"
# or "tasks 4-5,7: Killed": the task ids are the ranks, the text strsignal's
_SRUN_DIED = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (.+?)(?: \(core dumped\))?\s*$",
                        re.MULTILINE)
_SIGNAL_OF = {signal.strsignal(s): int(s) for s in signal.Signals
              if signal.strsignal(s)}


def is_death_notice(line):
    """Whether `line` is mpirun's or srun's report of a rank's end (what
    `dead_ranks` reads): the launcher keeps these from the whole output, as
    ranks' tracebacks and Open MPI's banners after a death push them out of
    its tail."""
    return bool(_NOTICED.search(line) or _SRUN_DIED.search(line))


def dead_ranks(text):
    """(rank, host, signal) for each rank mpirun or srun reports as killed
    by a signal, in the order they are reported (not the order they died:
    `cause_first`)."""
    found = [(m.start(), int(m.group(1)), m.group(3), int(m.group(4)))
             for m in _NOTICED.finditer(text)]
    for m in _SRUN_DIED.finditer(text):
        sig = _SIGNAL_OF.get(m.group(3).strip())
        if sig is not None:
            found += [(m.start(), r, m.group(1), sig) for r in _task_ids(m.group(2))]
    return [(r, host, sig) for _, r, host, sig in sorted(found, key=lambda f: f[0])]


def cause_first(dead, errors):
    """`dead` (`dead_ranks`) with the rank whose death caused the others
    first, from what the ranks said (`errors`: their error events).

    The launcher's order is the order its reports arrived, not the order of
    the deaths.  node3's ranks SIGKILLed on a Slurm testbed: the rank paired
    with node3 lost its connection, its MPI_Abort made Slurm cancel the
    step, and srun reported the ranks the cancel killed ("node1: task 0:
    Killed") before node3's, whose node was busy; srun words both alike,
    and its order is only that of the messages from the nodes.
    What a surviving rank said is causal instead: an error naming the ranks
    whose connection it lost (its ``lost``) was written after they died,
    and its abort came after it.  So ranks named lost come first (in the
    order of the errors), ranks that sent an error themselves come last
    (alive when they wrote it), the others keep the launcher's order."""
    lost = [r for e in errors for r in e.get("lost") or () if isinstance(r, int)]
    wrote = {e.get("rank") for e in errors}

    def cause(d):
        rank = d[0]
        if rank in wrote:
            return 2, 0
        return (0, lost.index(rank)) if rank in lost else (1, 0)
    return sorted(dead, key=cause)   # stable: the launcher's order within each


def _task_ids(spec):
    """[2, 4, 5, 7] from srun's "2" or "4-5,7"."""
    ids = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            ids += range(int(lo), int(hi or lo) + 1)
    return ids


# How ssh (Open MPI's default launch agent) says a host did not answer; the
# lines come before Open MPI's multi-line "unable to reliably start" banner.
_UNANSWERED = (
    re.compile(r"ssh: Could not resolve hostname ([^:\s]+): (.+)"),
    re.compile(r"ssh: connect to host (\S+) port \d+: (.+)"),
    re.compile(r"Connection to (\S+) port \d+ (timed out)"),
)
_NO_DAEMONS = "unable to reliably start one or more daemons"


def unanswered_hosts(text):
    """(host, why) for each host mpirun's launch agent could not reach,
    from mpirun's output; [("", first line)] when mpirun says only that
    some daemon did not start; [] when it says neither."""
    found = {}
    for line in text.splitlines():
        for pattern in _UNANSWERED:
            m = pattern.search(line)
            if m:
                found.setdefault(m.group(1), m.group(2).strip())
    if found:
        return list(found.items())
    if _NO_DAEMONS in text:
        first = next((ln.strip() for ln in text.splitlines()
                      if ln.strip() and not ln.startswith("-----")), "")
        return [("", first)]
    return []


def unanswered_message(found, given=()):
    """One line for `unanswered_hosts`' findings, naming the flag; a host
    is named as `given` spells it (Open MPI drops the domain of a name)."""
    def as_given(h):
        return next((g for g in given if g == h), None) or \
            next((g for g in given if g.startswith(h + ".")), h)
    named = [(as_given(h), why) for h, why in found if h]
    if not named:
        why = found[0][1] if found else ""
        return ("--hosts: mpirun could not start its daemon on one or more of the hosts"
                + (f" ({why})" if why else "") + "; no rank was started")
    hosts = ", ".join(f"{h} ({why})" for h, why in named)
    s = "s" if len(named) > 1 else ""
    return f"--hosts: host{s} {hosts} did not answer; no rank was started"


def kill_tree(proc, run_id, grace=3.0, at_once=False):
    """Stop mpirun (SIGTERM lets it take its ranks down), then SIGKILL its
    process group and any process still carrying this run's id.

    With `at_once` (the watchdog has described a stall) this host's
    processes of the run get SIGKILL first.  Open MPI takes its ranks down
    with SIGCONT before SIGTERM: that wakes a stopped rank, and in the
    moment before SIGTERM lands the job went on, finished the size the
    stall named and saved it, so the results contradicted the message.
    Only the ranks (and their heartbeat children) get it: the launchers
    (mpirun, salloc, srun) get SIGTERM, so that salloc and srun release the
    allocation and the step rather than leave a job running on the nodes."""
    if at_once:
        for pid in processes_with_env("CCB_RUN_ID", run_id):
            if _runs_this_python(pid):
                _quietly(os.kill, pid, signal.SIGKILL)
    _quietly(os.killpg, proc.pid, signal.SIGTERM)
    _quietly(proc.wait, timeout=grace)
    _quietly(os.killpg, proc.pid, signal.SIGKILL)
    for pid in processes_with_env("CCB_RUN_ID", run_id):
        _quietly(os.kill, pid, signal.SIGKILL)
    _quietly(proc.wait, timeout=grace)


def _runs_this_python(pid):
    """Whether process `pid` runs this interpreter (a rank or its heartbeat
    child; the launchers are other programs)."""
    try:
        return os.readlink(f"/proc/{pid}/exe") == os.path.realpath(sys.executable)
    except OSError:
        return False


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
