"""Where the kit may write: one policy for every file it writes.

Every writer (results, imports, CSV, JSON, reports, suite and cluster files)
asks `check_output` before any work starts, so that a path that cannot take
the file costs one line and exit 2, not a sweep whose results then have
nowhere to go.  The rules:

- only regular files are replaced: a device node (``/dev/null``), a FIFO, a
  socket or a directory at the path is refused, never replaced;
- a symbolic link to a regular file is written through: the link stays, its
  target is replaced (atomically, beside the target);
- missing folders are created (``mkdir -p``), when the nearest existing one
  is a writable folder on a writable file system;
- the file system must have room for the estimated size.

If the final write fails all the same (the disk filled meanwhile, a quota,
the folder vanished), `rescue` puts the data where there is room and the
error says where.
"""
import errno
import os
import stat

from .errors import ConfigError, RunError
from .units import approx_size as format_size


class OutputError(ConfigError):
    """A path the kit refuses to write (exit 2, before any work)."""


class ResultsRescued(RunError):
    """The results could not be written where asked; they are elsewhere (exit 3).
    `where` is the rescued file (None when nowhere had room)."""

    where = None


class WriteFailed(RunError):
    """A file could not be written (no space, a quota, a read-only or
    vanished folder): one line naming it (exit 3).  The OSError is the
    cause; `errno` is its errno."""

    errno = None

    @classmethod
    def of(cls, path, error):
        reason = error.strerror or str(error).splitlines()[0]
        if error.errno is None and "errno = " in str(error):  # h5py's text
            reason = str(error).split("error message = '")[-1].split("'")[0] or reason
        err = cls(f"cannot write {path}: {reason}")
        err.errno = error.errno
        return err


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _kind(mode):
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path):
    """Open `path` for reading in binary, refusing anything but a regular
    file (a FIFO would block the reader for ever; a device never ends).
    Raises OSError, with the reason as its strerror."""
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without waiting
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{_kind(st.st_mode)}, not a regular file", os.fspath(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def write_target(path):
    """The file a write of `path` replaces: `path`, or the target of the
    symbolic link(s) at `path`.  Raises `OutputError` when something other
    than a regular file is there."""
    path = os.fspath(path)
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):  # the folder checks say why
        return target
    except OSError as e:
        raise OutputError(f"{path}: cannot use it ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        what = _kind(st.st_mode)
        hint = "; name a file inside it" if stat.S_ISDIR(st.st_mode) else \
            "; ccbench writes regular files only and does not replace it"
        raise OutputError(f"{path} is {what}{hint}")
    return target


def _existing_folder(folder):
    """The nearest folder of `folder` (itself or an ancestor) that exists."""
    folder = os.path.abspath(folder)
    while not os.path.lexists(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def free_bytes(folder):
    """Bytes this process may still put on `folder`'s file system (root may
    use the blocks reserved for it)."""
    st = os.statvfs(folder)
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize


def _check_folder(folder, shown, flag):
    """Raise `OutputError` unless `folder` exists, or can be made, and is
    writable; returns the nearest existing folder."""
    have = _existing_folder(folder)
    if not os.path.isdir(have):
        raise OutputError(f"{shown}: {have} is a file, not a folder", flag)
    if os.statvfs(have).f_flag & os.ST_RDONLY:
        raise OutputError(f"{shown}: {have} is on a read-only file system", flag)
    if not os.access(have, os.W_OK | os.X_OK):
        raise OutputError(f"{shown}: no permission to write in {have}", flag)
    return have


def check_output(path, flag, need=0):
    """Check, before any work, that a file of about `need` bytes can be
    written at `path`; raise `OutputError` (naming `flag`) if not.

    Returns the path that will be written (the target of a symbolic link).
    """

    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise OutputError(f"{path!r} is not a path (text or os.PathLike); name a file", flag)
    if path is None or not os.fspath(path).strip():
        raise OutputError("an empty path; name a file", flag)
    path = os.fspath(path)
    if path.endswith(os.sep):
        raise OutputError(f"{path} names a folder; name a file inside it", flag)
    try:
        target = write_target(path)
    except OutputError as e:
        raise OutputError(str(e), flag) from None
    have = _check_folder(os.path.dirname(os.path.abspath(target)), path, flag)
    if need:
        free = free_bytes(have)
        if free < need:
            raise OutputError(f"{path}: no room: about {format_size(need)} needed, "
                              f"{format_size(free)} free on its file system", flag)
    return target


def check_output_folder(folder, flag):
    """`check_output` for a folder that files will be written into."""
    folder = os.fspath(folder)
    if not folder.strip():
        raise OutputError("an empty path; name a folder", flag)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise OutputError(f"{folder} exists and is not a folder", flag)
    _check_folder(folder, folder, flag)
    return folder


def derived_file(folder, name, flag):
    """The path of a file whose name the kit made from data (a results
    file's attrs, a ``--pattern``) inside `folder`: one plain name, never a
    way out of the folder (``../``, a leading ``/``) nor through a
    symbolic link in it; then `check_output`."""
    name = str(name)
    if (not name or name in (".", "..") or "/" in name or "\\" in name
            or any(ord(c) < 32 or ord(c) == 127 for c in name)):
        raise OutputError(f"{name!r} (made from the data) is not a plain file name; nothing "
                          f"is written outside {folder}", flag)
    path = os.path.join(os.fspath(folder), name)
    if os.path.islink(path):
        raise OutputError(f"{path} is a symbolic link; a file the kit names is not written "
                          "through one", flag)
    check_output(path, flag)
    return path


# -- when the final write fails -------------------------------------------------

#: errno values that mean "this place cannot take the file", not "a bug"
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENOENT, errno.EACCES, errno.EPERM,
           errno.EIO, errno.ENOTDIR, errno.EFBIG)


def rescue_folders():
    """Where results go when their own path cannot take them, best first."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                             ".local", "state")
    uid = os.getuid()
    return [os.path.join(state, "ccbench", "rescue"),
            os.path.join(os.path.expanduser("~"), ".ccbench", "rescue"),
            f"/tmp/ccbench-rescue-{uid}", f"/dev/shm/ccbench-rescue-{uid}"]


def is_no_room(error):
    """Whether `error` (an OSError, or one raised from one) says the place
    cannot take the file, rather than something being wrong with the data."""
    while error is not None:
        if isinstance(error, WriteFailed) and error.errno in NO_ROOM:
            return True
        if isinstance(error, OSError) and error.errno in NO_ROOM:
            return True
        if isinstance(error, OSError) and error.errno is None and \
                any(s in str(error) for s in ("No space", "Disk quota", "Read-only")):
            return True  # h5py's errors carry the reason in the text only
        error = error.__cause__ or error.__context__
    return False


def check_distinct(outputs, inputs=None):
    """Refuse, before any work, outputs that would overwrite an input or
    each other (``doctor --save-baseline X --out X`` would replace the
    measurements by the baseline).  `outputs` and `inputs` are {flag: path}
    (None paths are skipped); paths are compared after symbolic links and
    ``..`` are resolved, so two spellings of one file are one file."""
    seen = {}
    for flag, path in (inputs or {}).items():
        if path is not None:
            seen.setdefault(os.path.realpath(os.fspath(path)), flag)
    for flag, path in outputs.items():
        if path is None:
            continue
        real = os.path.realpath(os.fspath(path))
        if real in seen:
            raise OutputError(f"{path} is also {seen[real]}; one file cannot be both: name "
                              "another", flag)
        seen[real] = flag
