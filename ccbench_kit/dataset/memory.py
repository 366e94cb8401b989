"""Which results are analysed in memory and which stream from disk (dask).

One rule, read in two places: `io.analysis_ready` loads a part whose
per-iteration data (``latency``, ``start``) fit in `in_memory_limit` bytes
and chunks a larger one; the report's driver asks `needs_dask` first, from
the files' HDF5 metadata alone, so that the kernel of a report of small runs
starts without dask (xarray imports dask.array wherever dask is installed,
about 1.4 s of CPU in a kernel that never holds a dask array).
"""
import os

IN_MEMORY_LIMIT = 256 << 20   # bytes of per-iteration data loaded eagerly
PER_ITERATION = ("latency", "start")


def in_memory_limit():
    """CCB_IN_MEMORY_LIMIT (bytes), else `IN_MEMORY_LIMIT`."""
    return int(os.environ.get("CCB_IN_MEMORY_LIMIT", IN_MEMORY_LIMIT))


def largest_part_bytes(path):
    """The per-iteration bytes of the largest part of results file `path`,
    as analysed (8 bytes an element at least: what xarray decodes them to),
    from its HDF5 metadata (no data read); 0 for a file that is not HDF5:
    another tool's log, which its importer reads whole (and for what is no
    regular file: a FIFO would block the reader)."""
    if not os.path.isfile(path):
        return 0
    import h5py  # lazy: the report's driver asks before anything imports xarray
    try:
        f = h5py.File(path, "r")
    except OSError:
        return 0
    per_group = {}
    with f:
        def visit(name, obj):
            group, _, var = name.rpartition("/")
            if isinstance(obj, h5py.Dataset) and var in PER_ITERATION:
                per_group[group] = (per_group.get(group, 0)
                                    + obj.size * max(obj.dtype.itemsize, 8))
        f.visititems(visit)
    return max(per_group.values(), default=0)


def needs_dask(paths):
    """Whether any part of the files `paths` is analysed from disk (dask)."""
    limit = in_memory_limit()
    return any(largest_part_bytes(p) > limit for p in paths if p)
