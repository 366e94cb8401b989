"""The numbers behind the plots: winners and crossovers, per-rank matrices
and stragglers, ratios to a baseline.  Plain data (pandas / xarray), so the
report's text can name what the plots show."""
import json
import warnings

import numpy as np
import pandas as pd

from ..backends import aggregated_timings
from ..compare import compare as _compare
from ..dataset.attrs import TypedAttrs
from ..dataset.schema import attr_json, not_available
from ..dataset.stats import N_BOOT, SEED, bootstrap, of_values
from ..dataset.stats import interval as interval_of
from ..errors import CCBenchError, ConfigError
from ..theory import fit_piecewise
from ..theory.presets import busbw_bound
from ..units import format_size
from .overhead import small_size_sentence
from .style import approx_size


def sized(ds):
    """`ds` without sizes of 0 B (nccl-tests prints them; they have no
    bandwidth and no place on a log axis)."""
    if "size" in ds.dims and bool((ds["size"] <= 0).any()):
        return ds.sel(size=ds["size"] > 0)
    return ds


CONFIDENCE = 0.95
MIN_ITERATIONS = 5      # fewer measured iterations give no meaningful interval


def per_iteration_data(ds):
    """Whether each iteration slot of `ds` holds its own measurement.

    Batch and CUDA-graph timing time many iterations back to back and store
    their average in every slot; imported aggregates hold one number.
    Neither has a spread to take percentiles or an interval from.
    """
    if str(ds.attrs.get("timing", "")) in aggregated_timings():  # the backends say which
        return False
    return ds.sizes.get("iteration", 1) >= MIN_ITERATIONS


def timing_note(ds):
    """Why `ds` has no per-iteration data, or "" when it has."""
    timing = str(ds.attrs.get("timing", ""))
    if timing in aggregated_timings():
        return (f"Timing `{timing}`: the iterations ran back to back and were timed together, "
                "so every iteration slot holds their average. Per-iteration data doesn't exist "
                "for this run: there is no per-iteration trace, no percentiles and no "
                "confidence interval; per-size times only.")
    n = ds.sizes.get("iteration", 1)
    if n < MIN_ITERATIONS:
        return (f"{n} iteration{'s' if n != 1 else ''} per size (aggregated numbers): no "
                "per-iteration trace, percentiles or confidence intervals.")
    return ""


def robust_time(ds, stat="median", rank_stat="max", placement="out_of_place",
                confidence=CONFIDENCE, n_boot=N_BOOT, seed=SEED):
    """Time per (algorithm, size) with a bootstrap confidence interval.

    Each iteration's time is the `rank_stat` (max) over ranks; the time is
    `stat` (the median: one slow iteration does not move it) over
    iterations.  The interval resamples the iterations `n_boot` times
    (percentile method, seeded: reproducible).  Without per-iteration data
    (`per_iteration_data`) lo and hi are NaN.

    Returns
    -------
    dict
        ``algorithms`` (list), ``sizes`` (bytes), ``time``, ``lo``, ``hi``
        (µs, arrays (algorithm, size)), ``n`` (iterations used),
        ``interval`` (bool: whether lo/hi exist).
    """
    ds = sized(ds)
    it = ds.ccb.iteration_time(rank_stat).sel(placement=placement)
    v = np.asarray(it.transpose("algorithm", "size", "iteration").values, dtype=float)
    A, S = v.shape[:2]
    t = np.full((A, S), np.nan)
    lo, hi = np.full((A, S), np.nan), np.full((A, S), np.nan)
    n = np.zeros((A, S), dtype=int)
    interval = per_iteration_data(ds)
    rng = np.random.default_rng(seed)
    for a in range(A):
        for j in range(S):
            x = v[a, j][np.isfinite(v[a, j]) & (v[a, j] > 0)]
            n[a, j] = x.size
            if not x.size:
                continue
            t[a, j] = of_values(x, stat)
            if interval and x.size >= MIN_ITERATIONS:
                lo[a, j], hi[a, j] = interval_of(bootstrap(x, stat, rng, n_boot), confidence)
    return {"algorithms": [str(x) for x in it["algorithm"].values],
            "sizes": ds["size"].values.astype(float), "time": t, "lo": lo, "hi": hi, "n": n,
            "interval": interval}


def phase_breakdown(ds, phases, stat="median", rank_stat="max", placement="out_of_place"):
    """Where each whole algorithm's time goes, from its phases timed alone.

    `phases` is {algorithm: (whole, phase)} (`Backend.phase_algorithms`),
    phases ``launch`` (the launch and the call's bookkeeping) and
    ``barrier`` (those and the barriers); `ds` holds them and the whole
    algorithms.  Times as `robust_time`'s (the `stat` over iterations of the
    `rank_stat` over ranks).  The barriers' share is barrier - launch, the
    data's (copies and sums) whole - barrier: a difference of two
    measurements, so within their noise it may come out below zero.

    Returns
    -------
    list of dict
        One per (whole algorithm, size): ``algorithm``, ``size`` (bytes) and
        µs ``whole``, ``launch``, ``barrier``, ``data`` (NaN where a part
        was not measured).
    """
    r = robust_time(ds, stat, rank_stat, placement)
    t = {a: r["time"][i] for i, a in enumerate(r["algorithms"])}
    nan = np.full(len(r["sizes"]), np.nan)
    of = {}
    for alg, (whole, phase) in phases.items():
        of.setdefault(whole, {})[phase] = t.get(alg, nan)
    rows = []
    for whole in sorted(of):
        total = t.get(whole, nan)
        launch, barrier = of[whole].get("launch", nan), of[whole].get("barrier", nan)
        for j, size in enumerate(r["sizes"]):
            if not np.isfinite([total[j], launch[j], barrier[j]]).any():
                continue
            rows.append({"algorithm": whole, "size": int(size), "whole": total[j],
                         "launch": launch[j], "barrier": barrier[j] - launch[j],
                         "data": total[j] - barrier[j]})
    return rows


def robust_busbw(ds, stat="median", rank_stat="max", placement="out_of_place",
                 confidence=CONFIDENCE, n_boot=N_BOOT, seed=SEED):
    """busbw per (algorithm, size) with a bootstrap confidence interval: the
    size's bus bytes over `robust_time`'s time and its interval's ends.

    Returns
    -------
    dict
        ``algorithms`` (list), ``sizes`` (bytes), ``busbw``, ``lo``, ``hi``
        (GB/s, arrays (algorithm, size)), ``n`` (iterations used),
        ``interval`` (bool: whether lo/hi exist).
    """
    return busbw_of(ds, robust_time(ds, stat, rank_stat, placement, confidence, n_boot, seed))


def busbw_of(ds, r):
    """`robust_busbw`'s dict from `robust_time`'s `r` of `ds`, for a caller
    that needs the times too (one bootstrap, not two)."""
    gb = r["sizes"] * sized(ds).ccb.bus_factor / 1e3          # bytes·F / µs -> GB/s
    with np.errstate(divide="ignore", invalid="ignore"):
        bw, lo, hi = gb / r["time"], gb / r["hi"], gb / r["lo"]
    return {"algorithms": r["algorithms"], "sizes": r["sizes"], "busbw": bw, "lo": lo,
            "hi": hi, "n": r["n"], "interval": r["interval"]}


def latency_floor(r):
    """The measured latency floor of `robust_time`'s `r`: the least time of
    any algorithm at any size, with its bootstrap interval: what a call
    costs however little it moves, the horizontal the latency curves
    flatten to at small sizes.

    Returns
    -------
    dict or None
        ``us``, ``lo``, ``hi`` (µs; lo/hi NaN without per-iteration data),
        ``algorithm``, ``size`` (bytes); None when nothing was measured.
    """
    t = np.where(np.isfinite(r["time"]), r["time"], np.inf)
    if not np.isfinite(t).any():
        return None
    a, j = np.unravel_index(int(np.argmin(t)), t.shape)
    return {"us": float(t[a, j]), "lo": float(r["lo"][a, j]), "hi": float(r["hi"][a, j]),
            "algorithm": r["algorithms"][a], "size": int(r["sizes"][j])}


def floor_text(floor):
    """'5.9 µs (5.8–6.0; oneshot, 64 B)' of a `latency_floor`."""
    ci = f"{floor['lo']:.3g}–{floor['hi']:.3g}; " if np.isfinite(floor["lo"]) else ""
    return f"{floor['us']:.3g} µs ({ci}{floor['algorithm']}, {format_size(floor['size'])})"


def winners(ds, stat="median", rank_stat="max", placement="out_of_place", tolerance=0.05,
            confidence=CONFIDENCE):
    """The best algorithm per size, and whether it is really ahead.

    The best is the highest busbw by `stat` (the median over iterations of
    the max over ranks).  It is ahead of the runner-up when their bootstrap
    intervals (`robust_busbw`) do not overlap; without per-iteration data,
    when it leads by more than `tolerance`.  Otherwise the size is a ``tie``.

    Returns
    -------
    pandas.DataFrame
        size, winner, busbw, lo, hi, runner_up, runner_busbw, margin
        (winner / runner-up − 1), margin_lo, margin_hi (from the intervals:
        the least and most the winner leads by), tie, decided_by.
    """
    r = robust_busbw(ds, stat, rank_stat, placement, confidence)
    names, bw, lo, hi = r["algorithms"], r["busbw"], r["lo"], r["hi"]
    filled = np.where(np.isfinite(bw), bw, -np.inf)
    how = (f"{100 * confidence:.0f} % bootstrap intervals" if r["interval"]
           else f"±{100 * tolerance:.0f} % (no per-iteration data)")
    rows = []
    for j, size in enumerate(r["sizes"]):
        order = np.argsort(-filled[:, j], kind="stable")
        best = int(order[0])
        second = int(order[1]) if len(order) > 1 and np.isfinite(filled[order[1], j]) else None
        row = {"size": int(size), "winner": names[best], "busbw": bw[best, j],
               "lo": lo[best, j], "hi": hi[best, j], "runner_up": "",
               "runner_busbw": np.nan, "margin": np.nan, "margin_lo": np.nan,
               "margin_hi": np.nan, "tie": False, "decided_by": how}
        if second is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                row.update(runner_up=names[second], runner_busbw=bw[second, j],
                           margin=bw[best, j] / bw[second, j] - 1,
                           margin_lo=lo[best, j] / hi[second, j] - 1,
                           margin_hi=hi[best, j] / lo[second, j] - 1)
            if r["interval"] and np.isfinite(lo[best, j]) and np.isfinite(hi[second, j]):
                row["tie"] = bool(lo[best, j] <= hi[second, j])
            else:
                row["tie"] = bool(not bw[best, j] > bw[second, j] * (1 + tolerance))
        rows.append(row)
    return pd.DataFrame(rows)


def crossovers(ds, stat="median", rank_stat="max", placement="out_of_place", tolerance=0.05,
               confidence=CONFIDENCE):
    """Where the winner changes, counting only sizes where it is really
    ahead (`winners`, ``tie`` False): a list of dicts with ``from``,
    ``to``, ``size_lo``, ``size_hi`` (the decided sizes either side) and
    ``at`` (bytes, where the two busbw curves cross, interpolated in
    log-log between them)."""
    return winner_changes(ds, stat, rank_stat, placement, tolerance, confidence)["crossovers"]


def winner_changes(ds, stat="median", rank_stat="max", placement="out_of_place", tolerance=0.05,
                   confidence=CONFIDENCE):
    """Crossovers and the noise around them.

    Returns
    -------
    dict
        ``winners`` (`winners`' DataFrame), ``crossovers`` (as `crossovers`),
        ``changes`` (how often the best-by-`stat` changes from one size to
        the next), ``noisy`` (changes not backed by a crossover), ``ties``
        (sizes where no algorithm is ahead).
    """
    w = winners(ds, stat, rank_stat, placement, tolerance, confidence)
    r = robust_busbw(ds, stat, rank_stat, placement, confidence)
    names, bw = r["algorithms"], r["busbw"]
    decided = [j for j in range(len(w)) if not w["tie"].iloc[j]]
    out = []
    for i, j in zip(decided, decided[1:]):
        a, b = w["winner"].iloc[i], w["winner"].iloc[j]
        if a == b:
            continue
        ia, ib = names.index(a), names.index(b)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.log(bw[ib, i:j + 1] / bw[ia, i:j + 1])
        sizes = r["sizes"][i:j + 1]
        at = float(np.sqrt(sizes[0] * sizes[-1]))
        for k in range(len(ratio) - 1):   # the first place where b overtakes a
            r0, r1 = ratio[k], ratio[k + 1]
            if np.isfinite(r0) and np.isfinite(r1) and r0 <= 0 < r1:
                f = -r0 / (r1 - r0)
                at = float(np.exp(np.log(sizes[k]) + f * (np.log(sizes[k + 1]) - np.log(sizes[k]))))
                break
        out.append({"from": a, "to": b, "size_lo": int(sizes[0]), "size_hi": int(sizes[-1]),
                    "at": at})
    changes = int(sum(w["winner"].iloc[j] != w["winner"].iloc[j - 1] for j in range(1, len(w))))
    return {"winners": w, "crossovers": out, "changes": changes,
            "noisy": max(0, changes - len(out)), "ties": int(w["tie"].sum())}


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
    pl = placement if placement in ds["placement"].values else str(ds["placement"].values[0])
    placements = [pl] if pl in baseline["placement"].values else None
    with warnings.catch_warnings():  # the differences are in res.attrs["notes"], said by the report
        warnings.simplefilter("ignore")
        res = _compare(ds, baseline, stat=stat, rank_stat=rank_stat, placements=placements)
    level = float(res.attrs.get("confidence", 0.95))
    notes = json.loads(res.attrs.get("notes") or "[]")
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
                      "verdict": [str(v) for v in sel["verdict"].values], "notes": notes}
    return out


# -- how far to trust the fits and the verdict -----------------------------------

def fit_models(ds, fits):
    """Which α-β model to draw for each algorithm, and why.

    Returns {algorithm: dict(kind, pieces, text)}: kind ``holds`` (pieces =
    [the fit]), ``piecewise`` (two fits that hold on either side of the
    size where the protocol changes) or ``none`` (pieces = [], text says
    why: the quality figure that failed).
    """
    out = {}
    for alg, f in fits.items():
        if f.holds:
            out[alg] = {"kind": "holds", "pieces": [f], "text": f"holds ({f.quality})"}
            continue
        pieces = None
        try:
            pieces = fit_piecewise(ds, alg, stat=f.stat, placement=None)
        except (CCBenchError, ValueError):  # too few sizes, a singular fit: no split
            pieces = None
        if pieces:
            lo, hi = pieces
            out[alg] = {"kind": "piecewise", "pieces": pieces, "text": (
                f"one α-β line does not fit ({f.why_not}); two do, split at "
                f"{format_size(lo.size_range[1])} | {format_size(hi.size_range[0])} "
                f"(a protocol change): {lo.quality}; {hi.quality}")}
        else:
            out[alg] = {"kind": "none", "pieces": [], "text": f"no fit: {f.why_not}"}
    return out


def _fmt_bw(x):
    return f"{x:.3g}"


def _ci(lo, hi):
    return f" (95 % CI {_fmt_bw(lo)}–{_fmt_bw(hi)})" if np.isfinite(lo) and np.isfinite(hi) else ""


def distrust(ds):
    """Markdown lines about what in `ds` itself makes its numbers suspect:
    oversubscription, aggregated timing, an incomplete run, algorithms the
    backend refused, too few iterations."""
    a = TypedAttrs(ds.attrs)
    out = []
    if a.get("oversubscribed") is True:
        per = a.get("ranks_per_host") or {}
        cpus = a.get("cpus_available") or {}
        where = "; ".join(f"{per[h]} ranks on {cpus.get(h, '?')} CPUs" + (f" ({h})" if len(per) > 1 else "")
                          for h in per if per[h] > cpus.get(h, per[h]))
        out.append(f"**Oversubscribed**: {where}. Ranks took turns on the cores, so these times "
                   "measure the scheduler as much as the collective; compare nothing with them.")
    load, cpus = a.get("load_average"), a.get("cpus_available")
    if isinstance(load, (int, float)) and isinstance(cpus, dict) and cpus:
        n = min(cpus.values())
        if load > n:
            out.append(f"**Busy machine**: load average {load:g} on {n} CPUs when the run "
                       "started; other work shared the cores, so the times"
                       + (" and the memcpy peak" if a.get("memcpy_gbps") else "")
                       + " include it.")
    note = timing_note(ds)
    if note:
        out.append(note)
    if a.get("complete") is False:
        out.append(f"**Incomplete run** ({a.get('incomplete_reason') or 'interrupted'}): "
                   "sizes it did not reach are missing.")
    na = not_available(ds)
    if na:
        out.append("Not measured (the backend refused): " + "; ".join(
            f"`{alg}`: {why}" for alg, why in na.items()) + ".")
    return out


def verdict(ds, preset=None, models=None, baseline=None, placement="out_of_place"):
    """What a reader came for, as Markdown sentences backed by numbers.

    Parameters
    ----------
    ds : xarray.Dataset
        One collective.
    preset : theory.Preset, optional
        The peak to judge against (a memcpy preset without a recorded rate
        says "peak not recorded").
    models : dict, optional
        `fit_models`' result: which fits hold.
    baseline : xarray.Dataset, optional
        Gives the ratio to the baseline with its interval.

    Returns
    -------
    (findings, cautions) : two lists of Markdown strings
        Deterministic: the intervals come from a seeded bootstrap.
    """
    # why long: one sentence per finding, in the order a reader reads them; each
    # reuses the same few locals (best, peak, fits), so splitting scatters the order.
    ds = sized(ds)
    placements = [str(p) for p in ds["placement"].values]
    placement = placement if placement in placements else placements[0]
    coll = str(ds.attrs.get("collective"))
    p = ds.ccb.nranks
    findings, cautions = [], list(distrust(ds))
    r = robust_busbw(ds, "median", "max", placement)
    bw = np.where(np.isfinite(r["busbw"]), r["busbw"], -np.inf)
    if not np.isfinite(bw).any():
        return [f"No {coll} size has a finite time."], cautions
    a, j = np.unravel_index(int(np.argmax(bw)), bw.shape)
    best, alg, size = float(bw[a, j]), r["algorithms"][a], int(r["sizes"][j])
    how = ("median over iterations of the max over" if r["interval"]
           else "one time per size, max over")
    line = (f"Best busbw **{_fmt_bw(best)} GB/s**{_ci(r['lo'][a, j], r['hi'][a, j])} with "
            f"`{alg}` at {format_size(size)} ({placement.replace('_', '-')}, {how} "
            f"{ds.sizes.get('rank', p)} ranks)")
    if preset is None:
        line += "; no theory preset, so no efficiency."
    elif not preset.has_peak:
        line += f"; `{preset.name}` peak not recorded by this run, so no efficiency."
    else:
        line += (f" = **{100 * best / preset.peak_gbps:.0f} %** of the `{preset.name}` peak "
                 f"{preset.peak_gbps:.4g} GB/s" + (f" ({preset.measured})" if preset.measured else "")
                 + ".")
    findings.append(line)
    if preset is not None and preset.has_peak and best > preset.peak_gbps:
        bound, why = busbw_bound(preset, coll, p)
        nvls_off = str(_env(ds).get("NCCL_NVLS_ENABLE", "")) == "0"
        if preset.switch_reduction and best <= bound * 1.02 and not nvls_off:
            findings.append(f"busbw above the per-direction link rate ({preset.peak_gbps:.4g} GB/s) "
                            f"is expected here: {why}.")
        else:
            cautions.append(f"busbw {_fmt_bw(best)} GB/s is above what `{preset.name}` allows "
                            f"({bound:.4g} GB/s: {why}"
                            + ("; NCCL_NVLS_ENABLE=0 in this run" if nvls_off else "")
                            + "): check the preset, the timing or the bus factor.")
    if len(r["algorithms"]) > 1:
        ch = winner_changes(ds, "median", "max", placement)
        cross = ch["crossovers"]
        if cross:
            backed = ("95 % intervals separate on both sides" if r["interval"]
                      else "a lead over 5 % on both sides; no intervals without per-iteration data")
            findings.append(f"Crossovers ({backed}): " + "; ".join(
                f"`{c['from']}` → `{c['to']}` at ≈ {approx_size(c['at'])}" for c in cross) + ".")
        else:
            w = ch["winners"]
            lead = w.loc[~w["tie"], "winner"].unique().tolist()
            findings.append(("No crossover: " + (f"`{lead[0]}` is ahead wherever one is" if len(lead) == 1
                             else "no algorithm is clearly ahead at any size")) + ".")
        n = len(ch["winners"])
        said = []
        if ch["noisy"]:
            said.append(f"the best algorithm by median changes {ch['changes']} times over {n} "
                        f"sizes, {ch['noisy']} of them within the noise (not crossovers)")
        if ch["ties"]:
            said.append(f"{ch['ties']} of {n} sizes are ties ("
                        + ("intervals overlap" if r["interval"] else "a lead under 5 %") + ")")
        if cross and not r["interval"]:
            said.append("crossovers decided without intervals (a lead over 5 % may still be noise)")
        if said:
            cautions.append("Noisy ranking: " + "; ".join(said) + ".")
    if models:
        good = [f"`{k}` ({m['pieces'][0].quality})" for k, m in models.items() if m["kind"] == "holds"]
        piece = [f"`{k}`" for k, m in models.items() if m["kind"] == "piecewise"]
        bad = [f"`{k}` ({m['text'][len('no fit: '):]})" for k, m in models.items() if m["kind"] == "none"]
        parts = []
        if good:
            parts.append("α-β fits hold for " + ", ".join(good))
        if piece:
            parts.append("fit piecewise (a protocol change) for " + ", ".join(piece))
        if parts:
            findings.append("; ".join(parts) + ".")
        if bad:
            cautions.append("Poor fit, drawn as data only: " + "; ".join(bad) + ".")
    findings.append(_straggler_sentence(ds, placement))
    if baseline is not None:
        said, notes = _baseline_sentences(ds, baseline, placement)
        findings.extend(said)
        cautions.extend(f"Against the baseline: {n}." for n in notes
                        if n.startswith(("rank counts", "backends", "hardware")))
    return findings, cautions


def _env(ds):
    env = attr_json(ds, "env", {}) or {}
    return env if isinstance(env, dict) else {}


def _straggler_sentence(ds, placement):
    if ds.sizes.get("rank", 1) < 3 or not (ds["rank"].values >= 0).all():
        return (f"Stragglers: not judged ({ds.sizes.get('rank', 1)} rank"
                f"{'s' if ds.sizes.get('rank', 1) != 1 else ''} of data; a robust z-score "
                "needs 3 or more).")
    by_rank = {}
    for a in [str(x) for x in ds["algorithm"].values]:
        for row in stragglers(ds, a, placement).itertuples():
            key = f"rank {row.rank}" + (f" on {row.host}" if row.host else "")
            by_rank.setdefault(key, []).append(f"`{a}` {row.flagged}/{ds.sizes['size']}")
    found = [f"{who} ({', '.join(where)} sizes)" for who, where in by_rank.items()]
    metric = "start skew" if "start" in ds else "median latency"
    if not found:
        return (f"No straggler: no rank's {metric} stands out (robust z > 3.5 at ≥ ¼ of the "
                "sizes) in any algorithm.")
    return f"Stragglers by {metric}: " + "; ".join(found) + "."


def _baseline_sentences(ds, baseline, placement):
    try:
        res = compare(ds, baseline, "median", "max", placement)
    except CCBenchError as e:  # different collectives, no common size: say so
        return [f"Against the baseline: not comparable ({e})."], []
    out, notes = [], []
    for label, d in res.items():
        notes = d.get("notes", [])
        ok = np.isfinite(d["ratio"])
        if not ok.any():
            continue
        k = int(np.flatnonzero(ok)[-1])
        verdict = d["verdict"][k] if len(d["verdict"]) > k else ""
        if d["lo"] is not None and np.isfinite(d["lo"][k]):
            ci = f" (95 % CI {d['lo'][k]:.3f}–{d['hi'][k]:.3f}, {verdict})"
        else:
            ci = f" (plain ratio, no interval: a side has no per-iteration data; {verdict or 'n/a'})"
        gm = float(np.exp(np.mean(np.log(d["ratio"][ok]))))
        out.append(f"Against the baseline (`{label}` vs `{d['against']}`): busbw ratio "
                   f"**{d['ratio'][k]:.3f}**{ci} at {format_size(int(d['size'][k]))}; geometric "
                   f"mean over {int(ok.sum())} sizes {gm:.3f}.")
    small = small_size_sentence(ds, baseline)
    if out and small:
        out.append(small)
    return out or ["Against the baseline: no size in common."], notes + _nccl_versions(ds, baseline)


def _nccl_versions(ds, baseline):
    """A note where the run and the baseline ran different NCCLs (torch
    loads its own libnccl; the nccl backend dlopens one): their times then
    differ by more than the framework."""
    mine, theirs = ds.attrs.get("nccl_version"), baseline.attrs.get("nccl_version")
    if mine and theirs and str(mine) != str(theirs):
        return [f"backends ran different NCCLs: {mine} vs {theirs} (the baseline's), so the "
                "ratios include what changed between them"]
    return []
