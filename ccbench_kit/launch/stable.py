"""``--until-stable TARGET``: repeat a size until its time is known well enough.

After a sweep, each size's 95 % confidence interval of the mean iteration
time (iteration time = the max over ranks; percentile bootstrap of the
iterations, seeded) is compared with the target, a relative half-width
(0.05 = the mean ± 5 %).  Sizes still wider run again, with the same
iterations per round, until they are narrow enough or have `cap` iterations;
every round's iterations are kept, one after another along `iteration`
(NaN past a size's last).  Attr ``until_stable`` (JSON) says the target, the
cap, and per size the iterations, the half-width reached and whether it met
the target.  Every round runs in one job (rank 0 decides between rounds:
`Rounds`); in-process and on a Dask cluster, a round is a run of its own.
"""
import glob
import json
import os

import numpy as np

from .. import dataset
from ..dataset.stats import SEED, bootstrap, interval
from ..errors import ConfigError
from .job import round_path

CONFIDENCE = 0.95


def check_target(target, cap, iters):
    """(target, cap) validated; cap defaults to 10 rounds of `iters`."""
    try:
        target = float(target)
    except (TypeError, ValueError):
        raise ConfigError(f"expected a relative half-width such as 0.05, got {target!r}",
                          "--until-stable") from None
    if not 0 < target < 1e6:
        raise ConfigError(f"must be > 0 (a relative half-width such as 0.05), got {target:g}",
                          "--until-stable")
    cap = 10 * iters if cap is None else int(cap)
    if cap < iters:
        raise ConfigError(f"must be at least the iterations of one round (-n {iters}), got {cap}",
                          "--stable-cap")
    return target, cap


def half_width(times, seed=SEED):
    """Relative half-width of the bootstrap CI of the mean of `times` (NaN dropped)."""
    t = np.asarray(times, dtype=float)
    t = t[np.isfinite(t)]
    if len(t) < 2 or t.mean() <= 0:
        return float("inf")
    lo, hi = interval(bootstrap(t, "mean", np.random.default_rng(seed)), CONFIDENCE)
    return float((hi - lo) / 2 / t.mean())


def widths(ds):
    """{size: the widest half-width over the size's algorithms and placements}."""
    it = ds.ccb.iteration_time("max")
    out = {}
    for size in ds["size"].values:
        sel = it.sel(size=size)
        rows = sel.transpose("algorithm", "placement", "iteration").values.reshape(
            -1, sel.sizes["iteration"])
        ws = [half_width(r) for r in rows if np.isfinite(r).any()]
        out[int(size)] = max(ws) if ws else float("inf")
    return out


class Rounds:
    """The rounds' decisions, wherever they are made: after each round,
    `again` gives the sizes to run once more (the union over the parts);
    `merged` the parts with every round's iterations and the
    ``until_stable`` attr.  The rank task of a job (`launch.sweep_task`)
    decides on rank 0 between rounds, in one launch; `run_until_stable`,
    a launch a round (in-process, a Dask cluster)."""

    def __init__(self, target, cap, iters):
        self.target, self.cap, self.iters = target, cap, iters
        self.collected = {}   # part name -> [Dataset a round]

    def spec(self):
        return {"target": self.target, "cap": self.cap, "iters": self.iters}

    def record(self, name, ds):
        """One round's Dataset of part `name` (loaded)."""
        self.collected.setdefault(name, []).append(ds)

    def again(self):
        """Sizes some part still has wider than the target and room for a
        round more under the cap (sorted); [] when the rounds are done."""
        merged = {k: _merge(v) for k, v in self.collected.items()}
        w = {k: widths(ds) for k, ds in merged.items()}
        n = {k: _iterations(ds) for k, ds in merged.items()}
        return sorted({s for k in merged for s, x in w[k].items()
                       if x > self.target and n[k][s] + self.iters <= self.cap})

    def merged(self):
        """{name: Dataset}: every round's iterations, attr ``until_stable``."""
        out = {}
        for k, rounds in self.collected.items():
            ds = _merge(rounds)
            w, n = widths(ds), _iterations(ds)
            ds.attrs["until_stable"] = json.dumps({
                "target": self.target, "confidence": CONFIDENCE, "cap": self.cap,
                "rounds": len(rounds),
                "iterations": {str(s): n[s] for s in n},
                "half_width": {str(s): round(x, 6) for s, x in w.items()},
                "stable": {str(s): bool(x <= self.target) for s, x in w.items()}})
            ds.attrs["iters"] = int(ds.sizes["iteration"])
            out[k] = ds
        return out


def run_until_stable(run_sizes, sizes, target, cap, iters, out):
    """Run `run_sizes(sizes, out)` ({name: Dataset}), a launch a round, in
    rounds; {name: Dataset}."""
    rounds = Rounds(target, cap, iters)
    k = 0
    while sizes:
        got = run_sizes(sizes, round_path(out, k))
        if got is None:
            return None
        for name, ds in got.items():
            rounds.record(name, ds.load())
        sizes, k = rounds.again(), k + 1
    merged = rounds.merged()
    dataset.save(merged, out)
    for part in glob.glob(f"{glob.escape(str(out))}.round*.part"):
        os.unlink(part)
    return merged


def _iterations(ds):
    it = ds.ccb.iteration_time("max")
    n = np.isfinite(it).any(dim=["algorithm", "placement"]).sum("iteration")
    return {int(s): int(n.sel(size=s)) for s in ds["size"].values}


def _merge(rounds):
    """Round 1's Dataset with later rounds' iterations appended per size."""
    base = rounds[0]
    if len(rounds) == 1:
        return base.copy()
    extra = {int(s): 0 for s in base["size"].values}
    for ds in rounds[1:]:
        for s in ds["size"].values:
            extra[int(s)] += ds.sizes["iteration"]
    total = base.sizes["iteration"] + max(extra.values())
    out = base.reindex(iteration=np.arange(total))
    filled = {int(s): base.sizes["iteration"] for s in base["size"].values}
    for ds in rounds[1:]:
        k = ds.sizes["iteration"]
        for s in ds["size"].values:
            at = filled[int(s)]
            for var in ("latency", "start"):
                if var in ds and var in out:
                    out[var].loc[dict(size=s, iteration=slice(at, at + k - 1))] = \
                        ds[var].sel(size=s).values
            out["wrong"].loc[dict(size=s)] = np.maximum(out["wrong"].sel(size=s).values,
                                                        ds["wrong"].sel(size=s).values)
            filled[int(s)] += k
    return out
