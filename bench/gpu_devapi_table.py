"""The tables and goal figures of `bench/gpu_devapi.sh`'s runs, from its archive.

    python bench/gpu_devapi_table.py RUNS      (RUNS: runs.tgz extracted, its runs/ folder)

Reads every timed run through the kit's own readers (`importers.load`:
nccl-tests' printed logs ``nt_*.txt``, the kit's Datasets ``kit_*.nc``), for
each GPU count and round the script ran; a figure is the median over the
rounds of nccl-tests' ``-a 1`` reading (each rank's mean over iterations,
then the mean over ranks, batch timing), out of place, and beside it the
spread over rounds (min-max).  Prints, as markdown, per GPU count: the
side-by-side table and the figures issue 35 judges by.
"""
import glob
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gpu_alg_axis_table import KiB, MiB, label  # noqa: E402  (bench/ on the path)

import ccbench_kit.importers as importers  # noqa: E402  (after the path)

TABLE_SIZES = [8, 64, 512, 4 * KiB, 32 * KiB, 256 * KiB, MiB, 2 * MiB, 4 * MiB, 8 * MiB,
               16 * MiB, 32 * MiB, 256 * MiB, 1024 * MiB]
# (column, run, algorithm): None = the run's only one
COLUMNS = [("nt default", "nt_default", None), ("kit nccl", "kit_nccl", "nccl"),
           ("nt -R 2", "nt_R2", None), ("kit nccl -R 2", "kit_R2", "nccl"),
           # nccl-tests moves NCCL's buffers every iteration (docs/parity.md,
           # "Caches between iterations"): the kit's like for like; not in
           # archives before session 22
           ("kit nccl -R 2 unique", "kit_R2u", "nccl"),
           ("nt -D 1", "nt_R2_D1", None), ("kit lsa", "kit_R2", "lsa"),
           ("nt -D 2", "nt_R2_D2", None), ("kit lsa-vec", "kit_R2", "lsa-vec"),
           ("kit oneshot", "kit_R2", "oneshot"), ("kit oneshot-ll", "kit_R2", "oneshot-ll"),
           ("kit twoshot", "kit_R2", "twoshot")]


def one_run(path, algorithm):
    ds = importers.load(path)
    if algorithm is None:
        algorithm = str(ds["algorithm"].values[0])
    t = ds.ccb.time("avg", "ranks-avg").sel(algorithm=algorithm, placement="out_of_place")
    bw = ds.ccb.busbw("avg", "ranks-avg").sel(algorithm=algorithm, placement="out_of_place")
    return {int(s): (float(t.sel(size=s)), float(bw.sel(size=s))) for s in t["size"].values}


def figures(runs, name, algorithm, n):
    """{size: (median time, median busbw, (min, max) time)} over the rounds
    ({} where no round ran `algorithm`, or no such run: an archive older
    than it)."""
    suffix = ".nc" if name.startswith("kit") else ".txt"
    try:
        rounds = [one_run(p, algorithm) for p in
                  sorted(glob.glob(os.path.join(runs, f"{name}_n{n}_r*{suffix}")))]
    except KeyError:
        return {}
    out = {}
    for s in rounds[0] if rounds else ():
        ts = [r[s][0] for r in rounds]
        bws = [r[s][1] for r in rounds]
        out[s] = (statistics.median(ts), statistics.median(bws), (min(ts), max(ts)), len(ts))
    return out


def cell(fig, size):
    if size not in fig:
        return "-"
    t, bw, _, _ = fig[size]
    return f"{t:.2f}" if size < MiB else f"{t:.1f} ({bw:.0f})"


def report(runs, n):
    cols = {c: f for c, run, a in COLUMNS for f in [figures(runs, run, a, n)] if f}
    k = next(iter(cols.values()))[8][3]
    print(f"\n### {n} GPUs ({k} rounds; µs, and busbw GB/s from 1 MiB; medians over rounds)\n")
    print("| size | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for s in TABLE_SIZES:
        print(f"| {label(s)} | " + " | ".join(cell(f, s) for f in cols.values()) + " |")
    small = [s for s in sorted(cols["kit lsa"]) if s <= 32 * KiB]
    print("\nparity, kit vs nccl-tests (busbw ratio from 1 MiB; time difference in µs below):")
    for kit, nt in (("kit lsa", "nt -D 1"), ("kit lsa-vec", "nt -D 2"), ("kit nccl -R 2", "nt -R 2"),
                    ("kit nccl -R 2 unique", "nt -R 2"), ("kit nccl", "nt default")):
        if kit not in cols:
            continue
        a, b = cols[kit], cols[nt]
        big = [a[s][1] / b[s][1] for s in sorted(a) if s >= MiB]
        diff = [a[s][0] - b[s][0] for s in sorted(a) if s < MiB]
        print(f"- {kit} / {nt}: " + (f"busbw {min(big):.1%}-{max(big):.1%} (>= 1 MiB, "
                                    f"{len(big)} sizes); " if big else "")
              + f"time {min(diff):+.2f} to {max(diff):+.2f} µs (< 1 MiB)")
    print("\nper-round range 8 B-32 KiB (min-max of the rounds' means, µs): " + ", ".join(
        f"{a} {min(cols[a][s][2][0] for s in small):.2f}-{max(cols[a][s][2][1] for s in small):.2f}"
        for a in ("kit oneshot", "kit oneshot-ll", "nt -D 1", "kit nccl", "nt default") if a in cols))
    own_small = {a: max(cols[a][s][0] for s in small) for a in
                 ("kit lsa", "kit lsa-vec", "kit oneshot", "kit oneshot-ll") if a in cols}
    print("\nslowest time 8 B-32 KiB: " + ", ".join(f"{a} {t:.2f} µs" for a, t in own_small.items())
          + f"; nt -D 1 {max(cols['nt -D 1'][s][0] for s in small):.2f}; kit nccl "
          f"{min(cols['kit nccl'][s][0] for s in small):.2f}-{max(cols['kit nccl'][s][0] for s in small):.2f}")
    if 1024 * MiB not in cols["kit lsa"]:  # a run of small sizes only: no busbw goals
        return
    own = [a for a in ("kit lsa", "kit lsa-vec", "kit oneshot", "kit oneshot-ll", "kit twoshot")
           if a in cols]
    best = {s: max((cols[a][s][1], a) for a in own) for s in cols["kit lsa"]}
    print("best own busbw / kit nccl (NCCL's default), 1-8 MiB: " + ", ".join(
        f"{label(s)} {best[s][0] / cols['kit nccl'][s][1]:.2f}x ({best[s][1][4:]})"
        for s in (MiB, 2 * MiB, 4 * MiB, 8 * MiB)))
    print("best own busbw / nt -D 2, 2-32 MiB: " + ", ".join(
        f"{label(s)} {best[s][0] / cols['nt -D 2'][s][1]:.2f}x ({best[s][1][4:]})"
        for s in (2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB, 32 * MiB)))
    print("best own busbw / kit nccl, >= 256 MiB: " + ", ".join(
        f"{label(s)} {best[s][0] / cols['kit nccl'][s][1]:.1%} ({best[s][1][4:]})"
        for s in (256 * MiB, 512 * MiB, 1024 * MiB)))


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        sys.exit("usage: gpu_devapi_table.py RUNS (the runs/ folder of gpu_devapi.sh's runs.tgz)")
    counts = sorted({int(m.group(1)) for p in os.listdir(argv[0])
                     for m in [re.search(r"_n(\d+)_r\d+\.", p)] if m})
    for n in counts:
        report(argv[0], n)


if __name__ == "__main__":
    main(sys.argv[1:])
