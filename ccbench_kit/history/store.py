"""The history's files: each filed results file, unchanged, under a name
made of its content's digest, read-only.  The files are the truth; the
index (index.py) is rebuilt from them.

Layout of a history DIR::

    DIR/runs/ab/ab12...ef.nc   a filed results file (sha256 of its bytes)
    DIR/runs/ab/ab12...ef.json the name it had and when it was filed
    DIR/index.sqlite           the index (rebuildable)
    DIR/.lock                  writers hold it (flock) while they file or index
"""
import contextlib
import datetime as dt
import fcntl
import json
import os
import pathlib
import shutil
import tempfile

from .._files import DIGEST, check_content, sha256_of as _digest
from ..errors import ConfigError

RUNS = "runs"
LOCK = ".lock"


def check_dir(directory, write):
    """`directory` as a Path; ConfigError naming --history when it cannot be used."""
    if not str(directory).strip():  # Path("") is the working directory: never meant
        raise ConfigError("an empty path; name the history directory", "--history")
    d = pathlib.Path(directory)
    if d.exists() and not d.is_dir():
        raise ConfigError(f"{d} is not a directory", "--history")
    if write:
        try:
            (d / RUNS).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"{d}: cannot create the history here ({e.strerror})", "--history")
        if not os.access(d, os.W_OK) or not os.access(d / RUNS, os.W_OK):
            raise ConfigError(f"{d} is not writable (a read-only mount?); nothing was filed",
                              "--history")
        probe = d / RUNS / f".probe-{os.getpid()}"
        try:  # root passes os.access on a read-only mount; a real write does not
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise ConfigError(f"{d} is not writable ({e.strerror}); nothing was filed",
                              "--history")
    elif not d.is_dir():
        raise ConfigError(f"{d}: no such history directory", "--history")
    if (d / RUNS).is_symlink():
        raise ConfigError(f"{d / RUNS} is a symbolic link: a history keeps its filed runs "
                          "inside itself", "--history")
    return d


@contextlib.contextmanager
def write_lock(directory):
    """Hold DIR/.lock exclusively: one writer at a time, on this host or on a
    shared file system whose locks work (NFSv4, Lustre with flock)."""
    try:  # never through a symlink: the lock file is the history's own
        fd = os.open(pathlib.Path(directory) / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW,
                     0o644)
    except OSError as e:
        raise ConfigError(f"{pathlib.Path(directory) / LOCK}: cannot take the writers' lock "
                          f"({e.strerror}; a symbolic link?)", "--history") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def stored_files(directory, verify=False):
    """{run_id: path} of every filed results file.

    The folder is not trusted: a symbolic link (to a file anywhere) or a
    file under a name that is not the digest of a filed run is refused,
    and with `verify` (whenever the files are read: a rebuild) so is a
    file whose bytes no longer match its name.  ConfigError naming it:
    the history says what is wrong and changes nothing."""
    root = pathlib.Path(directory) / RUNS
    if not root.is_dir():
        return {}
    out = {}
    for p in sorted(root.glob("*/*.nc")):
        if p.is_symlink() or p.parent.is_symlink():
            raise ConfigError(f"{p} is a symbolic link: a history keeps its filed runs "
                              "themselves; move it out", "--history")
        if not DIGEST.fullmatch(p.stem) or p.parent.name != p.stem[:2] or not p.is_file():
            raise ConfigError(f"{p}: not a filed run's name (runs/ab/<SHA-256 of its "
                              "bytes>.nc); move it out and file it with `history add`",
                              "--history")
        if verify:
            check_content(p, "--history")
        out[p.stem] = p
    return out


def file_copy(src, directory):
    """Copy `src` into the history, read-only, under its digest.

    Returns (run_id, stored path, new).  Filing the same bytes twice files
    them once.  The copy is written beside its final name and renamed, so a
    reader never sees half a file."""
    run_id = _digest(src)
    dest = pathlib.Path(directory) / RUNS / run_id[:2] / f"{run_id}.nc"
    if dest.exists():
        return run_id, dest, False
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".filing-", suffix=".nc")
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as f:
            shutil.copyfileobj(f, out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o444)
        meta = {"name": pathlib.Path(src).name,
                "filed": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        dest.with_suffix(".json").write_text(json.dumps(meta))
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return run_id, dest, True


def filing_meta(stored):
    """The name a stored file had and when it was filed."""
    try:
        return json.loads(pathlib.Path(stored).with_suffix(".json").read_text())
    except (OSError, ValueError):
        return {"name": pathlib.Path(stored).name, "filed": ""}
