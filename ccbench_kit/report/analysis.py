"""The numbers behind the plots: winners and crossovers, per-rank matrices
and stragglers, ratios to a baseline.  Plain data (pandas / xarray), so the
report's text can name what the plots show."""
import numpy as np


def sized(ds):
    """`ds` without sizes of 0 B (nccl-tests prints them; they have no
    bandwidth and no place on a log axis)."""
    if "size" in ds.dims and bool((ds["size"] <= 0).any()):
        return ds.sel(size=ds["size"] > 0)
    return ds


def _busbw(ds, stat, rank_stat, placement):
    ds = sized(ds)
    bw = ds.ccb.busbw(stat, rank_stat).sel(placement=placement).compute()
    return [str(a) for a in bw["algorithm"].values], np.asarray(
        bw.transpose("algorithm", "size").values, dtype=float)


def _quartiles(ds, rank_stat, placement):
    """p25 and p75 of the iteration times, each (algorithm, size)."""
    it = sized(ds).ccb.iteration_time(rank_stat).sel(placement=placement)
    v = np.asarray(it.transpose("algorithm", "size", "iteration").values, dtype=float)
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            q25, q75 = np.nanpercentile(v, [25, 75], axis=-1)
    return q25, q75


def winners(ds, stat="avg", rank_stat="max", placement="out_of_place", tolerance=0.05):
    """The best algorithm per size, as a DataFrame.

    A new algorithm takes over only when it is clearly better than the
    current winner: its busbw higher by more than `tolerance`, and its
    iteration times' interquartile range entirely below the current
    winner's (so noise between near-equal algorithms, or one slow
    iteration in an average, does not flicker).  Sizes where the winner is
    not clearly ahead of the runner-up in that sense are marked ``tie``.

    Columns: size, winner, busbw (GB/s), runner_up, margin (winner / runner-up
    − 1), tie.
    """
    import pandas as pd
    ds = sized(ds)
    names, bw = _busbw(ds, stat, rank_stat, placement)
    q25, q75 = _quartiles(ds, rank_stat, placement)
    sizes = ds["size"].values
    rows, cur = [], None
    filled = np.where(np.isfinite(bw), bw, -np.inf)

    def clearly(a, b, j):  # a clearly beats b at size j
        return filled[a, j] > filled[b, j] * (1 + tolerance) and not q75[a, j] >= q25[b, j]

    for j in range(sizes.size):
        col = filled[:, j]
        best = int(np.argmax(col))
        if cur is None or not np.isfinite(col[cur]) or clearly(best, cur, j):
            cur = best
        others = np.delete(col, cur)
        runner = int(np.argmax(others)) if others.size else None
        runner_i = None if runner is None else (runner if runner < cur else runner + 1)
        second = col[runner_i] if runner_i is not None else np.nan
        margin = col[cur] / second - 1 if runner_i is not None and second > 0 else np.nan
        rows.append({"size": int(sizes[j]), "winner": names[cur], "busbw": col[cur],
                     "runner_up": names[runner_i] if runner_i is not None else "",
                     "margin": margin,
                     "tie": bool(runner_i is not None and not clearly(cur, runner_i, j))})
    return pd.DataFrame(rows)


def crossovers(ds, stat="avg", rank_stat="max", placement="out_of_place", tolerance=0.05):
    """Where the winner changes: a list of dicts with ``from``, ``to``,
    ``size_lo``, ``size_hi`` (the measured sizes either side) and ``at``
    (bytes, where the two busbw curves cross, interpolated in log-log)."""
    w = winners(ds, stat, rank_stat, placement, tolerance)
    names, bw = _busbw(ds, stat, rank_stat, placement)
    out = []
    for j in range(1, len(w)):
        a, b = w["winner"][j - 1], w["winner"][j]
        if a == b:
            continue
        s0, s1 = float(w["size"][j - 1]), float(w["size"][j])
        ia, ib = names.index(a), names.index(b)
        r0, r1 = bw[ib, j - 1] / bw[ia, j - 1], bw[ib, j] / bw[ia, j]
        at = np.sqrt(s0 * s1)
        if r0 > 0 and r1 > 0 and np.log(r1) != np.log(r0):
            f = -np.log(r0) / (np.log(r1) - np.log(r0))
            if 0 <= f <= 1:
                at = float(np.exp(np.log(s0) + f * (np.log(s1) - np.log(s0))))
        out.append({"from": a, "to": b, "size_lo": int(s0), "size_hi": int(s1), "at": float(at)})
    return out


def robust_z(values, axis=0):
    """(x − median) / (1.4826 · MAD) along `axis` (Iglewicz & Hoaglin).

    A MAD of zero (most ranks identical) falls back to 1 % of the median, so
    that identical ranks score 0 and one outlier still stands out.
    """
    x = np.asarray(values, dtype=float)
    med = np.nanmedian(x, axis=axis, keepdims=True)
    mad = 1.4826 * np.nanmedian(np.abs(x - med), axis=axis, keepdims=True)
    floor = 0.01 * np.abs(med)
    scale = np.where(mad > floor, mad, np.where(floor > 0, floor, 1.0))
    return (x - med) / scale


def rank_matrix(ds, algorithm, placement="out_of_place", metric="auto"):
    """(rank, size) matrix for the heat map, an xarray DataArray.

    `metric`: ``skew`` (median over iterations of start − earliest start,
    in % of the median iteration time; needs `start`), ``latency`` (median latency / median over ranks), or
    ``auto`` (skew when `start` exists).
    """
    if metric == "auto":
        metric = "skew" if "start" in ds else "latency"
    sel = dict(algorithm=algorithm, placement=placement)
    if metric == "skew":
        if "start" not in ds:
            from ..errors import ConfigError
            raise ConfigError("this Dataset has no `start` times; use metric='latency'", "metric")
        st = ds["start"].sel(sel)
        it = ds["latency"].sel(sel).max("rank").median("iteration")
        m = 100 * (st - st.min("rank")).median("iteration") / it
        m.attrs = {"label": "median start skew (% of iteration time)", "what": "start skew"}
    else:
        med = ds["latency"].sel(sel).median("iteration")
        m = med / med.median("rank")
        m.attrs = {"label": "median latency / median over ranks", "what": "median latency"}
    return m.transpose("rank", "size").compute()


def stragglers(ds, algorithm=None, placement="out_of_place", threshold=3.5, metric="auto",
               min_fraction=0.25):
    """Ranks whose robust z-score exceeds `threshold` at ≥ `min_fraction` of
    the sizes, as a DataFrame (rank, host, flagged, median_z), worst first."""
    import pandas as pd
    algorithm = algorithm or str(ds["algorithm"].values[0])
    m = rank_matrix(ds, algorithm, placement, metric)
    z = robust_z(m.values, axis=0)
    flagged = np.sum(z > threshold, axis=1)
    ns = m.sizes["size"]
    hosts = m["host"].values if "host" in m.coords else [""] * m.sizes["rank"]
    rows = [{"rank": int(r), "host": str(hosts[i]), "flagged": int(flagged[i]),
             "median_z": float(np.nanmedian(z[i]))}
            for i, r in enumerate(m["rank"].values) if flagged[i] >= max(1, min_fraction * ns)]
    return pd.DataFrame(rows, columns=["rank", "host", "flagged", "median_z"]).sort_values(
        "flagged", ascending=False, kind="stable")


def compare(ds, baseline, stat="avg", rank_stat="max", placement="out_of_place"):
    """{label: dict(size, ratio, lo, hi, against, ci_label, verdict)}: busbw
    of `ds` over the baseline's at the sizes both have.

    The ratio and its bootstrap confidence interval come from
    `ccbench_kit.compare.compare` (lo/hi NaN where a side has aggregated
    numbers only, e.g. an imported nccl-tests log).
    """
    from ..compare import compare as _compare
    pl = placement if placement in ds["placement"].values else str(ds["placement"].values[0])
    placements = [pl] if pl in baseline["placement"].values else None
    res = _compare(ds, baseline, stat=stat, rank_stat=rank_stat, placements=placements)
    level = float(res.attrs.get("confidence", 0.95))
    out = {}
    for i, label in enumerate(str(a) for a in res["algorithm"].values):
        sel = res.isel(algorithm=i, placement=0)
        lo, hi = np.asarray(sel["ratio_lo"].values, float), np.asarray(sel["ratio_hi"].values, float)
        out[label] = {"size": res["size"].values.astype(float),
                      "ratio": np.asarray(sel["ratio"].values, float),
                      "lo": lo if np.isfinite(lo).any() else None,
                      "hi": hi if np.isfinite(hi).any() else None,
                      "against": str(sel["baseline_algorithm"].values),
                      "ci_label": f"{100 * level:.0f} % bootstrap CI",
                      "verdict": [str(v) for v in sel["verdict"].values]}
    return out
