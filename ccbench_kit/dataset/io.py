"""Reading and writing results: netCDF through h5netcdf, written atomically.

One collective is one Dataset.  A run of several collectives is a DataTree
with one child per collective; on disk the first collective sits in the root
group (so a plain ``xarray.open_dataset(path)`` reads a complete Dataset) and
the others in groups named after them.  DataTree itself cannot hold that
layout in memory, because the collectives' `size` coords differ and a child
must align with its parent.  A suite's tree nests its runs
(``all_reduce/env2/r8``): each is saved in the group of that path.
"""
import contextlib
import io
import json
import os
from collections.abc import Mapping

import xarray as xr

from . import accessor  # noqa: F401  (registers ds.ccb on what it reads)
from .._optional import installed
from .._files import atomic_write_bytes, atomic_write_bytes as write_bytes, check_content, rescue

from ..errors import CCBenchError
from .memory import PER_ITERATION, in_memory_limit
from .schema import KINDS, SWEEP, check_kind, check_required, check_times, kind_of
from .versions import SchemaError, upgrade
from ..output_path import ResultsRescued, WriteFailed, is_no_room, rescue_folders

__all__ = ["SchemaError", "analysis_ready", "file_kind", "load", "open_parts", "save"]


def _encoding(ds):
    enc = {}
    for name in ("latency", "start"):
        if name in ds and ds[name].size:
            shape = ds[name].shape
            # one chunk = one (algorithm, placement, size) block of all ranks
            # and iterations, so a lazy reduction over sizes streams
            # shuffle groups the floats' bytes: 20% smaller and ~5x faster to
            # inflate than plain zlib on noisy timings (bench/bigdata.py)
            enc[name] = {"zlib": True, "complevel": 1, "shuffle": True,
                         "chunksizes": (1, 1, 1) + tuple(max(s, 1) for s in shape[3:])}
    return enc


def to_bytes(data):
    """The netCDF file of `data` (see `save`), built in memory.

    HDF5 never touches the disk: a write that fails (no space, a quota)
    fails in plain `write`, cleanly.  HDF5 itself, on a failed write, leaves
    a handle that crashes the process (signal 11) when xarray later closes
    it (h5py 3, HDF5 1.14).
    """
    parts = _as_parts(data)
    first, *rest = parts
    ds0 = parts[first].copy()
    ds0.attrs["collectives"] = json.dumps(list(parts))
    with _local_write_lock():
        if not rest:
            return ds0.to_netcdf(None, engine="h5netcdf", encoding=_encoding(ds0))
        buf = io.BytesIO()
        ds0.to_netcdf(buf, engine="h5netcdf", mode="w", encoding=_encoding(ds0))
        for name in rest:
            buf.seek(0)
            parts[name].to_netcdf(buf, engine="h5netcdf", mode="a", group=name,
                                  encoding=_encoding(parts[name]))
        return buf.getbuffer()


def _local_write_lock():
    """A plain thread lock for xarray's write, also inside a Dask worker.

    There xarray would take a distributed Lock named after the target, and a
    BytesIO has no name the scheduler knows ("Semaphore or Lock ... not
    known"); the buffer is this process's own, so a local lock is right.
    """
    try:
        import dask  # lazy: optional dependency (cluster extra)
    except ImportError:  # no dask: xarray takes a thread lock already
        return contextlib.nullcontext()
    return dask.config.set(scheduler="synchronous")


def save(data, path):
    """Write a Dataset, a DataTree or a {collective: Dataset} mapping to `path`.

    The file appears whole or not at all: it is built in memory, written
    beside `path` and renamed over it.  Only a regular file is replaced; a
    failed write raises `output_path.WriteFailed`.
    """
    return atomic_write_bytes(path, to_bytes(data))


def save_or_rescue(data, path, what="results"):
    """`save`, and when `path` cannot take the file (no space, a quota, a
    read-only or vanished folder), put it in a rescue folder and raise
    `output_path.ResultsRescued` saying where and how to get it back."""

    image = to_bytes(data)
    try:
        return write_bytes(path, image)
    except WriteFailed as e:
        if not is_no_room(e):
            raise
        where = rescue(path, lambda tmp: _write_image(tmp, image), need=len(image))
        if where is None:
            err = ResultsRescued(f"{e}; no rescue folder had room either "
                                 f"({', '.join(rescue_folders())}): the {what} are lost "
                                 "unless sidecar files remain beside it")
        else:
            err = ResultsRescued(f"{e}; the {what} are safe in {where}: move them back "
                                 f"with `mv {where} {path}` once there is room")
        err.where = where
        raise err from e


def _write_image(tmp, image):
    with open(tmp, "wb") as f:
        f.write(image)


def _as_parts(data):
    if isinstance(data, xr.Dataset):
        return {data.attrs.get("collective") or "results": data}
    if isinstance(data, xr.DataTree):
        # every node holding data, at its path: a suite nests collective/variant/...
        parts = {node.path.strip("/") or (node.attrs.get("collective") or "results"):
                 node.to_dataset(inherit=False) for node in data.subtree if node.has_data}
        if not parts:
            raise ValueError("nothing to save")
        return parts
    if isinstance(data, Mapping):  # {name: Dataset}, run_many's
        if not data:
            raise ValueError("nothing to save")
        return dict(data)
    raise TypeError(f"cannot save {type(data).__name__}")


def _current(ds, where, kind):
    """`ds` upgraded to the newest schema and checked: the one path every
    results file is read through (load, compare, report, import, show, the
    doctor's GPU check).  A file of another `kind` than the reader's is
    refused (`schema.check_kind`).

    The times are checked too (`check_times`), also in a file opened lazily
    in chunks: there the check streams over the chunks, one pass that keeps
    memory bounded, so that no bad time reaches a lazy statistic either."""
    claimed = ds.attrs.get("schema")
    ds = check_kind(check_required(upgrade(ds, where), where, claimed), where, kind)
    return check_times(ds, where)


def file_kind(path):
    """The kind of results `path` holds (``"sweep"``, ``"gpu-check"``:
    `schema.KINDS`), from its attrs alone; None when it is not a file of
    this kit's schema (any version), holds a kind the kit does not know, or
    cannot be read (a FIFO is not opened)."""
    import h5py  # lazy: only to peek at a file's attrs (xarray opens it otherwise)

    if not os.path.isfile(path):  # a FIFO would block the reader for ever
        return None
    try:
        with h5py.File(path, "r") as f:
            attrs = {k: f.attrs[k] for k in ("schema", "kind") if k in f.attrs}
    except (OSError, ValueError):
        return None
    attrs = {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in attrs.items()}
    try:
        kind = kind_of(upgrade(xr.Dataset(attrs=attrs), path).attrs)
    except SchemaError:
        return None
    return kind if kind in KINDS else None


def open_parts(path, chunks=None, kind=SWEEP):
    """{collective: Dataset} for every collective in the file (lazy with
    `chunks`); a file of another `kind` (`schema.KINDS`) is refused."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CCBenchError(f"{path}: no such results file")
    if not os.path.isfile(path):  # a FIFO would block the reader for ever
        raise SchemaError(f"{path}: not a results file (not a regular file)")
    check_content(path)  # a history's filed run: as it was filed, or refused
    try:
        root = xr.open_dataset(path, engine="h5netcdf", chunks=chunks)
    except (OSError, ValueError) as e:
        raise SchemaError(f"{path}: not a readable netCDF results file ({e})") from e
    names = (json.loads(root.attrs.get("collectives") or "[]")
             or [root.attrs.get("collective") or "results"])
    parts = {names[0]: _current(root, path, kind)}
    for name in names[1:]:
        parts[name] = _current(xr.open_dataset(path, engine="h5netcdf", group=name,
                                               chunks=chunks), f"{path} (group {name})", kind)
    for ds in parts.values():
        ds.attrs.pop("collectives", None)
    return parts


def load(path, chunks=None, kind=SWEEP):
    """The results in `path`: a Dataset for one collective, else a DataTree.
    `kind` is what the caller reads (`schema.KINDS`): a file of another
    kind is refused in one line.

    With `chunks` the data stay on disk as dask arrays: ``chunks={}`` gives
    one dask chunk per file chunk (one (algorithm, placement, size) block),
    ``chunks="auto"`` joins whole file chunks up to ~128 MiB (fewer, larger
    reads: about 3x faster to reduce; see bench/bigdata.py).
    """
    parts = open_parts(path, chunks=chunks, kind=kind)
    if len(parts) == 1:
        return next(iter(parts.values()))
    return xr.DataTree.from_dict(parts)


_CHUNK_TARGET = 32 << 20


def analysis_ready(ds, limit=None):
    """`ds` in memory when its per-iteration data are small, else as dask
    arrays of whole (algorithm, placement, size) blocks joined up to ~32 MiB,
    so that statistics, tables and plots stream over the file instead of
    loading it.  (Larger chunks make full passes cheaper and reads of one
    size dearer; 32 MiB gave the fastest report in bench/bigdata.py.)
    Without dask (not installed, or a report's kernel started without it:
    `memory.needs_dask`) the data are loaded whole.

    `limit` defaults to `memory.in_memory_limit` (CCB_IN_MEMORY_LIMIT or
    256 MiB).
    """
    if limit is None:
        limit = in_memory_limit()
    per_iteration = [v for v in PER_ITERATION if v in ds]
    if (sum(ds[v].nbytes for v in per_iteration) <= limit or "size" not in ds.dims
            or not installed("dask")):
        return ds.load()
    lat = ds["latency"]
    blocks = max(1, lat.sizes["algorithm"] * lat.sizes["placement"] * lat.sizes["size"])
    per_block = max(lat.nbytes // blocks, 1)
    return ds.chunk({"algorithm": 1, "placement": 1,
                     "size": max(1, min(ds.sizes["size"], _CHUNK_TARGET // per_block))})
