"""The stopped fault's watcher: SIGSTOP every process of a node's network
namespace except the Slurm daemons, now and as new ones start, until killed
(or until the process that applied the fault and the namespace are gone).

``_stopper.py NAMESPACE``; prints ``ready`` after the first sweep.
"""
import os
import signal
import subprocess
import sys
import time

KEEP = {"slurmd", "slurmstepd"}


def sweep(ns, stopped):
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    for pid in map(int, out.split()):
        if pid == os.getpid() or pid in stopped:
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() in KEEP:
                    continue
            os.kill(pid, signal.SIGSTOP)
            stopped.add(pid)
        except (OSError, ProcessLookupError):
            pass


def settle(pids, timeout=10.0):
    """Wait until every one of `pids` is stopped (or gone): a signal acts
    when its process next runs, and on a loaded machine a process woken by
    SIGSTOP still reads as running (R) for a while.  "ready" then means
    stopped, as the fault promises."""
    deadline = time.monotonic() + timeout
    waiting = set(pids)
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                state = "gone"
            if state in ("T", "t", "Z", "X", "gone"):
                waiting.discard(pid)
        if waiting:
            time.sleep(0.01)


def main(ns):
    stopped = set()
    sweep(ns, stopped)
    settle(stopped)
    print("ready", flush=True)
    sys.stdout.close()
    while os.path.exists(f"/run/netns/{ns}"):
        time.sleep(0.1)
        sweep(ns, stopped)


if __name__ == "__main__":
    main(sys.argv[1])
