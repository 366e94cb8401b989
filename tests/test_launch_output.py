"""The launcher's reading of the job's output (`launch.mpirun._Output`):
every event is handled before the launch returns, however long its
handling takes, and a pipe someone outside the job holds open does not
hang it.

Found on a loaded machine (pytest -n 4 on 2 cores, 2026-11-28): `ccbench
run ... --cycles 2` saved one cycle. A part's last event loads its results
file in the reading thread, and the launcher waited a fixed 5 s for that
thread after the job ended, then combined the cycles it had."""
import json
import os
import threading

from ccbench_kit.launch import events
from ccbench_kit.launch.mpirun import _Output


class Pipes:
    """A stand-in for the job's Popen: its stdout and stderr, read ends of
    pipes whose write ends the test holds."""

    def __init__(self):
        (r1, self.w_out), (r2, self.w_err) = os.pipe(), os.pipe()
        self.stdout, self.stderr = os.fdopen(r1), os.fdopen(r2)

    def say(self, fd, text):
        os.write(fd, text.encode())


def test_every_event_is_handled_before_join_returns_however_long_it_takes(monkeypatch):
    monkeypatch.setattr(_Output, "QUIET_S", 0.2)  # the quiet-pipe bound, short
    job = Pipes()
    started, release, handled = threading.Event(), threading.Event(), []

    def on_event(ev):
        if ev["index"] == 2:  # the last part's results: loaded here, slowly
            started.set()
            release.wait()
        handled.append(ev["index"])

    out = _Output(job, on_event)
    for k in range(3):
        job.say(job.w_out, events.MARKER + json.dumps({"event": "part-done", "index": k}) + "\n")
    os.close(job.w_out)
    os.close(job.w_err)  # the job is gone: both pipes end
    assert started.wait(60)
    # the last event's handling outlasts the old fixed wait (5 s) and many
    # quiet-pipe bounds; join must wait for it, not for a time
    timer = threading.Timer(6, release.set)
    timer.start()
    out.join()
    assert handled == [0, 1, 2]  # (the fixed wait returned with [0, 1])
    assert not any(t.is_alive() for t in out.threads)


def test_a_pipe_held_open_outside_the_job_does_not_hang_the_launch(monkeypatch):
    monkeypatch.setattr(_Output, "QUIET_S", 0.2)
    job = Pipes()
    seen, got = [], threading.Event()
    out = _Output(job, lambda ev: (seen.append(ev), got.set()))
    job.say(job.w_out, events.MARKER + json.dumps({"event": "size", "size": 8}) + "\n")
    os.close(job.w_err)
    assert got.wait(60)
    # stdout's write end stays open (a process the job left behind): join
    # returns once the pipe brought nothing for QUIET_S and nothing is handled
    out.join()
    assert seen == [{"event": "size", "size": 8}]
    assert out.threads[0].is_alive() and not out.threads[1].is_alive()
    os.close(job.w_out)
    out.threads[0].join(timeout=30)


def test_the_launchers_reports_of_deaths_are_kept_from_the_whole_output(monkeypatch):
    """srun's report of the dead node may come after the ranks' tracebacks
    and Open MPI's banners; it is kept when it left the 40-line tail, and
    the cause is named from it and the ranks' error (`cause_first`)."""
    from test_doctor_verdict import CANCELLED_ERROR, CANCELLED_TAIL

    from ccbench_kit.launch.watchdog import cause_first, dead_ranks
    monkeypatch.setattr(_Output, "QUIET_S", 0.2)
    job = Pipes()
    out = _Output(job, None)
    job.say(job.w_out, CANCELLED_ERROR)
    # the run's stderr, then more than a tail of it again without srun's lines
    job.say(job.w_err, CANCELLED_TAIL)
    after = "".join(ln + "\n" for ln in CANCELLED_TAIL.splitlines() if "srun" not in ln)
    job.say(job.w_err, after * 2)
    os.close(job.w_out)
    os.close(job.w_err)
    out.join()
    assert not dead_ranks("".join(out.tail))   # what the launcher read before
    assert len(out.deaths) == 4
    assert cause_first(dead_ranks("".join(out.deaths)), out.errors)[0] == (2, "node3", 9)
