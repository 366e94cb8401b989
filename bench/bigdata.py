"""A run too big to hold comfortably: 256 ranks x 1000 iterations x 30 sizes
x 8 algorithms (6.1e7 latency samples, and as many start times), written
chunked, then summarized and reported lazily.

    .venv/bin/python bench/bigdata.py [--dir /tmp/ccb-bigdata] [--ranks 256]
        [--iters 1000] [--sizes 30] [--algorithms 8] [--no-report] [--keep]

Steps, each timed: (1) generate the Dataset with dask, one (algorithm,
placement, size) block at a time, and save it (`ccbench_kit.save`: zlib,
one chunk per block); (2) in a fresh process, open it lazily and run
``ds.ccb.summary()`` (avg) and ``summary(stats=("avg", "p50", "p99"))``,
reporting wall time and the process's peak RSS; (3) render the HTML report
(`report.driver.render`), reporting wall time and the peak RSS of the
kernel process.  Targets: summary < 20 s and < 4 GB RSS; report < 2 min.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

ALGORITHMS = ["ring", "mpi", "recursive_doubling", "rabenseifner", "tree", "direct",
              "nccl:ring", "nccl:tree"]


def _block(block_info=None, *, sizes, iters, seed, what):
    """Latency (or start) of one (algorithm, placement, size) block: an α-β
    time per algorithm, rank-to-rank spread, two slow ranks, rare spikes."""
    loc, shape = block_info[None]["chunk-location"], block_info[None]["chunk-shape"]
    a, s = loc[0], loc[2]
    rng = np.random.default_rng([seed, a, s])
    nranks = shape[3]
    alpha = 5.0 + 3.0 * a                      # µs
    beta = 1.0 / (20.0 - 1.5 * a)              # µs per kB: 20 GB/s down to 9.5 GB/s
    base = alpha + sizes[s] / 1e3 * beta
    slow = [7 % nranks, 131 % nranks]                # two stragglers
    rank_factor = 1.0 + 0.02 * rng.standard_normal(nranks)
    rank_factor[slow] *= 1.3
    lat = base * rank_factor[:, None] * rng.lognormal(0.0, 0.05, (nranks, iters))
    spiked = np.flatnonzero(rng.random(iters) < 2e-3)   # one rank stalls, rarely
    lat[rng.integers(0, nranks, spiked.size), spiked] *= 5.0
    if what == "start":
        period = lat.max(axis=0)
        start = np.concatenate([[0.0], np.cumsum(period)[:-1]])
        late = np.zeros(nranks)
        late[slow] = 0.3 * base                      # and they arrive late
        lat = start[None, :] + late[:, None] + rng.uniform(0, 0.05 * base, (nranks, iters))
    return lat.reshape(shape)


def synthetic(nranks, iters, nsizes, nalg, seed=0):
    """A lazy results Dataset of all_reduce (one placement)."""
    import dask.array as da

    from ccbench_kit.dataset.schema import DIMS, make_dataset

    hosts = [f"node{r // 8:03d}" for r in range(nranks)]
    algs = (ALGORITHMS * (nalg // len(ALGORITHMS) + 1))[:nalg]
    algs = [a if algs.count(a) == 1 else f"{a}{i}" for i, a in enumerate(algs)]
    sizes = [8 << k for k in range(nsizes)]
    shape = (nalg, 1, nsizes, nranks, iters)
    chunks = ((1,) * nalg, (1,), (1,) * nsizes, (nranks,), (iters,))
    placeholder = np.broadcast_to(np.float64(0), shape)  # no memory: replaced below
    ds = make_dataset(
        algorithms=algs, placements=["out_of_place"], sizes=sizes, counts=[s // 4 for s in sizes],
        in_bytes=sizes, out_bytes=sizes, latency=placeholder, start=placeholder,
        wrong=np.zeros(shape[:3], np.int64), ranks=range(nranks),
        hosts=hosts, devices=["cpu"] * nranks,
        attrs={"collective": "all_reduce", "dtype": "fp32", "op": "sum", "root": -1,
               "nranks": nranks, "backend": "mpi", "library": "synthetic", "timing": "host-clock",
               "warmup": 5, "iters": iters, "command": "bench/bigdata.py",
               "hosts": sorted(set(hosts)),
               "env": {}, "check": "none", "complete": True})
    for what in ("latency", "start"):
        lazy = da.map_blocks(_block, dtype=np.float64, chunks=chunks, sizes=sizes, iters=iters,
                             seed=seed, what=what, meta=np.empty((0,) * 5))
        ds[what] = (DIMS, lazy, ds[what].attrs)
    return ds


def _peak_rss_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux


def summarize(path):
    """Run in a fresh process: open lazily, summarize; print JSON timings."""
    import dask

    import ccbench_kit as ccb

    dask.config.set(scheduler="threads")
    out = {}
    for chunks, key in (({}, "file_chunks"), ("auto", "auto_chunks")):
        t0 = time.perf_counter()
        ds = ccb.load(path, chunks=chunks)
        out[f"open_{key}_s"] = time.perf_counter() - t0
        assert ds["latency"].chunks is not None, "not lazy"
        t0 = time.perf_counter()
        df = ds.ccb.summary()
        out[f"summary_{key}_s"] = time.perf_counter() - t0
    # a second table of the same Dataset reuses the iteration times
    t0 = time.perf_counter()
    df3 = ds.ccb.summary(stats=("avg", "p50", "p99"))
    out["summary_avg_p50_p99_again_s"] = time.perf_counter() - t0
    out["rows"] = len(df)
    out["busbw_max_gbps"] = float(np.nanmax(df[("out_of_place", "busbw")]))
    out["p99_over_avg_median"] = float(np.nanmedian(
        df3[("out_of_place", "time:p99")] / df3[("out_of_place", "time:avg")]))
    out["peak_rss_gb"] = _peak_rss_gb()
    print(json.dumps(out))


def _watch_rss(stop, peak, root_pid):
    import psutil

    root = psutil.Process(root_pid)
    while not stop.is_set():
        try:
            for p in root.children(recursive=True):
                try:
                    peak[p.pid] = max(peak.get(p.pid, 0), p.memory_info().rss)
                except psutil.NoSuchProcess:
                    pass
        except psutil.NoSuchProcess:
            return
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/ccb-bigdata")
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--sizes", type=int, default=30)
    ap.add_argument("--algorithms", type=int, default=8)
    ap.add_argument("--no-report", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the data file")
    ap.add_argument("--reuse", action="store_true", help="use the data file of a --keep run")
    ap.add_argument("--summarize", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.summarize:
        return summarize(args.summarize)

    import dask

    import ccbench_kit as ccb

    os.makedirs(args.dir, exist_ok=True)
    path = os.path.join(args.dir, "bigdata.nc")
    n = args.ranks * args.iters * args.sizes * args.algorithms
    print(f"# {args.ranks} ranks x {args.iters} iterations x {args.sizes} sizes x "
          f"{args.algorithms} algorithms = {n:.3g} samples (latency and start: "
          f"{2 * n * 8 / 1e9:.2f} GB as float64)")
    if not (args.reuse and os.path.exists(path)):
        t0 = time.perf_counter()
        with dask.config.set(scheduler="threads"):
            ccb.save(synthetic(args.ranks, args.iters, args.sizes, args.algorithms), path)
        print(f"generate+save: {time.perf_counter() - t0:.1f} s, file "
              f"{os.path.getsize(path) / 1e9:.2f} GB, peak RSS {_peak_rss_gb():.2f} GB")

    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--summarize", path],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"summary failed:\n{proc.stderr}")
    s = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"summary (fresh process, {time.perf_counter() - t0:.1f} s with start-up): "
          f"load(chunks={{}}) + summary() {s['open_file_chunks_s'] + s['summary_file_chunks_s']:.1f}"
          f" s, load(chunks='auto') + summary() "
          f"{s['open_auto_chunks_s'] + s['summary_auto_chunks_s']:.1f} s, then "
          f"summary(avg,p50,p99) {s['summary_avg_p50_p99_again_s']:.1f} s; peak RSS "
          f"{s['peak_rss_gb']:.2f} GB ({s['rows']} rows, best busbw "
          f"{s['busbw_max_gbps']:.3g} GB/s, median p99/avg {s['p99_over_avg_median']:.3f})")
    worst = max(s["open_file_chunks_s"] + s["summary_file_chunks_s"],
                s["open_auto_chunks_s"] + s["summary_auto_chunks_s"])
    ok = worst < 20 and s["peak_rss_gb"] < 4
    if not args.no_report:
        from ccbench_kit.report.driver import render

        html = os.path.join(args.dir, "bigdata.html")
        stop, peak = threading.Event(), {}
        watcher = threading.Thread(target=_watch_rss, args=(stop, peak, os.getpid()),
                                   daemon=True)
        watcher.start()
        t0 = time.perf_counter()
        render([path], html, title="bigdata bench")
        took = time.perf_counter() - t0
        stop.set()
        watcher.join()
        kernel = max(peak.values()) / 1e9 if peak else float("nan")
        print(f"report: {took:.1f} s, {os.path.getsize(html) / 1e6:.2f} MB HTML, kernel peak "
              f"RSS {kernel:.2f} GB ({html})")
        ok = ok and took < 120
    if not args.keep:
        shutil.rmtree(args.dir, ignore_errors=True)
    print("PASS" if ok else "FAIL", "(targets: summary < 20 s, < 4 GB RSS; report < 2 min)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
