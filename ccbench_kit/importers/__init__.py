"""Baselines into the results schema: nccl-tests (text and ``-J`` JSON),
nccom-test (table and ``--report-to-json-file``), and the AllgatherP bench.

Each format is one reader module in ``ccbench_kit.formats``, beside its
tool's writers, found by content (`registry`).  Every
importer keeps the tool's printed numbers as ``reported_time`` (µs),
``reported_algbw`` and ``reported_busbw``, recomputes the bandwidths from
size and time with the collective's bus factor, and warns
(`ReportedMismatchWarning`, attr ``reported_check``) when they disagree
beyond rounding.  A file no importer can read raises `ImporterError` with the
file, the line and what was expected.

>>> from ccbench_kit import importers
>>> parts = importers.read("all_reduce_perf.log")      # {name: Dataset}
>>> ds = importers.load("nccom.json", collective="all_gather", nranks=32)
"""
import os

from ..dataset.io import open_parts
from ..formats.common.errors import ImporterError, ReportedMismatchWarning
from ..formats.common.source import Hints, Source
from ..output_path import open_regular
from . import registry
from .recipe_dir import find_logs, open_dir
import xarray as xr
from ..formats.nccl_inspector import read_json as nccl_inspector

__all__ = ["Hints", "ImporterError", "ReportedMismatchWarning", "detect", "load", "open_any",
           "read", "read_all", "read_text", "unique_names"]

_HDF5 = b"\x89HDF\r\n\x1a\n"


def _hints(collective=None, nranks=None, partial=False):
    if nranks is not None:
        try:
            nranks = int(nranks)
        except (TypeError, ValueError):
            raise ImporterError("--nranks", None, "a whole number of ranks", nranks) from None
        if nranks < 1:
            raise ImporterError("--nranks", None, "a positive number of ranks", nranks)
    return Hints(collective=collective, nranks=nranks, partial=bool(partial))


def parse_source(src, hints):
    """Datasets from one `Source` (the registry picks the format)."""
    if not src.text.strip():
        raise src.error(None, "results (the file is empty)")
    mod = registry.detect(src)
    if mod is None:
        first = next((ln for ln in src.text.splitlines() if ln.strip()), "")
        raise src.error(1, "a format ccbench can import: " + ", ".join(registry.names())
                        + " (or a ccbench .nc file)", first)
    datasets = mod.parse(src, hints)
    for ds in datasets:
        ds.attrs.setdefault("source", src.path)
    return datasets


def read_text(text, name="<text>", *, collective=None, nranks=None, partial=False):
    """Datasets from in-memory text, as `read` does for a file."""
    return parse_source(Source(name, text), _hints(collective, nranks, partial))


def unique_names(datasets):
    """{name: Dataset}: the collective (or the labels of a recipe's log,
    `recipe_dir.labels`), made unique with dtype, op and root."""
    out = {}
    for ds in datasets:
        a = ds.attrs
        name = a.get("recipe_name") or a.get("collective") or "results"
        if a.get("comm_id"):            # one communicator of a production job
            name = f"{name}-{a['comm_id']}"
        if name in out:
            name = "-".join(str(x) for x in (name, a.get("dtype"), a.get("op"))
                            if x not in ("", None, "none"))
            if int(a.get("root", -1)) >= 0:
                name += f"-root{a.get('root')}"
        base, k = name, 2
        while name in out:
            name, k = f"{base}-{k}", k + 1
        out[name] = ds
    return out


def _inspector_files(folder):
    """The Inspector's ``<host>-pid<pid>.log`` files (or ``.jsonl``) in `folder`."""
    names = sorted(n for n in os.listdir(folder) if n.endswith((".log", ".jsonl")))
    if not names:
        raise ImporterError(folder, None, "NCCL Inspector files (*.log, *.jsonl) or NCCL "
                            "microbenchmark recipe logs (N_M_LOG_*_iterK.txt) in the folder")
    return [os.path.join(folder, n) for n in names]


def read_all(paths, *, collective=None, nranks=None, partial=False):
    """[Dataset] of every result set in `paths` (files or Inspector folders).

    NCCL Inspector files are read together, since each holds the ranks of one
    process and a communicator spans several; every other file on its own.
    """

    hints = _hints(collective, nranks, partial)
    datasets, inspector = [], []
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path):
            if find_logs(path):         # NVIDIA's NCCL microbenchmark recipe
                datasets += list(open_dir(path, lambda p: read(
                    p, collective=collective, nranks=nranks, partial=partial)).values())
                continue
            # read as they are parsed: a dump of a GB is never held whole
            inspector += [Source(p, None) for p in _inspector_files(path)]
            continue
        if not os.path.exists(path):
            raise ImporterError(path, None, "an existing file")
        if is_netcdf(path):
            datasets += list(open_any(path).values())
            continue
        if registry.detect_file(path) is nccl_inspector:
            inspector.append(Source(path, None))    # streamed: never read whole
        else:
            datasets += parse_source(Source.from_file(path), hints)
    if inspector:
        datasets += nccl_inspector.parse_many(inspector, hints)
    return datasets


def read(path, *, collective=None, nranks=None, partial=False):
    """{name: Dataset} of every result set in a baseline file.

    Parameters
    ----------
    path : str or path
    collective, nranks : optional
        For files that do not say (nccom-test output, old nccl-tests logs);
        ignored where the file says.
    partial : bool
        Keep the complete rows of a truncated table, marked incomplete.

    Raises
    ------
    ImporterError
        Unknown format, truncated file, a header with missing columns, garbage.
    """
    hints = _hints(collective, nranks, partial)
    if registry.detect_file(path) is nccl_inspector:     # streamed: never read whole
        return unique_names(nccl_inspector.parse_many([Source(os.fspath(path), None)], hints))
    return unique_names(parse_source(Source.from_file(path), hints))


def is_netcdf(path):
    """Whether `path` starts as HDF5 does; a FIFO or device is not opened
    here (it would block): `Source.from_file` refuses it in one line."""
    try:
        with open_regular(path) as f:
            return f.read(8) == _HDF5
    except OSError:
        return False


def open_any(path, **hints):
    """{name: Dataset} of a ccbench results file or any importable baseline."""
    path = os.fspath(path)
    if os.path.isdir(path):             # an NCCL Inspector dump folder
        return unique_names(read_all([path], **hints))
    if not os.path.exists(path):
        raise ImporterError(path, None, "an existing file")
    if not os.path.isfile(path):  # a FIFO would block the reader for ever
        raise ImporterError(path, None, "a regular file")
    if is_netcdf(path):
        return open_parts(path)  # old versions upgraded; newer or foreign: SchemaError
    return read(path, **hints)


def load(path, **hints):
    """The one Dataset in `path`, or a DataTree when it holds several."""

    parts = open_any(path, **hints)
    if len(parts) == 1:
        return next(iter(parts.values()))
    return xr.DataTree.from_dict(parts)


def detect(path_or_text):
    """The format name of a file (or text), or None."""
    if os.path.exists(str(path_or_text)):
        if is_netcdf(path_or_text):
            return "ccbench netCDF"
        mod = registry.detect_file(path_or_text)
    else:
        mod = registry.detect(Source("<text>", str(path_or_text)))
    return mod.NAME if mod else None
