"""Rank 0's checkpoints of a running sweep.

Rewriting the results file (building the Dataset, writing netCDF) takes tens
of ms, during which every GPU idles; on 2x H200 the next size's small-message
latency then read 2-4 µs high (bench/RESULTS.md).  So the file is rewritten
only every ``--checkpoint-every`` seconds, and each size done in between is
kept in a small sidecar, ``<out>.ccb-pending-<k>.npz`` (about a millisecond
to write).  Before the first size rank 0 also writes a template (the run's
attrs and coords, no data), so that the first rewrite, too, can wait; a
sweep of one size needs none (its one write is the file).
After a crash, `merge_pending` folds the sidecars into the file (or into
the template, when the file was not yet written), so no size that was done
is lost (``ccbench recover PATH`` does it by hand).

When the file cannot be written (disk full, a quota, the folder gone), the
whole run so far goes to a rescue folder (`output_path.rescue`) and the
error says where; later saves of the run go there too.

A sidecar belongs to one run: its name carries the run id
(``<out>.ccb-pending-<run>-<k>.npz``), the results file holds the id in
attr ``run_id``, and only a run's own sidecars are folded into its own file
(a run killed with ``kill -9`` leaves sidecars that the next run to the same
``--out`` leaves alone).  While a run writes ``--out`` it holds a lock
(`output_lock`): a second run to the same file is refused, not merged.
"""
import contextlib
import errno
import fcntl
import glob
import os
import re
import uuid
import zipfile

import numpy as np

from .._files import atomic_write
from ..errors import CCBenchError, ConfigError
from ..output_path import ResultsRescued
# the package's save, open_parts and save_or_rescue load dataset/io.py (xarray,
# the netCDF engines) on first use: the launcher's command imports this
# module for the run ids, sidecar names and lock before it reads its arguments
from .. import dataset

PENDING = ".ccb-pending-"
LOCK = ".ccb-lock"
# <out>.ccb-pending-<run>-<k>.npz / -template.nc; files of an older kit have no <run>
_NAME = re.compile(r"^(?:(?P<run>[0-9a-f]{32})-)?(?P<what>\d+\.npz|template\.nc)$")


def new_run_id():
    return uuid.uuid4().hex


def _this_run():
    """The run id the launcher gave the ranks (CCB_RUN_ID), else a new one."""
    run = os.environ.get("CCB_RUN_ID", "")
    return run if re.fullmatch(r"[0-9a-f]{32}", run) else new_run_id()


def _sidecars(path):
    """{run id ("" for an older kit's): [sidecar paths]} beside `path`."""
    prefix = os.fspath(path) + PENDING
    found = {}
    for f in sorted(glob.glob(glob.escape(prefix) + "*")):
        m = _NAME.match(f[len(prefix):])
        if m:
            found.setdefault(m["run"] or "", []).append(f)
    return found


def pending_runs(path):
    """Run ids that left sidecars (or a template) beside `path`."""
    return sorted(_sidecars(path))


def pending_files(path, run_id=None):
    """The size sidecars beside `path`: of run `run_id`, or of every run."""
    runs = _sidecars(path)
    chosen = runs.values() if run_id is None else [runs.get(run_id, [])]
    return sorted(f for files in chosen for f in files if f.endswith(".npz"))


def template_path(path, run_id=""):
    return f"{os.fspath(path)}{PENDING}{run_id + '-' if run_id else ''}template.nc"


def clear_pending(path, run_id=None):
    """Remove the sidecars and template of run `run_id` (None: of every run)."""
    runs = _sidecars(path)
    for f in (f for r, files in runs.items() if run_id is None or r == run_id for f in files):
        try:
            os.unlink(f)
        except OSError:
            pass


@contextlib.contextmanager
def output_lock(path, flag="--out"):
    """Hold ``<out>.ccb-lock`` while a run writes `path`; a second run to the
    same file is refused in one line naming the first one's process.

    The lock is the kernel's (flock): a run killed even with SIGKILL frees
    it, so a lock file left behind never blocks the next run."""
    if not path:
        yield
        return
    lock = os.fspath(path) + LOCK
    try:
        # the run makes the results file's folder anyway (`_files.atomic_write`);
        # the lock beside the file comes first, so it makes it here
        os.makedirs(os.path.dirname(lock) or ".", exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise ConfigError(f"{path}: cannot take the lock {lock} beside it "
                          f"({e.strerror or e})", flag) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise ConfigError(f"{path} is being written by another run (pid {holder}); wait "
                              "for it to end or choose another file", flag) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.unlink(lock)
    finally:
        os.close(fd)


class Checkpoint:
    """The two ways rank 0 keeps a sweep's results in `path` (see module doc)."""

    def __init__(self, path, run_id=None):
        self.path = os.fspath(path)
        self.run_id = run_id or _this_run()
        self.rescued_to = None   # where the results went when `path` could not take them

    def template(self, ds):
        """The run's attrs and coords, before any size is done: `ds` holds
        one placeholder size, dropped when sidecars are merged into it."""
        ds.attrs["run_id"] = self.run_id
        dataset.save(ds, template_path(self.path, self.run_id))

    def full(self, ds):
        """Rewrite the file with every size so far; see the module doc for
        what happens when it cannot be written."""
        ds.attrs["run_id"] = self.run_id
        if self.rescued_to:
            dataset.save(ds, self.rescued_to)
            return
        try:
            dataset.save_or_rescue(ds, self.path)
        except ResultsRescued as e:
            self.rescued_to = e.where
            raise
        clear_pending(self.path, self.run_id)

    def pending(self, index, layout, latency, start, wrong, itemsize):
        """Keep one size: (algorithm, placement, rank, iteration) arrays."""
        def write(tmp):
            with open(tmp, "wb") as f:
                np.savez(f, size=layout.size, count=layout.count,
                         in_bytes=layout.in_bytes(itemsize), out_bytes=layout.out_bytes(itemsize),
                         latency=latency, start=start, wrong=wrong)
        atomic_write(f"{self.path}{PENDING}{self.run_id}-{index:05d}.npz", write)


def _run_of(path):
    """The run id a results file records ("" if none, or no file)."""
    if not os.path.isfile(path):
        return ""
    try:
        return str(next(iter(dataset.open_parts(path).values())).attrs.get("run_id", ""))
    except CCBenchError:
        return ""


def _block(f, first, have):
    """One size from sidecar `f`, shaped as `first` (None: a size `have` has)."""
    with np.load(f, allow_pickle=False) as z:
        size = int(z["size"])
        if size in have:
            return None
        have.add(size)
        block = first.copy(deep=True).assign_coords(
            size=[size], count=("size", [int(z["count"])]),
            in_bytes=("size", [int(z["in_bytes"])]), out_bytes=("size", [int(z["out_bytes"])]))
        block["latency"].values = z["latency"][:, :, None]
        if "start" in block:
            block["start"].values = z["start"][:, :, None]
        block["wrong"].values = z["wrong"][:, :, None]
        return block


def merge_pending(path, into=None, run_id=None):
    """Fold the sidecars run `run_id` left beside `path` into it (or into
    the file `into`); the number of sizes added.

    Without `run_id`, the one run that left sidecars (several: ConfigError
    naming them).  The attrs and coords come from the run's template while
    it had not yet written `path`, else from `path` itself -- provided
    `path` still holds that run (attr ``run_id``): another run's file is
    never given sizes it did not measure.  When the file cannot be written,
    the merged results go to a rescue folder (`output_path.ResultsRescued`
    says where) and the sidecars stay."""
    if run_id is None:
        runs = pending_runs(path)
        if len(runs) > 1:
            raise ConfigError(f"sidecars of {len(runs)} runs lie beside {path} (run ids "
                              + ", ".join(r or "(unnamed)" for r in runs)
                              + "); recover one with --run ID", "PATH")
        run_id = runs[0] if runs else ""
    files = pending_files(path, run_id)
    template = template_path(path, run_id)
    # no template: the file was written by this run, and the sidecars are newer
    base = template if os.path.exists(template) else path
    if not files or not os.path.exists(base):
        clear_pending(path, run_id)
        return 0
    holder = _run_of(path)
    if holder and holder != run_id and (base == path or not into):
        raise CCBenchError(
            f"{path} now holds another run's results (run {holder}); the sizes run "
            f"{run_id or '(unnamed)'} left beside it are not folded into it"
            + ("" if base == path else "; recover them into another file with -o")
            + (" (that run's own file is gone, so they cannot be rebuilt)" if base == path else ""))
    parts = dataset.open_parts(base)
    if len(parts) != 1:
        return 0  # several collectives are merged by run_many, one whole file each
    ds = next(iter(parts.values())).load()
    ds.close()
    if not ds.sizes.get("size"):
        raise CCBenchError(f"{base} holds no size, so there is no shape to fold the sidecars "
                           "beside it into; they are left as they are")
    first = ds.isel(size=[-1])  # the shape of one size
    if base == template:
        ds = ds.isel(size=slice(0, 0))  # its one size is a placeholder
    have, blocks = {int(s) for s in ds["size"].values}, []
    for f in files:
        try:
            block = _block(f, first, have)
        except (KeyError, IndexError, ValueError, TypeError, OSError, zipfile.BadZipFile) as e:
            raise CCBenchError(f"{f}: not a sidecar of {path}'s shape ({type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else 'unreadable'}); "
                               "move it away and recover the others") from None
        if block is not None:
            blocks.append(block)
    ds.attrs["run_id"] = run_id
    if blocks:
        import xarray as xr  # lazy: as `dataset.save` (at the head)
        merged = xr.concat([ds, *blocks], dim="size", data_vars="minimal", coords="minimal",
                           compat="override", combine_attrs="override")
        merged["size"].attrs = ds["size"].attrs
        dataset.save_or_rescue(merged, into or path)
    elif into:
        dataset.save_or_rescue(ds, into)
    clear_pending(path, run_id)
    return len(blocks)
