"""A saved healthy baseline of a cluster, and today's figures scored
against it.

Peer ratios (`verdict`) compare a node with the other nodes of the same
run; a fault that hits several nodes alike (half the links trained down, a
driver or library regression everywhere) moves the peers too and is
invisible to them.  A baseline is the same check's figures saved on the
healthy cluster; a later run is scored against it, figure by figure.

Generic over the kit's results: any ``ccbench/1`` Dataset (a doctor's
``pairs`` part, a ``ccbench run``) is reduced to one robust figure per
``algorithm`` (a pair of nodes, a node) and ``size``: the median over
iterations of the slowest rank's time, with its median absolute deviation.

- `save(ds, path)` writes that reduction (JSON, schema ``BASELINE_SCHEMA``);
- `load(path, flag)` reads it back, or raises ConfigError naming the flag;
- `score(baseline, ds)` gives each figure's rate ratio (baseline time over
  today's: below 1 is slower) and its robust z, per repeat where the
  Dataset has the doctor's ``repeat`` coordinate.
"""
import json

import numpy as np
import xarray as xr

from .._files import atomic_write_text
from ..errors import ConfigError

BASELINE_SCHEMA = "ccbench-baseline/1"
MAD_TO_SIGMA = 1.4826  # a normal distribution's sigma over its MAD


def _slowest_rank_us(ds):
    """(algorithm, size, iteration) latency (µs): the first placement that
    was run, the slowest rank of every iteration."""
    lat = ds["latency"]
    for p in range(lat.sizes["placement"]):
        sel = lat.isel(placement=p)
        if int(sel.count()):
            return sel.max("rank")
    return lat.isel(placement=0).max("rank")


def figures(ds):
    """{algorithm: {size (str): {"median_us", "mad_us", "n"}}} of `ds`."""
    lat = _slowest_rank_us(ds)
    out = {}
    for alg in lat["algorithm"].values:
        per_size = {}
        for size in lat["size"].values:
            v = lat.sel(algorithm=alg, size=size).values
            v = v[np.isfinite(v)]
            if v.size:
                med = float(np.median(v))
                per_size[str(int(size))] = {"median_us": med,
                                            "mad_us": float(np.median(np.abs(v - med))),
                                            "n": int(v.size)}
        out[str(alg)] = per_size
    return out


def save(ds, path):
    """Write `ds`'s figures as a baseline to `path` (JSON)."""
    nodes = ds.attrs.get("doctor_nodes")
    hosts = json.loads(nodes) if isinstance(nodes, str) else list(nodes or ds.attrs.get("hosts", []))
    doc = {"schema": BASELINE_SCHEMA, "collective": ds.attrs.get("collective", ""),
           "backend": ds.attrs.get("backend", ""), "hosts": hosts,
           "created": ds.attrs.get("created", ""), "figures": figures(ds)}
    atomic_write_text(path, json.dumps(doc, indent=1))
    return path


def load(path, flag="--baseline"):
    """The baseline saved at `path`; ConfigError (naming `flag` and the
    file) when it is missing, not JSON, or of another schema."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}", flag) from None
    except ValueError:
        raise ConfigError(f"{path} is not a baseline file (not JSON)", flag) from None
    if not isinstance(doc, dict) or doc.get("schema") != BASELINE_SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else None
        raise ConfigError(f"{path} is not a baseline of schema {BASELINE_SCHEMA} (it says "
                          f"{got!r}); save one with --save-baseline", flag)
    if not isinstance(doc.get("figures"), dict) or not isinstance(doc.get("hosts"), list):
        raise ConfigError(f"{path}: a baseline needs \"hosts\" and \"figures\"", flag)
    doc["path"] = str(path)
    return doc


def check_matches(baseline, hosts, backend, flag="--baseline"):
    """ConfigError when `baseline` was saved on other nodes or through
    another backend than this run's: its figures would not compare."""
    if sorted(baseline["hosts"]) != sorted(hosts):
        raise ConfigError(f"{baseline['path']} was saved on {', '.join(baseline['hosts'])}, "
                          f"not on the nodes checked now ({', '.join(hosts)})", flag)
    if baseline.get("backend") and baseline["backend"] != backend:
        raise ConfigError(f"{baseline['path']} was measured through --backend "
                          f"{baseline['backend']}, this check through --backend {backend}", flag)


def reference_us(baseline, algorithm, size):
    """The baseline's median time (µs) of one figure, NaN if it has none."""
    fig = baseline["figures"].get(str(algorithm), {}).get(str(int(size)))
    return float(fig["median_us"]) if fig else float("nan")


def score(baseline, ds):
    """`ds` against `baseline`: a Dataset with ``ratio`` (the baseline's
    time over today's, a rate ratio: 0.5 is half as fast) and ``z`` (today's
    time minus the baseline's, in robust sigmas of the baseline), over
    (algorithm, size[, repeat])."""
    lat = _slowest_rank_us(ds)
    if "repeat" in ds.coords:
        lat = lat.assign_coords(repeat=("iteration", ds["repeat"].values))
        today = lat.groupby("repeat").median("iteration")
    else:
        today = lat.median("iteration")
    algs, sizes = lat["algorithm"].values, lat["size"].values
    ref = np.array([[reference_us(baseline, a, s) for s in sizes] for a in algs])
    mad = np.array([[baseline["figures"].get(str(a), {}).get(str(int(s)), {}).get("mad_us",
                                                                                 np.nan)
                     for s in sizes] for a in algs], dtype=float)
    dims = ("algorithm", "size")
    ref_da = xr.DataArray(ref, dims=dims, coords={"algorithm": algs, "size": sizes})
    mad_da = xr.DataArray(mad, dims=dims, coords={"algorithm": algs, "size": sizes})
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = ref_da / today
        z = (today - ref_da) / (MAD_TO_SIGMA * mad_da)
    return xr.Dataset({"ratio": ratio, "z": z},
                      attrs={"baseline": baseline.get("path", ""),
                             "baseline_created": baseline.get("created", "")})
