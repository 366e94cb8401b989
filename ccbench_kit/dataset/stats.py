"""Statistics over iterations and ranks (docs/statistics.md), and the
kit's one bootstrap.

Iteration time = a reduction over ranks (max by default: the collective is
done when the slowest rank is); reported time = a statistic over iterations
(avg, min, max, std, or any percentile pNN).  A statistic is named once
here, for DataArrays (`over_iterations`) and plain arrays (`of_values`);
every confidence interval in the kit (compare, the report, --until-stable,
the doctor) resamples with `bootstrap` and reads it with `interval`.
"""
import re
import warnings

import numpy as np

from ..errors import ConfigError

RANK_STATS = ("max", "min", "mean")
# nccl-tests' -a (--average): each rank's time over the iterations first, then
# rank 0's, or the mean, min or max of those across ranks (common.cu, Allreduce
# of deltaSec with average 0/1/2/3)
AVERAGES = {"0": "rank0", "1": "ranks-avg", "2": "ranks-min", "3": "ranks-max"}
_AVERAGE_NAMES = {"rank0": "rank0", "avg": "ranks-avg", "mean": "ranks-avg",
                  "min": "ranks-min", "max": "ranks-max"}
_PCT = re.compile(r"^p(\d+(?:\.\d+)?)$")


def check_stat(stat, flag="-t/--stats"):
    """`stat` if it is avg|mean|min|max|std|median|pNN, else ConfigError."""
    s = str(stat).strip().lower()
    if s in ("avg", "mean", "min", "max", "std", "median"):
        return s
    m = _PCT.match(s)
    if m and 0 <= float(m.group(1)) <= 100:
        return s
    raise ConfigError(f"unknown statistic {stat!r}; use avg, min, max, std, median "
                      "or a percentile such as p50, p99", flag)


# Resamples of every bootstrap, and their seed: two analyses of one file
# give the same intervals.
N_BOOT = 2000
SEED = 0


def of_values(x, stat, axis=-1, skip_nan=False):
    """`stat` (a `check_stat` name) of the numpy array `x` along `axis`;
    with `skip_nan`, NaN marks a missing value (all-NaN gives NaN, silently)."""
    s = check_stat(stat)
    q = None if s in ("avg", "mean", "min", "max", "std") else \
        50.0 if s == "median" else float(s[1:])
    if not skip_nan:
        if q is not None:
            return np.percentile(x, q, axis=axis)
        return getattr(np, "mean" if s == "avg" else s)(x, axis=axis)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if q is not None:
            return np.nanpercentile(x, q, axis=axis)
        return getattr(np, "nan" + ("mean" if s == "avg" else s))(x, axis=axis)


def bootstrap(x, stat, rng, n_boot=N_BOOT):
    """`n_boot` values of `stat` over resamples (with replacement, from
    `rng`, a numpy Generator) of the 1-D array `x`."""
    x = np.asarray(x)
    return of_values(x[rng.integers(0, len(x), size=(n_boot, len(x)))], stat, axis=1)


def interval(samples, confidence):
    """(low, high): the percentile interval of bootstrap `samples` at `confidence`."""
    q = 50 * (1 - confidence)
    lo, hi = np.percentile(samples, [q, 100 - q])
    return float(lo), float(hi)


def compute_all(arrays):
    """`arrays` (DataArrays) with their values, in one pass when some are
    dask-backed (they then share the reads of the file's chunks)."""
    if any(a.chunks for a in arrays):
        import dask  # lazy: optional dependency (cluster extra)
        return list(dask.compute(*arrays))
    return list(arrays)


def over_iterations(da, stat, dim="iteration"):
    """Apply `stat` along `dim` of a DataArray (lazy-safe)."""
    s = check_stat(stat)
    if da.chunks and len(da.chunks[da.get_axis_num(dim)]) > 1:
        da = da.chunk({dim: -1})  # medians and percentiles need `dim` in one chunk
    if s in ("avg", "mean"):
        return da.mean(dim)
    if s == "min":
        return da.min(dim)
    if s == "max":
        return da.max(dim)
    if s == "std":
        return da.std(dim)
    q = 50.0 if s == "median" else float(s[1:])
    return da.quantile(q / 100.0, dim=dim).drop_vars("quantile")


def check_average(value, flag="-a/--average"):
    """nccl-tests' -a value (0-3, or rank0/avg/min/max) as a rank statistic."""
    v = str(value).strip().lower()
    if v in AVERAGES:
        return AVERAGES[v]
    if v in _AVERAGE_NAMES:
        return _AVERAGE_NAMES[v]
    if v in AVERAGES.values():
        return v
    raise ConfigError(f"unknown rank reduction {value!r}; use 0 (rank0), 1 (avg), 2 (min) "
                      "or 3 (max), as nccl-tests' -a", flag)


def per_rank_first(latency, stat, how):
    """`stat` over each rank's iterations, then `how` (an AVERAGES value) across ranks."""
    per = over_iterations(latency, stat)
    if how == "rank0":
        return per.sel(rank=0) if 0 in per["rank"].values else per.isel(rank=0)
    return getattr(per, {"ranks-avg": "mean", "ranks-min": "min", "ranks-max": "max"}[how])("rank")


def describe(stat, rank_stat):
    """How a time was reduced, for tables and plots."""
    if rank_stat in AVERAGES.values():
        across = "rank 0's" if rank_stat == "rank0" else f"the {rank_stat[6:]} over ranks of each rank's"
        return f"{across} {stat} over iterations (nccl-tests -a)"
    return f"{stat} over iterations of the {rank_stat} over ranks"


def over_ranks(da, how="max", dim="rank"):
    if how not in RANK_STATS:
        raise ConfigError(f"unknown rank reduction {how!r}; use one of {', '.join(RANK_STATS)}",
                          "rank_stat")
    return getattr(da, how)(dim)
