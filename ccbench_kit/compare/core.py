"""Compare two runs of one collective: busbw ratio per size, with a
bootstrap confidence interval when both sides have per-iteration data.

The result is an xarray Dataset along (algorithm, placement, size):
``busbw``, ``busbw_baseline``, ``ratio`` (run / baseline, > 1 = the run is
faster), ``ratio_lo``/``ratio_hi`` (the CI, NaN for plain ratios),
``n_run``/``n_baseline`` (iterations used), ``method`` and ``verdict``.
"""
import json
import re
import warnings
from collections.abc import Mapping

import numpy as np
import xarray as xr

from ..dataset.stats import N_BOOT, SEED, bootstrap, check_stat, of_values
from ..errors import CCBenchError, ConfigError

MIN_SAMPLES = 5        # fewer iterations than this give no meaningful bootstrap


class CompareError(CCBenchError):
    """Two result sets that cannot be compared (different collectives or dtypes)."""


class CompareWarning(UserWarning):
    """Two result sets that can be compared, but measured different things:
    other backends, other hardware, other rank counts."""


def _hardware(ds):
    """The device models of `ds` ("NVIDIA H200", "cpu"), without ordinals
    and bus ids, as a sorted tuple; () when unknown (imported logs)."""
    if "device" not in ds.coords:
        return ()
    names = {re.sub(r"\s*\(.*?\)", "", re.sub(r"^cuda:\d+\s*", "", str(d))).strip()
             for d in np.atleast_1d(ds["device"].values)}
    return tuple(sorted(n for n in names if n))


def _label(ds):
    a = ds.attrs
    src = a.get("source") or ""
    return src or f"{a.get('backend') or 'ccbench'} run {a.get('created', '')}".strip()


def _check_pair(run, base):
    ra, ba = run.attrs, base.attrs
    rc, bc = str(ra.get("collective")), str(ba.get("collective"))
    if rc != bc:
        raise CompareError(f"cannot compare {rc} ({_label(run)}) with {bc} ({_label(base)}): "
                           "different collectives have different sizes and bus factors")
    rd, bd = str(ra.get("dtype") or ""), str(ba.get("dtype") or "")
    notes = []
    if rd and bd and rd != bd:
        raise CompareError(f"cannot compare {rc} in {rd} ({_label(run)}) with {bd} "
                           f"({_label(base)}): different data types move different bytes "
                           "per element and reduce at different speeds")
    if not rd or not bd:
        notes.append(f"data type unknown on one side ({rd or '?'} vs {bd or '?'}): compared as is")
    ro, bo = str(ra.get("op", "none")), str(ba.get("op", "none"))
    if ro != bo and ro and bo:          # "" = not recorded (NCCL Inspector)
        notes.append(f"reduction ops differ: {ro} vs {bo}")
    rn, bn = ra.get("nranks"), ba.get("nranks")
    if str(rn) != str(bn):
        notes.append(f"rank counts differ: {rn} vs {bn} (busbw normalises by the bus factor)")
    rb, bb = str(ra.get("backend") or ""), str(ba.get("backend") or "")
    if rb and bb and rb != bb:
        notes.append(f"backends differ: {rb} ({ra.get('library', '')}) vs {bb} "
                     f"({ba.get('library', '')})")
    rh, bh = _hardware(run), _hardware(base)
    if rh and bh and rh != bh:
        notes.append(f"hardware differs: {', '.join(rh)} vs {', '.join(bh)}")
    return notes


def _pairs(run_algs, base_algs, algorithms):
    """[(label, run algorithm, baseline algorithm)]."""
    if algorithms is not None:
        pairs = []
        for item in algorithms:
            r, b = item if isinstance(item, (tuple, list)) else (item, item)
            if r not in run_algs:
                raise ConfigError(f"the run has no algorithm {r!r} ({', '.join(run_algs)})",
                                  "--algorithm")
            if b not in base_algs:
                raise ConfigError(f"the baseline has no algorithm {b!r} ({', '.join(base_algs)})",
                                  "--algorithm")
            pairs.append((r if r == b else f"{r} vs {b}", r, b))
        return pairs
    common = [a for a in run_algs if a in base_algs]
    if common:
        return [(a, a, a) for a in common]
    if len(base_algs) == 1:
        return [(a, a, base_algs[0]) for a in run_algs]
    if len(run_algs) == 1:
        return [(f"{run_algs[0]} vs {b}", run_algs[0], b) for b in base_algs]
    return [(f"{r} vs {b}", r, b) for r in run_algs for b in base_algs]


def _stat(x, stat, axis=-1):
    """`stat` over values along `axis`; NaN marks missing (all-NaN sizes give NaN)."""
    return of_values(x, stat, axis, skip_nan=True)


def _bootstrap(run, base, stat, n_boot, rng):
    """`n_boot` resampled time ratios stat(base*) / stat(run*)."""
    tr = bootstrap(run, stat, rng, n_boot)
    tb = bootstrap(base, stat, rng, n_boot)
    with np.errstate(all="ignore"):
        return tb / tr


def compare(run, baseline, *, stat="avg", rank_stat="max", algorithms=None, placements=None,
            minbytes=None, maxbytes=None, confidence=0.95, n_boot=N_BOOT, tolerance=0.03,
            min_samples=MIN_SAMPLES, seed=SEED, run_label=None, baseline_label=None):
    """busbw of `run` relative to `baseline`, per size, with a verdict.

    Parameters
    ----------
    run, baseline : xarray.Dataset
        results Datasets of one collective each (a kit run, an imported
        baseline).  Aligned by collective, dtype and size.
    stat, rank_stat : str
        Iteration time = `rank_stat` over ranks; time = `stat` over iterations
        (avg, min, max, median, pNN).
    algorithms : list, optional
        Algorithms (or (run, baseline) pairs) to compare.  Default: same names
        when both sides have them, else each against the baseline's only one.
    placements : list, optional
        Default: the placements both sides have.
    minbytes, maxbytes : int, optional
        Only sizes in this range.
    confidence : float
        Level of the bootstrap interval (percentile method).
    n_boot : int
        Resamples of the iterations of each side.
    tolerance : float
        For plain ratios (no per-iteration data on a side): a ratio within
        1 ± tolerance is "indistinguishable".
    min_samples : int
        Iterations each side needs for a bootstrap.
    seed : int
        Of the resampling (results are reproducible).
    run_label, baseline_label : str, optional
        Names for tables and plots (default: the source file or the run's time).

    Returns
    -------
    xarray.Dataset
        See the module docstring; attrs say the statistics and the method.

    Raises
    ------
    CompareError
        Different collectives or data types, or no size in common.
    """
    # why long: one pass over algorithm x placement x size fills eight aligned
    # arrays and the attrs that explain how each ratio was made; split up, the
    # pieces would pass all of them back and forth.
    run, baseline = _one(run, baseline), _one(baseline, run)
    stat = check_stat(stat, "--stat")
    if stat == "std":
        raise ConfigError("busbw of a standard deviation means nothing; use avg, min, max, "
                          "median or a percentile", "--stat")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be between 0 and 1, got {confidence}", "--confidence")
    notes = _check_pair(run, baseline)
    for note in notes:
        if note.startswith(("rank counts differ", "backends differ", "hardware differs")):
            warnings.warn(f"{run.attrs.get('collective')}: {note}", CompareWarning, stacklevel=2)
    run_algs = [str(a) for a in run["algorithm"].values]
    base_algs = [str(a) for a in baseline["algorithm"].values]
    pairs = _pairs(run_algs, base_algs, algorithms)
    rp = [str(p) for p in run["placement"].values]
    bp = [str(p) for p in baseline["placement"].values]
    pls = [p for p in (placements or rp) if p in rp and p in bp]
    if not pls:
        raise CompareError(f"no placement in common: run has {', '.join(rp)}, baseline "
                           f"{', '.join(bp)}")
    rs, bs = run["size"].values, baseline["size"].values
    sizes = np.intersect1d(rs, bs)
    if minbytes is not None:
        sizes = sizes[sizes >= int(minbytes)]
    if maxbytes is not None:
        sizes = sizes[sizes <= int(maxbytes)]
    if len(sizes) == 0:
        raise CompareError(f"no size in common (run {rs.min() if len(rs) else '-'}.."
                           f"{rs.max() if len(rs) else '-'} B, baseline "
                           f"{bs.min() if len(bs) else '-'}..{bs.max() if len(bs) else '-'} B"
                           + (", within the size range asked" if minbytes or maxbytes else "")
                           + ")")
    dropped = len(np.union1d(rs, bs)) - len(sizes)
    if dropped:
        notes.append(f"{dropped} sizes are on one side only (or outside the range) and left out")

    fr, fb = run.ccb.bus_factor, baseline.ccb.bus_factor
    if not fr or not fb:
        one = _label(run) if not fr else _label(baseline)
        raise CompareError(f"{one}: the bus factor of {run.attrs.get('collective')} is 0 "
                           f"(one rank?), so its busbw is 0 and no ratio exists")
    it_r = run.ccb.iteration_time(rank_stat).sel(size=sizes)
    it_b = baseline.ccb.iteration_time(rank_stat).sel(size=sizes)
    rng = np.random.default_rng(seed)
    alpha = (1 - confidence) / 2
    A, P, S = len(pairs), len(pls), len(sizes)
    out = {k: np.full((A, P, S), np.nan) for k in ("busbw", "busbw_baseline", "ratio",
                                                   "ratio_lo", "ratio_hi")}
    n_run = np.zeros((A, P, S), dtype=np.int64)
    n_base = np.zeros((A, P, S), dtype=np.int64)
    method = np.full((A, P, S), "", dtype=object)
    verdict = np.full((A, P, S), "n/a", dtype=object)
    gb = sizes.astype(float) / 1e3      # bytes/µs -> GB/s
    # batch and graph timing store one average in every iteration slot: no spread to resample
    timed_together = [side for side, d in (("run", run), ("baseline", baseline))
                      if str(d.attrs.get("timing", "")) in ("batch", "graph")]
    aggregated = bool(timed_together)
    for ai, (_, ra, ba) in enumerate(pairs):
        for pi, pl in enumerate(pls):
            R = np.asarray(it_r.sel(algorithm=ra, placement=pl).transpose("size", "iteration")
                           .values, dtype=float)
            B = np.asarray(it_b.sel(algorithm=ba, placement=pl).transpose("size", "iteration")
                           .values, dtype=float)
            # a time that is no time (a broken file, a hand-made Dataset) is missing: a
            # negative or infinite ratio means nothing
            with np.errstate(invalid="ignore"):
                R[~(np.isfinite(R) & (R > 0))] = np.nan
                B[~(np.isfinite(B) & (B > 0))] = np.nan
            tr, tb = _stat(R, stat), _stat(B, stat)
            with np.errstate(all="ignore"):
                out["busbw"][ai, pi] = gb / tr * fr
                out["busbw_baseline"][ai, pi] = gb / tb * fb
                out["ratio"][ai, pi] = (tb / tr) * (fr / fb)
            for si in range(S):
                a = R[si][np.isfinite(R[si]) & (R[si] > 0)]
                b = B[si][np.isfinite(B[si]) & (B[si] > 0)]
                n_run[ai, pi, si], n_base[ai, pi, si] = len(a), len(b)
                ratio = out["ratio"][ai, pi, si]
                if not np.isfinite(ratio) or not len(a) or not len(b):
                    method[ai, pi, si] = "missing"
                    continue
                if len(a) >= min_samples and len(b) >= min_samples and not aggregated:
                    boots = _bootstrap(a, b, stat, n_boot, rng) * (fr / fb)
                    lo, hi = np.nanpercentile(boots, [100 * alpha, 100 * (1 - alpha)])
                    out["ratio_lo"][ai, pi, si], out["ratio_hi"][ai, pi, si] = lo, hi
                    method[ai, pi, si] = "bootstrap"
                    verdict[ai, pi, si] = ("faster" if lo > 1 else "slower" if hi < 1
                                           else "indistinguishable")
                else:
                    method[ai, pi, si] = "plain ratio"
                    verdict[ai, pi, si] = ("faster" if ratio > 1 + tolerance else "slower"
                                           if ratio < 1 - tolerance else "indistinguishable")
    dims = ("algorithm", "placement", "size")
    units = {"units": "GB/s"}
    res = xr.Dataset(
        {"busbw": (dims, out["busbw"], dict(units, long_name="busbw of the run")),
         "busbw_baseline": (dims, out["busbw_baseline"], dict(units, long_name="busbw of the baseline")),
         "ratio": (dims, out["ratio"], {"long_name": "busbw ratio run / baseline (> 1: run faster)"}),
         "ratio_lo": (dims, out["ratio_lo"], {"long_name": f"{confidence:.0%} CI low (bootstrap)"}),
         "ratio_hi": (dims, out["ratio_hi"], {"long_name": f"{confidence:.0%} CI high (bootstrap)"}),
         "n_run": (dims, n_run, {"long_name": "iterations of the run used"}),
         "n_baseline": (dims, n_base, {"long_name": "iterations of the baseline used"}),
         "method": (dims, method.astype(str)),
         "verdict": (dims, verdict.astype(str))},
        coords={"algorithm": [p[0] for p in pairs], "placement": pls, "size": sizes,
                "run_algorithm": ("algorithm", [p[1] for p in pairs]),
                "baseline_algorithm": ("algorithm", [p[2] for p in pairs])})
    plain = method == "plain ratio"
    why = []
    if plain.any() and timed_together:
        why = [" and the ".join(timed_together) + " timed iterations together (batch or graph "
               "timing: every iteration slot holds one average)"]
    elif plain.any():
        short = [side for side, n in (("run", n_run), ("baseline", n_base))
                 if (n[plain] < min_samples).any()]
        why = [" and the ".join(short) + f" ha{'ve' if len(short) > 1 else 's'} fewer than "
               f"{min_samples} iterations per size (aggregated numbers)"]
    res.attrs = {
        "collective": str(run.attrs.get("collective")), "dtype": str(run.attrs.get("dtype") or ""),
        "op": str(run.attrs.get("op", "")), "run": run_label or _label(run),
        "against": baseline_label or _label(baseline),
        "stat": stat, "rank_stat": rank_stat, "confidence": confidence, "n_boot": n_boot,
        "tolerance": tolerance, "seed": seed,
        "method": (f"bootstrap {confidence:.0%} CI: {n_boot} resamples of each side's "
                   f"iterations, percentile interval, where both sides have >= {min_samples} "
                   "iterations; verdict faster/slower when the CI excludes 1"
                   + (f"; plain ratio elsewhere, indistinguishable within ±{tolerance:.0%}, "
                      "because the " + why[0] if why else "")),
        "time": f"{stat} over iterations of the {rank_stat} over ranks",
        "notes": json.dumps(notes),
    }
    return res


def _one(data, other):
    """A Dataset from `data`; from a DataTree or {name: Dataset}, the one of
    `other`'s collective."""
    if isinstance(data, xr.Dataset):
        return data
    if isinstance(data, xr.DataTree):
        parts = {n: node.to_dataset() for n, node in data.children.items()} or {"": data.to_dataset()}
    elif isinstance(data, Mapping):  # {name: Dataset}, run_many's
        parts = data
    else:
        raise TypeError(f"compare takes ccbench results Datasets, not {type(data).__name__}")
    want = other.attrs.get("collective") if isinstance(other, xr.Dataset) else None
    hits = [d for d in parts.values() if d.attrs.get("collective") == want] if want else []
    if hits:
        return hits[0]
    if len(parts) == 1:
        return next(iter(parts.values()))
    raise CompareError("which collective? this holds " + ", ".join(parts)
                       + (f" and none is {want}" if want else "") + "; pick one (tree['all_reduce'])")


def compare_parts(run_parts, base_parts, **kw):
    """[(run name, baseline name, result)] for every collective both sides have.

    Pairs each run result set with the baseline's of the same collective
    (preferring the same rank count, dtype and op).  A communicator of a
    production job (NCCL Inspector) is compared only with a result set of
    its rank count.  Refuses (CompareError) when no pair
    exists, naming what each side has.
    """
    out, refusals = [], []
    for rname, rds in run_parts.items():
        same = [(n, d) for n, d in base_parts.items()
                if d.attrs.get("collective") == rds.attrs.get("collective")]
        if not same:
            continue

        def rank(item):
            d = item[1].attrs
            return (str(d.get("nranks")) != str(rds.attrs.get("nranks")),
                    d.get("dtype") != rds.attrs.get("dtype"), d.get("op") != rds.attrs.get("op"))
        bname, bds = sorted(same, key=rank)[0]
        if _production(rds, bds) and str(bds.attrs.get("nranks")) != str(rds.attrs.get("nranks")):
            continue      # a job's communicator against another rank count says nothing
        try:
            out.append((rname, bname, compare(rds, bds, **kw)))
        except CompareError as e:
            refusals.append(str(e))
    if not out:
        if refusals:
            raise CompareError(refusals[0])
        require_common(run_parts, base_parts)
    return out


def _production(*datasets):
    return any(d.attrs.get("comm_id") for d in datasets)


def require_common(run_parts, base_parts):
    """Raise CompareError unless the run and the baseline ({name: Dataset})
    share a collective, naming what each side has."""
    collective = lambda parts: {d.attrs.get("collective") for d in parts.values()}  # noqa: E731
    if collective(run_parts) & collective(base_parts):
        return
    have = lambda parts: ", ".join(sorted({f"{d.attrs.get('collective')} "  # noqa: E731
                                           f"{d.attrs.get('dtype')}" for d in parts.values()}))
    raise CompareError(f"nothing to compare: the run has {have(run_parts)}, the baseline "
                       f"{have(base_parts)} (comparisons need the same collective and dtype)")


def below(result, min_ratio):
    """(algorithm, placement, size, ratio) of every size whose ratio is below `min_ratio`."""
    r = result["ratio"]
    hits = []
    vals = r.values
    for ai, pi, si in zip(*np.nonzero(np.isfinite(vals) & (vals < min_ratio))):
        hits.append((str(r["algorithm"].values[ai]), str(r["placement"].values[pi]),
                     int(r["size"].values[si]), float(vals[ai, pi, si])))
    return hits
