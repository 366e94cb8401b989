"""What a killed run leaves in the temporary folder, removed by the next run.

A launcher killed with SIGKILL cannot clean up: its ``ccbench-run-PID-*``
folder (the progress board, the configuration), its host file
(``ccbench-run-PID-hosts-*.txt``, when it was given hosts) and Open MPI's session
folder of its mpirun (``ompi.HOST.UID/pid.PID``) stay.  Each carries the
pid of the process that made it; `sweep` removes those whose process is
gone, and nothing else (another user's or a live run's folders are left).

Open MPI's shared-memory transport (vader in 4.x, sm in 5.x) keeps one
segment per rank in /dev/shm, ``vader_segment.HOST.UID.JOBID.LOCALRANK``;
the ranks unlink them at MPI_Finalize and mpirun's PMIx server when the
job ends.  A job stopped by the launcher (Ctrl-C, SIGTERM, the watchdog)
or killed with its mpirun does neither.  The job's ids share their upper
16 bits, the job family, which the mpirun's session folder names
(``contact.txt``: the mpirun's own jobid first): `job_family` reads it
while the mpirun lives, `remove_segments` then removes the segments of that
family and this user, and no other file.  A launcher killed with SIGKILL
takes its mpirun down through the lifeline, and mpirun removes its session
folder as it goes, while its ranks' segments stay: so the launcher notes
the family in its own run folder once the ranks are up (`note_family`),
and the run that sweeps that folder removes the segments too.
"""
import glob
import os
import re
import shutil
import tempfile

RUN_PREFIX = "ccbench-run-"
DOCTOR_PREFIX = "ccbench-doctor-"
_OURS = re.compile(rf"^(?:{RUN_PREFIX}|{DOCTOR_PREFIX})(\d+)-")
_OMPI_SESSION = re.compile(r"^pid\.(\d+)$")
# HOST.UID.JOBID(hex).LOCALRANK, as Open MPI's vader (4.x) and sm (5.x) name them
_FAMILY_NOTE = "ompi-job-family"   # in a run folder: `note_family`
_SEGMENT = re.compile(r"^(?:vader|sm)_segment\..+\.(\d+)\.([0-9a-fA-F]{1,8})\.(\d+)$")


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


def job_family(mpirun_pid, tmpdir=None):
    """The job family (upper 16 bits of every jobid) of the live Open MPI
    mpirun `mpirun_pid`, from its session folder's ``contact.txt``
    (``JOBID.VPID;URI...``), or None (not Open MPI's, not started yet, gone)."""
    tmpdir = tmpdir or tempfile.gettempdir()
    pattern = os.path.join(glob.escape(tmpdir), f"ompi.*.{os.geteuid()}", f"pid.{int(mpirun_pid)}",
                           "contact.txt")
    for path in glob.glob(pattern):
        try:
            with open(path) as f:
                head = f.read(128)
            return int(head.split(";")[0].split(".")[0]) >> 16
        except (OSError, ValueError):
            continue
    return None


def note_family(run_dir, mpirun_pid):
    """Keep the job family of the live mpirun `mpirun_pid` in `run_dir`
    (the launcher's run folder), for the run that sweeps the folder should
    this launcher be killed; returns the family (None: not known).  The
    run folder lies in the temporary folder mpirun makes its session in."""
    family = job_family(mpirun_pid, os.path.dirname(os.path.abspath(run_dir)))
    if family is not None:
        with open(os.path.join(run_dir, _FAMILY_NOTE), "w") as f:
            f.write(str(family))
    return family


def _noted_family(run_dir):
    try:
        with open(os.path.join(run_dir, _FAMILY_NOTE)) as f:
            return int(f.read(32))
    except (OSError, ValueError):
        return None


def shm_directory():
    """Where Open MPI's shared-memory segments are (its backing directory)."""
    return os.environ.get("OMPI_MCA_btl_vader_backing_directory") or \
        os.environ.get("OMPI_MCA_btl_sm_backing_directory") or "/dev/shm"


def remove_segments(family, directory=None):
    """Remove this user's shared-memory segments of the jobs of `family`
    (`job_family`); returns the paths removed.  Segments of other job
    families or other users, and anything else there, are left."""
    if family is None:
        return []
    directory = directory or shm_directory()
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        m = _SEGMENT.match(name)
        path = os.path.join(directory, name)
        if m and int(m.group(1)) == os.geteuid() and int(m.group(2), 16) >> 16 == family \
                and _owned(path):
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def _unlinked(path):
    try:
        os.unlink(path)
        return [path]
    except OSError:
        return []


def sweep(tmpdir=None):
    """Remove the run folders (and host files) and Open MPI session folders
    of processes that are gone, and the shared-memory segments of those mpiruns' jobs;
    returns the paths removed."""
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
            if os.path.isdir(path):
                removed += remove_segments(_noted_family(path))
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
            else:  # a host file (`command.Launcher`)
                removed += _unlinked(path)
        elif name.startswith("ompi.") and name.endswith(f".{os.geteuid()}") and _owned(path):
            try:
                sessions = os.listdir(path)
            except OSError:
                continue
            for s in sessions:
                m = _OMPI_SESSION.match(s)
                sub = os.path.join(path, s)
                if m and _owned(sub) and _gone(int(m.group(1))):
                    # its job's segments first: the folder names their family
                    removed += remove_segments(job_family(m.group(1), tmpdir))
                    shutil.rmtree(sub, ignore_errors=True)
                    removed.append(sub)
    return removed
