"""Nothing outlives the launcher: mpirun and the ranks die with it, however
it dies (SIGKILL, the OOM killer), where no ``finally`` runs.

Three links, each covering the others' gaps:

- mpirun gets a parent-death signal (Linux ``PR_SET_PDEATHSIG``): SIGTERM
  when the launcher dies, on which mpirun tears its job down, the ranks on
  other hosts included (their orted lose mpirun and end their ranks);
- each rank gets SIGKILL when its own parent (mpirun, orted, slurmstepd)
  dies, so a mpirun killed with SIGKILL leaves no rank behind;
- each rank on the launcher's host also watches the launcher's pid, for
  launchers that are not the rank's grandparent (srun, a wrapper script).
"""
import ctypes
import os
import signal
import socket
import threading
import time

PR_SET_PDEATHSIG = 1
#: environment the launcher passes to its ranks
LAUNCHER_PID = "CCB_LAUNCHER_PID"
LAUNCHER_HOST = "CCB_LAUNCHER_HOST"


def die_with_parent(sig=signal.SIGKILL):
    """Ask the kernel to send `sig` to this process when its parent dies;
    False where that cannot be asked (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def terminate_with_parent():
    """A ``preexec_fn`` for the launched mpirun: SIGTERM when the launcher
    dies (mpirun then stops its ranks everywhere)."""
    die_with_parent(signal.SIGTERM)


def launcher_env():
    """Variables that tell the ranks who launched them."""
    return {LAUNCHER_PID: str(os.getpid()), LAUNCHER_HOST: socket.gethostname()}


def _start_time(pid):
    """The start time of `pid` (clock ticks since boot), or None if gone:
    a pid reused by another process has another start time."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def guard_rank(poll=0.5):
    """Called first thing in a rank: die with the parent, and with the
    launcher when it runs on this host."""
    parent = os.getppid()
    die_with_parent(signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)
    pid = os.environ.get(LAUNCHER_PID, "")
    if not pid.isdigit() or os.environ.get(LAUNCHER_HOST) != socket.gethostname():
        return
    born = _start_time(int(pid))
    if born is None:  # another pid namespace: the parent-death signals cover it
        return

    def watch():
        while _start_time(int(pid)) == born:
            time.sleep(poll)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="ccbench-lifeline", daemon=True).start()
