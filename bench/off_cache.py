"""--off-cache's effect: the same all_reduce with and without IMB-style
rotating buffers, interleaved in one job, rounds alternating which goes first.

    python bench/off_cache.py [--ranks 2] [--sizes 256K,2M,64M] [--rounds 5]

Prints the median time (µs, avg over iterations of the max over ranks) of
each mode per size and the ratio off-cache / cached.  Below the last-level
cache a cached buffer stays warm between iterations; off-cache every
iteration reads memory.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(args, extra, out):
    cmd = [os.path.join(os.path.dirname(sys.executable), "ccbench"), "run", "all_reduce",
           "-r", str(args.ranks), "--sizes", args.sizes, "-n", str(args.iters), "-w", "2",
           "--algorithms", args.algorithm, "--placement", "out_of_place", "--non-interactive",
           "--out", out, *extra]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    import ccbench_kit as ccb
    ds = ccb.load(out)
    t = ds.ccb.time("avg").sel(algorithm=args.algorithm, placement="out_of_place")
    return {int(s): float(t.sel(size=s)) for s in ds["size"].values}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--sizes", default="256K,2M,64M")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--algorithm", default="mpi")
    args = p.parse_args()
    times = {"cached": {}, "off-cache": {}}
    with tempfile.TemporaryDirectory(prefix="ccb-offcache-") as tmp:
        for r in range(args.rounds):
            order = [("cached", []), ("off-cache", ["--off-cache"])]
            for name, extra in (order if r % 2 == 0 else order[::-1]):
                for size, t in run(args, extra, os.path.join(tmp, f"{name}{r}.nc")).items():
                    times[name].setdefault(size, []).append(t)
    print(f"{'size':>10} {'cached us':>12} {'off-cache us':>13} {'ratio':>7}")
    for size in sorted(times["cached"]):
        c = statistics.median(times["cached"][size])
        o = statistics.median(times["off-cache"][size])
        print(f"{size:>10} {c:>12.1f} {o:>13.1f} {o / c:>7.2f}")


if __name__ == "__main__":
    main()
