"""A saved healthy baseline of a cluster, and a run scored against it.

Peer ratios cannot see a fault that hits every node alike (a driver or
library regression, a fabric-wide slowdown): every node is slow, so none
stands out from its peers.  A baseline saved on a healthy day can.

Generic over the doctor's Datasets: every data variable with a ``repeat``
dimension (the samples), a ``node`` dimension, and an attr ``better``
(``"higher"`` or ``"lower"``) is a figure; its other dimensions (``gpu``,
a pair's ``peer``...) are kept by label.  A figure of the run is scored
against the baseline's figure at the same labels:

- ratio = median(run samples) / median(baseline samples), with a bootstrap
  90 % interval (both sides resampled);
- robust z = (median(run) - median(baseline)) / (1.4826 MAD(baseline));
  reported, not judged on: five samples of a quiet GPU have a MAD near
  zero, which makes any shift "many sigmas";
- flagged when the ratio is past `THRESHOLD` on the bad side (0.8x for
  higher-is-better, 1.25x for lower-is-better) and the interval does not
  reach 1.

The file is JSON (data only, never run): ``schema`` ``ccbench-baseline/1``,
the nodes and (for GPUs) each GPU's model, and each figure's samples.
A baseline of other nodes (another cluster) or other GPU models is refused,
naming the file: a ratio between different hardware says nothing.
"""
import datetime
import json
import math
from dataclasses import dataclass

import numpy as np

from .._version import __version__
from .._files import atomic_write_text
from ..dataset.stats import bootstrap, interval
from ..bounded import loads_json, read_text
from ..errors import ConfigError

SCHEMA = "ccbench-baseline/1"
THRESHOLD = 0.8
SAMPLES = "repeat"


def figures(ds):
    """Names of `ds`'s figures: variables with samples, a node and a `better` side."""
    return [n for n, v in ds.data_vars.items()
            if SAMPLES in v.dims and "node" in v.dims
            and v.attrs.get("better") in ("higher", "lower")]


def _identity(ds):
    ident = {"nodes": [str(n) for n in ds["node"].values]}
    if "gpu_name" in ds.coords:
        ident["models"] = {f"{n}/{g}": str(ds["gpu_name"].sel(node=n, gpu=g).values)
                           for n in ds["node"].values for g in ds["gpu"].values}
    return ident


def save(ds, path, flag="--save-baseline"):
    """Write `ds`'s figures as a baseline to `path` (JSON, replaced whole)."""
    atomic_write_text(path, json.dumps(as_dict(ds, flag), indent=1))
    return path


def from_dataset(ds, path=""):
    """A `Baseline` made from a run's Dataset itself (``ccbench compare``)."""
    d = as_dict(ds, "compare")
    return Baseline(str(path), d["identity"], d["figures"], str(ds.attrs.get("created", "")))


def as_dict(ds, flag):
    """The baseline file's content for `ds`."""
    names = figures(ds)
    if not names:
        raise ConfigError("this run has no figure to keep as a baseline", flag)
    out = {"schema": SCHEMA, "kit_version": __version__,
           "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "identity": _identity(ds), "figures": {}}
    for name in names:
        v = ds[name].transpose(*[d for d in ds[name].dims if d != SAMPLES], SAMPLES)
        dims = [d for d in v.dims if d != SAMPLES]
        out["figures"][name] = {
            "dims": dims, "labels": {d: [str(x) for x in v[d].values] for d in dims},
            "better": v.attrs["better"], "units": v.attrs.get("units", ""),
            "samples": _nan_to_none(v.values.tolist())}
    return out


def _nan_to_none(x):
    if isinstance(x, list):
        return [_nan_to_none(y) for y in x]
    return None if isinstance(x, float) and math.isnan(x) else x


@dataclass
class Baseline:
    path: str
    identity: dict
    figures: dict  # name -> {"dims", "labels", "better", "units", "samples"}
    created: str = ""

    def samples(self, name, where):
        """The baseline's samples of figure `name` at labels `where` ({dim: label}), or None."""
        f = self.figures.get(name)
        if f is None:
            return None
        node = f["samples"]
        for d in f["dims"]:
            label = str(where.get(d))
            if label not in f["labels"][d]:
                return None
            node = node[f["labels"][d].index(label)]
        arr = np.array([np.nan if x is None else x for x in node], dtype=float)
        return arr[np.isfinite(arr)]


def load(path, flag="--baseline"):
    """The `Baseline` in `path`; ConfigError naming `flag` and the file if it
    is not one, before anything is measured.

    The whole file is checked: at most `bounded.MAX_BYTES` (a larger file
    is not read), nesting within `bounded.MAX_DEPTH`, a UTF-8 byte-order
    mark accepted, the schema, and every figure's samples: a nested list
    shaped as its labels say, of finite positive numbers (or null, a
    sample that was not measured).  A baseline that says -0.8 or NaN must
    not become a confident verdict."""
    try:
        data = loads_json(read_text(path, "a baseline file"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such baseline file", flag) from None
    except ConfigError as e:
        raise ConfigError(str(e), flag) from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"{path}: not a baseline file (not readable JSON: "
                          f"{str(e).splitlines()[0][:160]})", flag) from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        raise ConfigError(f"{path}: not a ccbench baseline of schema {SCHEMA} (it says "
                          f"{schema!r}); save one with --save-baseline", flag)
    figs, ident = data.get("figures"), data.get("identity")
    if not isinstance(figs, dict) or not isinstance(ident, dict) \
            or not isinstance(ident.get("nodes"), list):
        raise ConfigError(f"{path}: a {SCHEMA} file needs 'identity' (with 'nodes') and "
                          "'figures'", flag)
    for name, f in figs.items():
        if not (isinstance(f, dict) and isinstance(f.get("dims"), list)
                and isinstance(f.get("labels"), dict) and f.get("better") in ("higher", "lower")
                and isinstance(f.get("samples"), list)):
            raise ConfigError(f"{path}: figure {name!r} is not dims/labels/better/samples", flag)
        problem = _samples_problem(f)
        if problem:
            raise ConfigError(f"{path}: figure {name!r}: {problem}", flag)
    return Baseline(str(path), ident, figs, str(data.get("created", "")))


def _samples_problem(figure):
    """What is wrong with a figure's samples (None: nothing): its labels
    must give each dimension's length, the samples nest one list per
    dimension with those lengths, then the repeats: finite numbers > 0, or
    null."""
    dims, labels = figure["dims"], figure["labels"]
    shape = []
    for d in dims:
        if not isinstance(d, str) or not isinstance(labels.get(d), list) \
                or not all(isinstance(x, str) for x in labels[d]):
            return f"dimension {d!r} has no list of labels"
        shape.append(len(labels[d]))
    stack = [(figure["samples"], 0, ())]
    while stack:
        node, depth_, where = stack.pop()
        if not isinstance(node, list):
            return f"samples at {list(where)} are not a list"
        if depth_ < len(shape):
            if len(node) != shape[depth_]:
                return (f"samples at {list(where)} have {len(node)} entries, the labels of "
                        f"{dims[depth_]!r} {shape[depth_]}")
            stack.extend((child, depth_ + 1, where + (i,)) for i, child in enumerate(node))
            continue
        for x in node:
            if x is None:
                continue
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                return f"a sample at {list(where)} is {_short(x)}, not a number"
            if not (math.isfinite(x) and x > 0):
                return (f"a sample at {list(where)} is {x!r}: figures are finite and positive "
                        "(a time, a bandwidth)")
    return None


def _short(value):
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_matches(baseline, ds, flag="--baseline"):
    """Refuse a baseline of other nodes or other GPU models (ConfigError naming the file)."""
    nodes = [str(n) for n in ds["node"].values]
    theirs = [str(n) for n in baseline.identity.get("nodes", [])]
    if not set(nodes) & set(theirs):
        raise ConfigError(f"{baseline.path}: recorded on {', '.join(theirs) or 'no node'}, "
                          f"this run checks {', '.join(nodes)}: a baseline of another "
                          "cluster", flag)
    models = baseline.identity.get("models") or {}
    if "gpu_name" in ds.coords:
        for key, now in _identity(ds).get("models", {}).items():
            if key in models and models[key] != now:
                raise ConfigError(f"{baseline.path}: {key} was a {models[key]} when the "
                                  f"baseline was saved, it is a {now} now: a baseline of "
                                  "another GPU model", flag)


@dataclass
class Score:
    """One figure at one place, against the baseline."""

    figure: str
    where: dict      # {dim: label}, e.g. {"node": "n1", "gpu": 0}
    now: float       # median of the run's samples
    base: float      # median of the baseline's samples
    ratio: float
    ci: tuple        # bootstrap 90 % interval of the ratio
    z: float         # robust z (MAD of the baseline)
    better: str
    flagged: bool


def _score_one(now, base, better, threshold, rng):
    m_now, m_base = float(np.median(now)), float(np.median(base))
    ratio = m_now / m_base if m_base else math.nan
    with np.errstate(all="ignore"):
        boot = bootstrap(now, "median", rng) / bootstrap(base, "median", rng)
    ci = interval(boot, 0.90)
    mad = 1.4826 * float(np.median(np.abs(base - m_base)))
    z = (m_now - m_base) / mad if mad > 0 else math.copysign(math.inf, m_now - m_base) \
        if m_now != m_base else 0.0
    if better == "higher":
        flagged = ratio <= threshold and ci[1] < 1
    else:
        flagged = ratio >= 1 / threshold and ci[0] > 1
    return m_now, m_base, ratio, ci, z, flagged


def score(ds, baseline, threshold=THRESHOLD, seed=0):
    """[`Score`] of every figure of `ds` the baseline also has, place by place."""
    rng = np.random.default_rng(seed)
    out = []
    for name in figures(ds):
        if name not in baseline.figures:
            continue
        v = ds[name]
        dims = [d for d in v.dims if d != SAMPLES]
        for idx in np.ndindex(*[v.sizes[d] for d in dims]):
            where = {d: v[d].values[i].item() for d, i in zip(dims, idx)}
            now = np.asarray(v.isel(dict(zip(dims, idx))).values, dtype=float)
            now = now[np.isfinite(now)]
            base = baseline.samples(name, where)
            if base is None or not base.size or not now.size:
                continue
            m_now, m_base, ratio, ci, z, flagged = _score_one(now, base, v.attrs["better"],
                                                              threshold, rng)
            out.append(Score(name, where, m_now, m_base, ratio, ci, z, v.attrs["better"],
                             flagged))
    return out
