"""The results schema (docs/data-contract.md).

A file says what it holds (attr ``kind``, `KINDS`).  A sweep is one Dataset
per collective: dims (algorithm, placement, size, rank, iteration);
`latency` and optional `start` in µs; `wrong` per (algorithm, placement,
size).  A GPU check (the doctor's ``--local``) has dims (node, gpu, repeat).
Both keep flat attrs with nested data as JSON strings, since netCDF takes no
dicts, None or bools.  The version written is `SCHEMA`; `versions` keeps
the history.
"""
import json
from dataclasses import dataclass

import numpy as np

from .versions import GPU_CHECK, SCHEMA, SWEEP, SchemaError

DIMS = ("algorithm", "placement", "size", "rank", "iteration")
PLACEMENTS = ("out_of_place", "in_place")
REQUIRED_ATTRS = ("schema", "kind", "collective", "dtype", "op", "root", "nranks", "backend",
                  "library", "timing", "warmup", "iters", "kit_version", "created",
                  "command", "hosts", "env", "source", "complete", "group_size")
REQUIRED_COORDS = ("algorithm", "placement", "size", "count", "in_bytes", "out_bytes",
                   "rank", "host", "device", "iteration")
REQUIRED_VARIABLES = ("latency", "wrong")


@dataclass(frozen=True)
class Kind:
    """What every file of one kind has, and what it is, for messages."""

    dims: tuple
    coords: tuple
    variables: tuple
    attrs: tuple
    what: str       # "a collective's results ..."
    read_with: str  # the commands that read it


KINDS = {
    SWEEP: Kind(DIMS, REQUIRED_COORDS, REQUIRED_VARIABLES, REQUIRED_ATTRS,
                "a collective's results", "`ccbench show`, `compare`, `report`"),
    GPU_CHECK: Kind(("node", "gpu", "repeat"), ("node", "gpu", "repeat", "gpu_name"), (),
                    ("schema", "kind", "kit_version", "created"),
                    "a GPU check (`ccbench doctor --local`)",
                    "`ccbench show`, `ccbench compare BASELINE RUN` of two GPU checks, or "
                    "the doctor_gpu notebook"),
}


def kind_of(attrs):
    """The kind of the Dataset whose attrs these are (`KINDS`)."""
    return str(attrs.get("kind") or SWEEP)


def check_kind(ds, where, kind):
    """SchemaError unless `ds` (checked, current) holds `kind`: a reader of
    one kind refuses another in one line that names what reads it."""
    found = kind_of(ds.attrs)
    if found != kind:
        have, want = KINDS[found], KINDS[kind]
        raise SchemaError(f"{where}: {have.what}, not {want.what}; read it with "
                          f"{have.read_with}")
    return ds


def netcdf_safe(value):
    """An attr value netCDF can store: JSON for containers, str for the rest."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value


def make_dataset(*, algorithms, placements, sizes, counts, in_bytes, out_bytes,
                 latency, wrong, ranks, hosts, devices, start=None, attrs, extra_coords=None):
    """Assemble a results Dataset (schema `SCHEMA`) from plain arrays.

    Parameters
    ----------
    latency : array, shape (algorithm, placement, size, rank, iteration), µs
    wrong : array, shape (algorithm, placement, size); -1 = not checked
    start : array like `latency`, optional; start times on the common clock
    attrs : dict; missing required attrs are filled with empty values
    extra_coords : dict name -> (dims, values), optional (e.g. rank groups)
    """
    latency = np.asarray(latency, dtype=np.float64)
    coords = {
        "algorithm": np.asarray(algorithms, dtype=object).astype(str),
        "placement": np.asarray(placements, dtype=object).astype(str),
        "size": np.asarray(sizes, dtype=np.int64),
        "count": ("size", np.asarray(counts, dtype=np.int64)),
        "in_bytes": ("size", np.asarray(in_bytes, dtype=np.int64)),
        "out_bytes": ("size", np.asarray(out_bytes, dtype=np.int64)),
        "rank": np.asarray(ranks, dtype=np.int64),
        "host": ("rank", np.asarray(hosts, dtype=object).astype(str)),
        "device": ("rank", np.asarray(devices, dtype=object).astype(str)),
        "iteration": np.arange(latency.shape[-1], dtype=np.int64),
    }
    coords.update(extra_coords or {})
    data = {
        "latency": (DIMS, latency, {"units": "us", "long_name": "duration of one iteration on one rank"}),
        "wrong": (DIMS[:3], np.asarray(wrong, dtype=np.int64),
                  {"long_name": "wrong elements after the check; -1 = not checked"}),
    }
    if start is not None:
        data["start"] = (DIMS, np.asarray(start, dtype=np.float64),
                         {"units": "us", "long_name": "iteration start on rank 0's clock"})
    full = {k: "" for k in REQUIRED_ATTRS}
    full.update(root=-1, nranks=len(coords["rank"]), warmup=0, iters=latency.shape[-1],
                complete=True)
    full.update(attrs)
    if full.get("group_size") in ("", None):
        full["group_size"] = full["nranks"]  # one group of every rank
    full["schema"], full["kind"] = SCHEMA, SWEEP
    # xarray where a Dataset is made: the ranks import this module for its
    # names and, but for rank 0, make none (launch/worker.py)
    import xarray as xr  # lazy: only where a Dataset is made (above)
    from . import accessor  # noqa: F401  # lazy: as xarray; registers ds.ccb on what it makes
    ds = xr.Dataset(data, coords=coords, attrs={k: netcdf_safe(v) for k, v in full.items()})
    ds["size"].attrs["units"] = "B"
    return ds


def check_required(ds, where, claimed=None):
    """SchemaError naming what a Dataset that claims our schema lacks, for
    its kind (`KINDS`).

    `claimed` is the version the file said, before any upgrade."""
    kind = KINDS.get(kind_of(ds.attrs))
    if kind is None:
        raise SchemaError(f"{where}: kind {kind_of(ds.attrs)!r} is not one this kit reads "
                          f"({', '.join(KINDS)})")
    missing = ([f"dim {d!r}" for d in kind.dims if d not in ds.dims]
               + [f"coord {c!r}" for c in kind.coords if c not in ds.coords]
               + [f"variable {v!r}" for v in kind.variables if v not in ds.data_vars]
               + [f"attr {a!r}" for a in kind.attrs if a not in ds.attrs])
    if missing:
        raise SchemaError(f"{where}: claims schema {claimed or ds.attrs.get('schema')} but lacks "
                          + ", ".join(missing))
    return ds


def check_times(ds, where):
    """SchemaError unless every time in `latency` (and `start` offsets are
    left alone) is a positive finite number of µs or missing (NaN), as the
    importers require: a file made elsewhere must not put a negative or
    infinite time, hence a negative or infinite busbw, on a page or past a
    ``--min-ratio`` gate.

    A file opened lazily (dask arrays) is checked the same way, in one
    streaming pass over its chunks: memory stays at a few chunks, and only
    the block holding the first bad time is read again to name it."""
    if "latency" not in ds.data_vars:
        return ds
    lat = ds["latency"]
    if not np.issubdtype(lat.dtype, np.number):
        raise SchemaError(f"{where}: variable 'latency' holds {lat.dtype} values, not times")
    bad = (lat <= 0) | np.isinf(lat)
    count = int(bad.sum())           # a dask reduction when `lat` is lazy: streamed
    if count:
        index, value = _first_bad(lat, bad)
        where_in = ", ".join(f"{d} {_shown(ds[d].values[i]) if d in ds.coords else i}"
                             for d, i in zip(lat.dims, index) if d != "iteration")
        raise SchemaError(f"{where}: variable 'latency' holds {count} value(s) that are not a "
                          f"positive finite time in µs (first: {value:g} at {where_in}); "
                          "refused rather than shown as a bandwidth")
    return ds


def _shown(value):
    """A coordinate value for a one-line message: as it is when printable,
    else quoted with its escapes (a name from a file may hold a newline)."""
    text = str(value)
    return text if text.isprintable() else repr(text)


def _first_bad(lat, bad):
    """(index, value) of the first bad time, in memory only the small map of
    which leading blocks hold one and then that one block."""
    lead = lat.dims[:min(3, lat.ndim)]
    rest = [d for d in lat.dims if d not in lead]
    blocks = np.asarray(bad.any(dim=rest).values if rest else bad.values)
    head = tuple(int(i) for i in np.argwhere(blocks)[0])
    block = np.asarray(lat[head].values)
    tail = tuple(int(i) for i in np.argwhere((block <= 0) | np.isinf(block))[0])
    return head + tail, float(block[tail])


def library_name(attrs):
    """The `library` attr without build details ("Open MPI v4.1.4")."""
    return str(attrs.get("library", "")).split(",")[0].strip()


def not_available(ds):
    """{algorithm: reason} for algorithms the backend refused (attr
    ``not_available``: {algorithm: {size: reason}}), reasons merged over sizes."""
    raw = attr_json(ds, "not_available", {}) or {}
    out = {}
    if not isinstance(raw, dict):
        return out
    for alg, by_size in sorted(raw.items()):
        if isinstance(by_size, dict) and by_size:
            reasons = sorted({str(v) for v in by_size.values()})
            n = len(by_size)
            out[str(alg)] = "; ".join(reasons) + f" ({n} size{'s' if n != 1 else ''})"
        elif by_size:
            out[str(alg)] = str(by_size)
    return out


def attr_json(ds, name, default=None):
    """A JSON-encoded attr decoded (``hosts``, ``env``...)."""
    raw = ds.attrs.get(name, "")
    if raw in ("", None):
        return default
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw


def results_kind(attrs):
    """What made a results file, from its attrs: "doctor" (``ccbench
    doctor``: its verdict is recorded), "import" (a baseline read from
    another tool's output: its source is recorded) or "run"."""
    if str(attrs.get("source", "")).strip():
        return "import"
    if str(attrs.get("doctor_verdict", "")).strip():
        return "doctor"
    return "run"
