"""``ds.ccb``: times, bandwidths and tables of a results Dataset."""
import numpy as np
import pandas as pd
import xarray as xr

from . import stats as _stats
from .attrs import TypedAttrs


@xr.register_dataset_accessor("ccb")
class CCBAccessor:
    """Analysis of one collective's results.

    Examples
    --------
    >>> ds.ccb.time("p99")          # µs, dims (algorithm, placement, size)
    >>> ds.ccb.busbw()              # GB/s (1 GB = 1e9 B)
    >>> print(ds.ccb.summary().to_string())
    """

    def __init__(self, ds):
        self._ds = ds
        self._iteration_times = {}

    # -- basics ---------------------------------------------------------
    @property
    def attrs(self):
        """The attrs as Python values (ints, bools, decoded JSON); the raw
        netCDF strings stay in ``ds.attrs``."""
        return TypedAttrs(self._ds.attrs)

    meta = attrs

    @property
    def collective(self):
        """The collective of attr ``collective``; ConfigError naming the
        file (when the Dataset came from one) and the attr when the kit
        knows no such collective."""
        from ..collectives import get  # lazy: upward (a plugin of xarray's), used here alone

        source = self._ds.encoding.get("source")
        return get(self._ds.attrs["collective"],
                   f"{source}: attr collective" if source else "attr collective")

    @property
    def nranks(self):
        """Ranks in one group (the bus factor's p)."""
        ds = self._ds
        if "group_size" in ds.attrs:
            return int(ds.attrs["group_size"])
        return int(ds.attrs.get("nranks", ds.sizes.get("rank", 1)))

    @property
    def bus_factor(self):
        return self.collective.bus_factor(self.nranks)

    def iteration_time(self, rank_stat="max"):
        """Each iteration's time (µs): `rank_stat` over ranks of `latency`.

        On a lazily opened (dask) Dataset this is computed once, in one pass
        over the file, and kept: with the ranks reduced away it is small, and
        every time, bandwidth, table and plot derives from it.
        """
        lat = self._ds["latency"]
        if not lat.chunks:
            return _stats.over_ranks(lat, rank_stat)
        key = (rank_stat, lat.data.name)  # the dask name changes with the data
        if key not in self._iteration_times:
            self._iteration_times[key] = _stats.over_ranks(lat, rank_stat).compute()
        return self._iteration_times[key]

    def time(self, stat="avg", rank_stat="max"):
        """Reported time (µs), dims (algorithm, placement, size).

        The max over ranks of each iteration (by default), then `stat`
        (avg, min, max, std, median, pNN) over iterations.  With a
        `rank_stat` of nccl-tests' -a (``rank0``, ``ranks-avg``,
        ``ranks-min``, ``ranks-max``) the order turns: `stat` over each
        rank's iterations, then rank 0's value or the mean, min or max.

        An imported file that printed `stat` itself (nccom-test ``--stats
        p50 p99``, nccl-tests ``-I``) but kept no iterations gives the
        number it printed (`printed_time`).
        """
        printed = self.printed_time(stat)
        if printed is not None:
            return printed
        if rank_stat in _stats.AVERAGES.values():    # nccl-tests -a: ranks last
            return _stats.per_rank_first(self._ds["latency"], stat, rank_stat)
        return _stats.over_iterations(self.iteration_time(rank_stat), stat)

    def printed_time(self, stat):
        """`stat` of the time as an imported file printed it, dims (algorithm,
        placement, size); None where the file printed no such statistic or
        kept the iterations to compute it from (a statistic of one
        iteration would only repeat the mean)."""
        ds = self._ds
        if "reported_time_stats" not in ds or "cycle" in ds.dims or ds.sizes["iteration"] > 1:
            return None
        s = _stats.check_stat(stat)
        key = "p50" if s == "median" else s
        if key not in [str(n) for n in ds["stat"].values]:
            return None
        t = ds["reported_time_stats"].sel(stat=key, drop=True)
        t.attrs = {"units": "us", "long_name": f"time {key} as the imported file printed it"}
        return t.transpose("algorithm", "placement", "size")

    def algbw(self, stat="avg", rank_stat="max"):
        """size / time in GB/s (GB = 1e9 B), dims (algorithm, placement, size)."""
        return self._algbw_of(self.time(stat, rank_stat), stat, rank_stat)

    def _algbw_of(self, t, stat, rank_stat):
        bw = (self._ds["size"] / (t * 1e3)).transpose(*t.dims)
        bw.attrs = {"units": "GB/s", "long_name": f"algbw ({stat} over iterations, {rank_stat} over ranks)"}
        return bw.rename("algbw")

    def busbw(self, stat="avg", rank_stat="max"):
        """algbw × the collective's bus factor, in GB/s."""
        bw = self.algbw(stat, rank_stat) * self.bus_factor
        bw.attrs = {"units": "GB/s", "long_name": f"busbw ({stat} over iterations, {rank_stat} over ranks)"}
        return bw.rename("busbw")

    # -- tables -----------------------------------------------------------
    def summary(self, stats=("avg",), rank_stat="max"):
        """A table like nccl-tests': one row per (size, algorithm), column
        groups per placement. Returns a pandas DataFrame with two column
        levels, (placement, quantity): ``df["out_of_place", "busbw"]``;
        the row keys are ``("size", "")`` etc., so ``df["size"]`` works.

        Bandwidths use the first statistic in `stats`.  On a lazily opened
        (dask) Dataset every statistic comes from one pass over the data.
        """

        ds = self._ds
        stats = [_stats.check_stat(s) for s in (stats if not isinstance(stats, str) else [stats])]
        *computed, wrong = _stats.compute_all(
            [self.time(s, rank_stat) for s in stats] + [ds["wrong"]])
        times = dict(zip(stats, computed))
        alg = self._algbw_of(times[stats[0]], stats[0], rank_stat)
        bus = alg * self.bus_factor
        rows, counts = [], ds["count"].values
        for si, size in enumerate(ds["size"].values):
            for a in ds["algorithm"].values:
                row = {("size", ""): int(size), ("count", ""): int(counts[si]),
                       ("type", ""): ds.attrs.get("dtype", ""),
                       ("redop", ""): ds.attrs.get("op", "") or "none",
                       ("root", ""): int(ds.attrs.get("root", -1)), ("algorithm", ""): str(a)}
                for p in ds["placement"].values:
                    sel = dict(algorithm=a, placement=p, size=size)
                    for s in stats:
                        row[(p, f"time:{s}")] = float(times[s].sel(sel))
                    row[(p, "algbw")] = float(alg.sel(sel))
                    row[(p, "busbw")] = float(bus.sel(sel))
                    row[(p, "#wrong")] = int(wrong.sel(sel))
                rows.append(row)
        # two column levels: (placement, quantity), and ("size", "") for the
        # row's keys, so that df["size"] and df["out_of_place", "busbw"] both work
        columns = pd.MultiIndex.from_tuples(list(rows[0]) if rows else [],
                                            names=["placement", "quantity"])
        return pd.DataFrame([list(r.values()) for r in rows], columns=columns)

    def failed_checks(self):
        """Results (size x algorithm x placement) whose ``--check`` found
        wrong elements: the N of nccl-tests' ``# Out of bounds values : N
        FAILED``, which counts failed tests rather than elements (nccl-tests
        counts a test once per process; ``wrong`` is summed over ranks)."""
        return int(np.count_nonzero(self._ds["wrong"].values > 0))

    def avg_busbw(self, stat="avg", rank_stat="max"):
        """Mean busbw over every row, as nccl-tests' "Avg bus bandwidth"."""
        return float(np.nanmean(self.busbw(stat, rank_stat).values))

    # -- comparison ---------------------------------------------------------
    def compare(self, other, **kwargs):
        """busbw of this run relative to `other` (a baseline) per size, with a
        bootstrap confidence interval where both have per-iteration data and
        a verdict (faster / slower / indistinguishable); see
        `ccbench_kit.compare.compare` for the options.  Returns a Dataset."""
        # lazy: compare is a layer above dataset (this accessor is a plugin of xarray's)
        from ..compare import compare
        return compare(self._ds, other, **kwargs)
