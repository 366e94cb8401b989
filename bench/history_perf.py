"""How fast a year of nightly sweeps is in the history (issue 25's target).

365 runs × 12 collectives × 3 algorithms × 30 sizes (one placement, 3 ranks,
4 iterations: the index keeps one summary per cell, so ranks and iterations
only change the filing time), latencies from an α-β model with 1 % lognormal
night-to-night noise and an 8 % step in every all_reduce series at run 300.
Generated, not measured: this times the history, not the collectives.
Night 0 is written by the kit (`save`); every other night is a copy of it
whose latencies, `created` and `library` are rewritten in place with h5py
(writing 365 files through xarray takes ~3 s each on a loaded 2-core box).

    .venv/bin/python bench/history_perf.py [--runs 365] [--keep DIR] [--check-only]

Prints: the time to generate, to file every run (`ccbench history add`, one
process), to rebuild the index from the files, a per-series query (the
Python API and `ccbench history show`, end to end), `history report`, and
`history check`: the all_reduce series, then every series as the nightly
cron runs it (`--since 7d`, with and without `--min-change 5%`) and with
the all_reduce step inside the window (`--since 80d`).  `--check-only`
times only the checks, on a history kept earlier with `--keep DIR`.  Targets: per-series query < 1 s,
report < 60 s.
"""
import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ccbench_kit.collectives import NAMES  # noqa: E402
from ccbench_kit.dataset import save  # noqa: E402
from ccbench_kit.dataset.schema import make_dataset  # noqa: E402

ALGORITHMS = ["ring", "tree", "mpi"]
SIZES = [8 << i for i in range(30)]
NRANKS, ITERS = 3, 4
CCBENCH = Path(sys.executable).parent / "ccbench"


def one_run(night, rng, start):
    """The {collective: Dataset} of night `night`."""
    parts = {}
    for c, coll in enumerate(NAMES):
        base = (5.0 + c) + np.array(SIZES, dtype=float)[None, :] / (2e3 * (1 + np.arange(3)))[:, None]
        step = 1 / 0.92 if coll == "all_reduce" and night >= 300 else 1.0
        lat = base * step * np.exp(rng.normal(0, 0.01, size=base.shape))
        lat = np.broadcast_to(lat[:, None, :, None, None], (3, 1, 30, NRANKS, ITERS)).copy()
        lat *= np.exp(rng.normal(0, 0.002, size=lat.shape))
        parts[coll] = make_dataset(
            algorithms=ALGORITHMS, placements=["out_of_place"], sizes=SIZES, counts=SIZES,
            in_bytes=SIZES, out_bytes=SIZES, latency=lat, wrong=np.zeros((3, 1, 30)),
            ranks=range(NRANKS), hosts=["node1"] * NRANKS, devices=["cpu"] * NRANKS,
            attrs={"collective": coll, "dtype": "int8", "op": "sum", "backend": "mpi",
                   "library": "Open MPI v4.1.5" if night >= 300 else "Open MPI v4.1.4",
                   "timing": "host-clock", "kit_version": "0.1.0", "hosts": ["node1"],
                   "created": (start + dt.timedelta(days=night)).isoformat(), "env": {}})
    return parts


def rewrite(first, path, parts):
    """A copy of `first` with the latencies and attrs of `parts`."""
    import shutil

    import h5py
    shutil.copyfile(first, path)
    with h5py.File(path, "r+") as f:
        for k, (name, ds) in enumerate(parts.items()):
            group = f if k == 0 else f[name]
            group["latency"][...] = ds["latency"].values
            for attr in ("created", "library"):
                group.attrs[attr] = ds.attrs[attr]


def timed(label, fn, log):
    t = time.perf_counter()
    out = fn()
    took = time.perf_counter() - t
    log(f"{label}: {took:.2f} s (load average {open('/proc/loadavg').read().split()[0]})")
    return out, took


def cli(*args):
    proc = subprocess.run([str(CCBENCH), *map(str, args)], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"ccbench {' '.join(map(str, args))}: {proc.stderr}")
    return proc


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=365)
    ap.add_argument("--keep", default=None, help="keep the files and history here")
    ap.add_argument("--rebuild", action="store_true", help="also time a rebuild of the index")
    ap.add_argument("--check-only", action="store_true",
                    help="time only `history check` (on a history kept with --keep)")
    args = ap.parse_args(argv)
    work = Path(args.keep or tempfile.mkdtemp(prefix="history-perf-"))
    files, hist = work / "files", work / "history"
    files.mkdir(parents=True, exist_ok=True)
    log = lambda s: print(s, flush=True)  # noqa: E731
    log(f"# {args.runs} runs x {len(NAMES)} collectives x {len(ALGORITHMS)} algorithms x "
        f"{len(SIZES)} sizes; cores {os.cpu_count()}; load {open('/proc/loadavg').read().strip()}")
    rng = np.random.default_rng(0)
    start = dt.datetime(2025, 1, 1, 2, tzinfo=dt.timezone.utc)

    def generate():
        first = files / "night-000.nc"
        save(one_run(0, rng, start), first)
        for night in range(1, args.runs):
            rewrite(first, files / f"night-{night:03d}.nc", one_run(night, rng, start))
    if not any(files.glob("*.nc")):
        timed("generate", generate, log)
    paths = sorted(files.glob("*.nc"))
    if not (hist / "index.sqlite").exists():
        timed(f"history add of {len(paths)} files (one process)",
              lambda: cli("history", "add", "--history", hist, *paths), log)
    log(f"index size: {(hist / 'index.sqlite').stat().st_size / 1e6:.1f} MB")
    if args.rebuild:
        timed("rebuild the index from the files",
              lambda: cli("history", "rebuild", "--history", hist), log)
    import ccbench_kit.history as H
    key = "all_reduce/ring/out_of_place/4294967296/int8/3r1n/mpi"
    with H.open(hist) as h:
        pts, took = timed("per-series query, Python API (points of one series)",
                          lambda: h.points(key), log)
        assert len(pts) == args.runs
        timed("per-series query + change points (analyse)", lambda: h.analyse(key), log)
    if args.check_only:
        return check(hist, log)
    out, _ = timed("ccbench history show SERIES (process, end to end)",
                   lambda: cli("history", "show", "--history", hist, key), log)
    log("  " + "\n  ".join(out.stdout.splitlines()[:5]))
    timed("ccbench history report -o trend.html",
          lambda: cli("history", "report", "--history", hist, "-o", work / "trend.html"), log)
    check(hist, log)


def check(hist, log):
    """Time `history check`: one collective's series, then the nightly cron line over all."""
    out, _ = timed("ccbench history check of the all_reduce series (90 of 1080)",
                   lambda: cli("history", "check", "--history", hist, "--series", "all_reduce/*"),
                   log)
    log(f"  {len(out.stdout.splitlines())} regression lines; first: {out.stdout.splitlines()[:1]}")
    for extra in ([], ["--min-change", "5%"]):  # the nightly cron line, over every series
        out, _ = timed(f"ccbench history check --since 7d {' '.join(extra)} (all "
                       f"{len(SIZES) * len(ALGORITHMS) * len(NAMES)} series)",
                       lambda: cli("history", "check", "--history", hist, "--since", "7d", *extra),
                       log)
        log(f"  exit {out.returncode}, {len(out.stdout.splitlines())} regression lines")
    out, _ = timed("ccbench history check --since 80d (the all_reduce step at run 300 inside)",
                   lambda: cli("history", "check", "--history", hist, "--since", "80d"), log)
    log(f"  exit {out.returncode}, {len(out.stdout.splitlines())} regression lines; first: "
        f"{out.stdout.splitlines()[:1]}")


if __name__ == "__main__":
    main()
