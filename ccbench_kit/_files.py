"""Writing files whole or not at all: beside the target, then renamed; and
files named by their content (a history's filed runs), checked when read."""
import errno
import hashlib
import os
import re
import tempfile
import time

from .errors import ConfigError
from .output_path import WriteFailed, free_bytes, rescue_folders, write_target

#: a content name: the SHA-256 of the file's bytes, in hex
DIGEST = re.compile(r"[0-9a-f]{64}")


def sha256_of(path):
    """The SHA-256 of the file's bytes, in hex (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def content_named(path):
    """Whether `path` is named by its content as a history files a run:
    ``runs/ab/ab12...ef.nc``, the SHA-256 of its bytes."""
    stem, parent = os.path.splitext(os.path.basename(path))[0], os.path.dirname(path)
    return bool(DIGEST.fullmatch(stem)) and os.path.basename(parent) == stem[:2] and \
        os.path.basename(os.path.dirname(parent)) == "runs"


def check_content(path, flag=None):
    """ConfigError naming `path` when it is named by its content
    (`content_named`) and its bytes changed since: a filed run is read only
    as it was filed, on every read, not only when the history is rebuilt."""
    if content_named(path) and sha256_of(path) != os.path.splitext(os.path.basename(path))[0]:
        raise ConfigError(f"{path}: its bytes do not match its name (changed after it was "
                          "filed); move it out, then `ccbench history rebuild`", flag)


def atomic_write(path, write):
    """Call ``write(tmp)`` on a temporary path beside `path`, then rename it
    over `path`, so that readers see the old file or the new one, never half
    of it.  Makes the folder if needed; returns `path`.

    Only a regular file is replaced (anything else at `path` raises
    `output_path.OutputError`); a symbolic link is written through, so the
    link stays and its target is replaced.  An OSError (no space, a quota, a
    read-only or vanished folder) leaves nothing behind and is raised as
    `output_path.WriteFailed`, one line naming `path`."""
    path = os.fspath(path)
    target = write_target(path)
    folder = os.path.dirname(os.path.abspath(target))
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".ccb-", suffix=".tmp", dir=folder)
        os.close(fd)
        write(tmp)
        # mkstemp makes files 0600; results are for sharing (0666 less umask)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise WriteFailed.of(path, e) from e
        raise
    return path


def atomic_write_bytes(path, data):
    """`atomic_write` of bytes (or a memoryview), refused up front (ENOSPC)
    when the file system has no room for them."""
    def write(tmp):
        if free_bytes(os.path.dirname(tmp)) < len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), tmp)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # ENOSPC/EDQUOT of delayed allocation shows here
    return atomic_write(path, write)


def atomic_write_text(path, text, encoding="utf-8"):
    """`atomic_write` of a text."""
    def write(tmp):
        with open(tmp, "w", encoding=encoding) as f:
            f.write(text)
    return atomic_write(path, write)


def rescue(path, write, need=0):
    """Write through ``write(tmp)`` into the first rescue folder with room;
    returns the rescued file's path, or None when no folder could take it."""
    name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{os.path.basename(path)}"
    for folder in rescue_folders():
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            if free_bytes(folder) < need:
                continue
            return atomic_write(os.path.join(folder, name), write)
        except (OSError, WriteFailed):
            continue
    return None
