"""Writing files whole or not at all: beside the target, then renamed."""
import os
import tempfile


def atomic_write(path, write):
    """Call ``write(tmp)`` on a temporary path beside `path`, then rename it
    over `path`, so that readers see the old file or the new one, never half
    of it.  Makes the folder if needed; returns `path`."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ccb-", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        write(tmp)
        # mkstemp makes files 0600; results are for sharing (0666 less umask)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path, text, encoding="utf-8"):
    """`atomic_write` of a text."""
    def write(tmp):
        with open(tmp, "w", encoding=encoding) as f:
            f.write(text)
    return atomic_write(path, write)
