"""Statistics over iterations and ranks (docs/statistics.md).

Iteration time = a reduction over ranks (max by default: the collective is
done when the slowest rank is); reported time = a statistic over iterations
(avg, min, max, std, or any percentile pNN).
"""
import re

from ..errors import ConfigError

RANK_STATS = ("max", "min", "mean")
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


def compute_all(arrays):
    """`arrays` (DataArrays) with their values, in one pass when some are
    dask-backed (they then share the reads of the file's chunks)."""
    if any(a.chunks for a in arrays):
        import dask
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


def over_ranks(da, how="max", dim="rank"):
    if how not in RANK_STATS:
        raise ConfigError(f"unknown rank reduction {how!r}; use one of {', '.join(RANK_STATS)}",
                          "rank_stat")
    return getattr(da, how)(dim)
