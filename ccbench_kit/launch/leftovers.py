"""What a killed run leaves in the temporary folder, removed by the next run.

A launcher killed with SIGKILL cannot clean up: its ``ccbench-run-PID-*``
folder (the progress board, the configuration) and Open MPI's session
folder of its mpirun (``ompi.HOST.UID/pid.PID``) stay.  Each carries the
pid of the process that made it; `sweep` removes those whose process is
gone, and nothing else (another user's or a live run's folders are left).
"""
import os
import re
import shutil
import tempfile

RUN_PREFIX = "ccbench-run-"
DOCTOR_PREFIX = "ccbench-doctor-"
_OURS = re.compile(rf"^(?:{RUN_PREFIX}|{DOCTOR_PREFIX})(\d+)-")
_OMPI_SESSION = re.compile(r"^pid\.(\d+)$")


def run_prefix(kind=RUN_PREFIX):
    """The prefix of this process's temporary run folder (it names the pid)."""
    return f"{kind}{os.getpid()}-"


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:     # alive, another user's
        return False
    return False


def _owned(path):
    try:
        return os.lstat(path).st_uid == os.geteuid() and not os.path.islink(path)
    except OSError:
        return False


def sweep(tmpdir=None):
    """Remove the run folders and Open MPI session folders of processes that
    are gone; returns the paths removed."""
    tmpdir = tmpdir or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(tmpdir)
    except OSError:
        return removed
    for name in names:
        path = os.path.join(tmpdir, name)
        m = _OURS.match(name)
        if m and _owned(path) and _gone(int(m.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        elif name.startswith("ompi.") and name.endswith(f".{os.geteuid()}") and _owned(path):
            try:
                sessions = os.listdir(path)
            except OSError:
                continue
            for s in sessions:
                m = _OMPI_SESSION.match(s)
                sub = os.path.join(path, s)
                if m and _owned(sub) and _gone(int(m.group(1))):
                    shutil.rmtree(sub, ignore_errors=True)
                    removed.append(sub)
    return removed
