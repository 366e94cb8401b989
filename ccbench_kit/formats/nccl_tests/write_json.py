"""nccl-tests' ``-J`` JSON output, format version 3 (nccl-tests 2.19).

The layout follows nccl-tests' src/util.cu key for key, so that tools
written for its files (``tools/analyze_perf_json.py``, importers) read ours:

- top level: ``version``, ``start_time``, ``args``, ``env``, ``nccl_version``,
  ``config``, ``results``, ``out_of_bounds``, ``average_bus_bandwidth``,
  ``errors``, ``end_time``;
- ``config.devices``: one entry per process (rank) with its replica
  ``group``;
- ``results[]``: ``size``, ``count``, ``type``, ``redop``, ``root`` (a
  ``%6i`` string), then per placement ``{time, alg_bw, bus_bw, nwrong}``
  (``null`` for a placement that was not run, ``nwrong`` null when not
  checked; ``cpu_time`` in place of ``time`` for a ``-C 1`` run) followed,
  for a ``--per_iter_timing 1`` run (nccl-tests' ``-I 1``), by
  ``<placement>_per_iter`` as ``-I 1`` writes it: ``times_us`` is each
  iteration's max over ranks (every iteration), the statistics leave out
  the first ``skipped_iterations`` (``-K``), and ``per_process_max_times_us``
  has one row per rank; then ``actual_iterations`` and ``experiment_name``.
  A file written before the kit recorded ``per_iter_timing`` gets the
  blocks whenever its iterations are its own.

The kit's additions stay inside the format: several algorithms give one
result per (size, algorithm), in that order, each naming its algorithm in
``experiment_name``.  ``time`` is the kit's reported time (mean over
iterations of the max over ranks; nccl-tests averages each rank's loop time
over ranks) and equals the mean of ``times_us``.  Numbers keep full double
precision rather than nccl-tests' six decimals; NaN is written ``"nan"``.
"""
import datetime
import re
import shlex

import numpy as np

from ...dataset.schema import attr_json
from ...dtypes import get_dtype
from ..common.build import tool_size

FORMAT_VERSION = 3
PLACEMENTS = ("out_of_place", "in_place")
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def nccl_tests_json(ds):
    """The JSON document (a dict) for one collective's Dataset."""
    a = ds.attrs
    stamp = _local_time(a.get("created", ""))
    per_iter = "aggregated" not in a and bool((ds["rank"].values >= 0).all())
    if "per_iter_timing" in a:
        per_iter = per_iter and a["per_iter_timing"] in (True, 1, "true", "1")
    skip = int(a.get("per_iter_skip", 0) or 0) if per_iter else 0
    results = _results(ds, per_iter, skip)
    failed = ds.ccb.failed_checks()
    return {
        "version": FORMAT_VERSION,
        "start_time": stamp,
        "args": shlex.split(a.get("command", "") or ""),
        "env": [f"{k}={v}" for k, v in (attr_json(ds, "env", {}) or {}).items()],
        "nccl_version": _nccl_version(a.get("library", "")),
        "config": _config(ds, per_iter, skip),
        "results": results,
        "out_of_bounds": {"count": failed, "okay": _bool(failed == 0)},
        "average_bus_bandwidth": {"bandwidth": ds.ccb.avg_busbw(), "okay": "unchecked"},
        "errors": [a.get("incomplete_reason", "")],
        "end_time": stamp,
    }


def _results(ds, per_iter, skip=0):
    a = ds.attrs
    dtype = get_dtype(a.get("dtype", "fp32")).nccl_tests
    op = a.get("op", "") or "none"
    root = f"{int(a.get('root', -1)):6d}"
    time = ds.ccb.time("avg").values           # (algorithm, placement, size)
    algbw = ds.ccb.algbw("avg").values
    busbw = ds.ccb.busbw("avg").values
    wrong = ds["wrong"].values
    lat = ds["latency"].values                 # (algorithm, placement, size, rank, iteration)
    placements = [str(p) for p in ds["placement"].values]
    iters = int(a.get("iters", ds.sizes["iteration"]))
    time_key = "cpu_time" if a.get("report_cputime") in (True, 1, "true", "1") else "time"
    out = []
    for si, size in enumerate(ds["size"].values):
        for ai, alg in enumerate(ds["algorithm"].values):
            res = {"size": tool_size("nccl-tests", a.get("collective"), size, ds.ccb.nranks),
                   "count": int(ds["count"].values[si]), "type": dtype,
                   "redop": op, "root": root}
            for p in PLACEMENTS:
                if p not in placements:
                    res[p] = None
                    continue
                pi = placements.index(p)
                w = int(wrong[ai, pi, si])
                res[p] = {time_key: float(time[ai, pi, si]), "alg_bw": float(algbw[ai, pi, si]),
                          "bus_bw": float(busbw[ai, pi, si]),
                          "nwrong": None if w < 0 else float(w)}
                if per_iter:
                    res[f"{p}_per_iter"] = per_iter_block(lat[ai, pi, si], skip)
            res["actual_iterations"] = iters
            res["experiment_name"] = str(alg)
            out.append(res)
    return out


def per_iter_block(rank_times, skip=0):
    """nccl-tests' ``*_per_iter`` object from (rank, iteration) times in µs;
    the statistics leave out the first `skip` iterations (``-K``),
    ``times_us`` keeps them."""
    rank_times = np.asarray(rank_times, dtype=np.float64)
    times = rank_times.max(axis=0)
    s = iter_stats(times[skip:])
    block = {"skipped_iterations": int(skip), "min_us": s["min"], "max_us": s["max"], "avg_us": s["avg"],
             "p50_us": s["p50"], "p95_us": s["p95"], "p99_us": s["p99"],
             "stdev_us": s["stdev"], "cv_pct": s["cv_pct"],
             "times_us": [float(t) for t in times]}
    if rank_times.shape[0] > 1:
        block["per_process_max_times_us"] = [[float(t) for t in row] for row in rank_times]
    return block


def iter_stats(times):
    """nccl-tests' computeIterStats: nearest-rank percentiles, population stdev."""
    x = np.sort(np.asarray(times, dtype=np.float64))
    n = len(x)
    if n == 0:
        nan = float("nan")
        return dict(min=nan, max=nan, avg=nan, p50=nan, p95=nan, p99=nan, stdev=nan, cv_pct=nan)

    def pct(p):
        return float(x[min(n - 1, (n * p + 99) // 100 - 1)])

    avg = float(x.sum() / n)
    stdev = float(np.sqrt(((x - avg) ** 2).sum() / n))
    return dict(min=float(x[0]), max=float(x[-1]), avg=avg, p50=float(x[n // 2]),
                p95=pct(95), p99=pct(99), stdev=stdev,
                cv_pct=stdev / avg * 100.0 if avg > 0 else 0.0)


def _config(ds, per_iter, skip=0):
    a = ds.attrs
    cfg = attr_json(ds, "config", {}) or {}
    requested = cfg.get("sizes") or [int(s) for s in ds["size"].values]
    config = {"nthreads": 1, "ngpus": 1,
              "minimum_bytes": int(min(requested)), "maximum_bytes": int(max(requested))}
    factor, step = _step(sorted(set(int(s) for s in requested)))
    if factor:
        config["step_factor"] = factor
    else:
        config["step_bytes"] = step
    config.update({
        "warmup_iters": int(a.get("warmup", 0)),
        "iterations": int(a.get("iters", ds.sizes["iteration"])),
        "aggregated_iterations": int(a.get("agg_iters", 1)),
        "validation": int(a.get("check", "none") not in ("none", "")),
        "graph": int(a.get("timing", "") == "graph"),
        "blocking_collectives": _bool(a.get("blocking") not in (None, False, 0, "false", "0", "")),
        "per_iter_timing": _bool(per_iter),
        "per_iter_skip": int(skip),
        "parallel_init": "false",
        "devices": _devices(ds),
    })
    return config


def _devices(ds):
    hosts = [str(h) for h in ds["host"].values]
    devices = [str(d) for d in ds["device"].values]
    groups = ds["group"].values if "group" in ds.coords else np.zeros(len(hosts), dtype=int)
    pids = ds["pid"].values if "pid" in ds.coords else np.zeros(len(hosts), dtype=int)
    seen, out = {}, []
    for i, r in enumerate(ds["rank"].values):
        local = seen.get(hosts[i], 0)
        seen[hosts[i]] = local + 1
        m = re.search(r"(?:cuda|gpu)\D{0,2}(\d+)", devices[i], re.IGNORECASE)
        out.append({"rank": int(r), "group": int(groups[i]), "pid": int(pids[i]),
                    "hostname": hosts[i], "device": int(m.group(1)) if m else local,
                    "device_hex": "", "device_info": devices[i]})
    return out


def _step(sizes):
    """(step_factor, 0) for a geometric sweep, else (0, step_bytes)."""
    if len(sizes) < 2:
        return 0, 0
    ratios = {b / a for a, b in zip(sizes, sizes[1:]) if a}
    if len(ratios) == 1 and sizes[0]:
        r = ratios.pop()
        return (int(r) if r == int(r) else r), 0
    steps = {b - a for a, b in zip(sizes, sizes[1:])}
    return 0, (steps.pop() if len(steps) == 1 else 0)


def _nccl_version(library):
    # NCCL_VERSION_CODE: 2.28.9 -> 22809 (major*10000 + minor*100 + patch since 2.9)
    m = re.search(r"NCCL\D*(\d+)\.(\d+)\.(\d+)", str(library))
    if not m:
        return 0
    major, minor, patch = map(int, m.groups())
    return major * 10000 + minor * 100 + patch if (major, minor) >= (2, 9) \
        else major * 1000 + minor * 100 + patch


def _local_time(iso):
    try:
        t = datetime.datetime.fromisoformat(str(iso))
    except ValueError:
        t = datetime.datetime.now(datetime.timezone.utc)
    return t.astimezone().strftime(_TIME_FORMAT)


def _bool(v):
    return "true" if v else "false"
