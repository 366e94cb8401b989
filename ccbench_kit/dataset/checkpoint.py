"""Rank 0's checkpoints of a running sweep.

Rewriting the results file (building the Dataset, writing netCDF) takes tens
of ms, during which every GPU idles; on 2x H200 the next size's small-message
latency then read 2-4 µs high (bench/RESULTS.md).  So the file is rewritten
only every ``--checkpoint-every`` seconds, and each size done in between is
kept in a small sidecar, ``<out>.ccb-pending-<k>.npz`` (about a millisecond
to write).  Before the first size rank 0 also writes a template (the run's
attrs and coords, no data), so that the first rewrite, too, can wait.
After a crash, `merge_pending` folds the sidecars into the file (or into
the template, when the file was not yet written), so no size that was done
is lost (``ccbench recover PATH`` does it by hand).

When the file cannot be written (disk full, a quota, the folder gone), the
whole run so far goes to a rescue folder (`output_path.rescue`) and the
error says where; later saves of the run go there too.
"""
import glob
import os

import numpy as np

from .._files import atomic_write
import xarray as xr
from ..output_path import ResultsRescued
from .io import open_parts, save, save_or_rescue

PENDING = ".ccb-pending-"


def pending_files(path):
    return sorted(glob.glob(glob.escape(os.fspath(path)) + PENDING + "*.npz"))


def template_path(path):
    return f"{os.fspath(path)}{PENDING}template.nc"


def clear_pending(path):
    for f in pending_files(path) + [template_path(path)]:
        try:
            os.unlink(f)
        except OSError:
            pass


class Checkpoint:
    """The two ways rank 0 keeps a sweep's results in `path` (see module doc)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.rescued_to = None   # where the results went when `path` could not take them

    def template(self, ds):
        """The run's attrs and coords, before any size is done: `ds` holds
        one placeholder size, dropped when sidecars are merged into it."""
        save(ds, template_path(self.path))

    def full(self, ds):
        """Rewrite the file with every size so far; see the module doc for
        what happens when it cannot be written."""
        if self.rescued_to:
            save(ds, self.rescued_to)
            return
        try:
            save_or_rescue(ds, self.path)
        except ResultsRescued as e:
            self.rescued_to = e.where
            raise
        clear_pending(self.path)

    def pending(self, index, layout, latency, start, wrong, itemsize):
        """Keep one size: (algorithm, placement, rank, iteration) arrays."""
        def write(tmp):
            with open(tmp, "wb") as f:
                np.savez(f, size=layout.size, count=layout.count,
                         in_bytes=layout.in_bytes(itemsize), out_bytes=layout.out_bytes(itemsize),
                         latency=latency, start=start, wrong=wrong)
        atomic_write(f"{self.path}{PENDING}{index:05d}.npz", write)


def merge_pending(path, into=None):
    """Fold the sidecars left beside `path` into it (or into the file `into`);
    the number of sizes added.

    The attrs and coords come from the template while the run had not yet
    written `path`, else from `path` itself.  When the file cannot be
    written, the merged results go to a rescue folder
    (`output_path.ResultsRescued` says where) and the sidecars stay."""

    files = pending_files(path)
    template = template_path(path)
    # no template: the file was written by this run, and the sidecars are newer
    base = template if os.path.exists(template) else path
    if not files or not os.path.exists(base):
        clear_pending(path)
        return 0
    parts = open_parts(base)
    if len(parts) != 1:
        return 0  # several collectives are merged by run_many, one whole file each
    ds = next(iter(parts.values())).load()
    ds.close()
    first = ds.isel(size=[-1])  # the shape of one size
    if base == template:
        ds = ds.isel(size=slice(0, 0))  # its one size is a placeholder
    have, blocks = {int(s) for s in ds["size"].values}, []
    for f in files:
        with np.load(f, allow_pickle=False) as z:
            size = int(z["size"])
            if size in have:
                continue
            have.add(size)
            block = first.copy(deep=True).assign_coords(
                size=[size], count=("size", [int(z["count"])]),
                in_bytes=("size", [int(z["in_bytes"])]), out_bytes=("size", [int(z["out_bytes"])]))
            block["latency"].values = z["latency"][:, :, None]
            if "start" in block:
                block["start"].values = z["start"][:, :, None]
            block["wrong"].values = z["wrong"][:, :, None]
            blocks.append(block)
    if blocks:
        merged = xr.concat([ds, *blocks], dim="size", data_vars="minimal", coords="minimal",
                           compat="override", combine_attrs="override")
        merged["size"].attrs = ds["size"].attrs
        save_or_rescue(merged, into or path)
    elif into:
        save_or_rescue(ds, into)
    clear_pending(path)
    return len(blocks)
