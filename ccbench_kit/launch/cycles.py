"""Repeated sweeps, as nccl-tests' ``-N`` (``--run_cycles``): the whole size
sweep runs `n` times, one after another, and every cycle's iterations are
kept.

nccl-tests prints each cycle's rows; the kit prints each cycle's table and
writes one Dataset whose `iteration` runs over every cycle (cycle c holds
iterations c·iters ... (c+1)·iters - 1), with a ``cycle`` coordinate along
`iteration` and attr ``cycles``.  Every cycle runs in one job, as nccl-tests'
cycles run in one process (`api` launches them as parts of one `job.Job`);
``job_per_cycle`` starts a fresh job for each instead (`run_cycles`), so
that the spread between cycles includes start-up effects such as placement,
first touch and communicator init.  If a cycle fails, the cycles before it
are saved, marked incomplete.
"""
import os

import numpy as np

from .. import dataset
from ..errors import ConfigError


def check_cycles(n, flag="--cycles"):
    try:
        n = int(n)
    except (TypeError, ValueError):
        raise ConfigError(f"must be a whole number of cycles, got {n!r}", flag) from None
    if n < 1:
        raise ConfigError(f"must be at least 1, got {n}", flag)
    return n


def combine(cycles):
    """One Dataset from the per-cycle Datasets of one collective."""

    # xarray only where Datasets are joined: `ccbench run` imports this module
    # before it reads its arguments, and bad input needs no xarray
    import xarray as xr  # lazy: (above)
    first = cycles[0]
    iters = [ds.sizes["iteration"] for ds in cycles]
    joined = xr.concat([ds.drop_vars("iteration") for ds in cycles], dim="iteration",
                       data_vars="minimal", coords="minimal", compat="override",
                       join="override", combine_attrs="override")
    joined = joined.assign_coords(
        iteration=np.arange(sum(iters), dtype=np.int64),
        cycle=("iteration", np.repeat(np.arange(len(cycles), dtype=np.int64), iters)))
    if "wrong" in joined:    # per (algorithm, placement, size): the worst cycle's count
        joined["wrong"] = xr.concat([ds["wrong"] for ds in cycles], "cycle").max("cycle")
    joined.attrs = dict(first.attrs)
    joined.attrs["cycles"] = len(cycles)
    joined.attrs["iters"] = int(sum(iters))
    done = all(ds.attrs.get("complete", "true") == "true" for ds in cycles)
    joined.attrs["complete"] = "true" if done else "false"
    return joined


def run_cycles(run_once, n, out, on_cycle=None):
    """Run `run_once(out=PATH)` `n` times, a job each; return {name:
    combined Dataset}.

    `run_once` returns {name: Dataset} (None on ranks other than 0 of the
    user's own MPI job, which then returns None too).  `on_cycle(c, parts)`
    is called after each cycle (the CLI prints its table).
    """
    done = []
    try:
        for c in range(n):
            part = f"{out}.cycle{c}.part"
            parts = run_once(out=part)
            if parts is None:
                return None
            done.append({k: v.load() for k, v in parts.items()})
            if os.path.exists(part):
                os.unlink(part)
            if on_cycle:
                on_cycle(c, parts)
    except BaseException as e:
        save_cycles(done, n, out, e)
        raise
    return save_cycles(done, n, out)


def save_cycles(done, n, out, error=None):
    """{name: combined Dataset} of the cycles `done` ([{name: Dataset}] a
    cycle) of `n`, saved to `out`; after `error`, the cycles before it are
    kept, marked incomplete (nothing is saved when none was done)."""
    if not done:
        return {}
    result = {k: combine([d[k] for d in done]) for k in done[0]}
    if error is not None:
        why = f"cycle {len(done) + 1} of {n} failed"
        first = str(error).splitlines()[0] if str(error) else ""
        for ds in result.values():
            ds.attrs["complete"] = "false"
            ds.attrs["incomplete_reason"] = f"{why}: {first}" if first else why
    dataset.save(result, out)
    return result
