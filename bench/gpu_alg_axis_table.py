"""The tables and goal figures of `bench/gpu_alg_axis.sh`'s runs, from its archive.

    python bench/gpu_alg_axis_table.py RUNS      (RUNS: runs.tgz extracted, its runs/ folder)

Reads every timed run through the kit's own readers (`importers.load`:
nccl-tests' printed logs `nt_*.txt`, the kit's Datasets `kit_*.nc`) and
prints, as markdown: the side-by-side table (out of place; µs, and busbw
GB/s from 1 MiB), the small sizes in the three timing modes, and the
figures issues 34 and 35 judge by.  Every time is nccl-tests' ``-a 1``
reading (each rank's mean over iterations, then the mean over ranks), the
one both sides printed.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import ccbench_kit.importers as importers  # noqa: E402  (after the path)

KiB, MiB = 1024, 1024 ** 2
TABLE_SIZES = [8, 64, 512, 4 * KiB, 16 * KiB, 32 * KiB, 256 * KiB, MiB, 2 * MiB, 4 * MiB, 8 * MiB,
               16 * MiB, 32 * MiB, 256 * MiB, 512 * MiB, 1024 * MiB]
COLUMNS = [("nccl-tests default", "nt_default", "nccl"), ("kit nccl", "kit_nccl", "nccl"),
           ("nccl-tests -R 2", "nt_R2", None), ("kit -R 2", "kit_R2", "nccl"),
           ("nccl-tests -R 2 -D 1", "nt_R2_D1", None), ("-R 2 -D 2", "nt_R2_D2", None),
           ("kit oneshot", "kit_batch", "oneshot"), ("kit twoshot", "kit_batch", "twoshot")]


def label(size):
    for unit, name in ((MiB * 1024, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if size >= unit:
            return f"{size // unit} {name}"
    return f"{size} B"


def figures(runs, name, algorithm, placement="out_of_place"):
    """{size: (time µs, busbw GB/s)} of one run's algorithm (None: the only one)."""
    suffix = ".nc" if name.startswith("kit") else ".txt"
    ds = importers.load(os.path.join(runs, name + suffix))
    if algorithm is None:
        algorithm = str(ds["algorithm"].values[0])
    t = ds.ccb.time("avg", "ranks-avg").sel(algorithm=algorithm, placement=placement)
    bw = ds.ccb.busbw("avg", "ranks-avg").sel(algorithm=algorithm, placement=placement)
    return {int(s): (float(t.sel(size=s)), float(bw.sel(size=s))) for s in t["size"].values}


def cell(fig, size):
    if size not in fig:
        return "-"
    t, bw = fig[size]
    return f"{t:.2f}" if size < MiB else f"{t:.1f} ({bw:.0f})"


def main_table(runs):
    cols = [figures(runs, name, alg) for _, name, alg in COLUMNS]
    nccl = cols[1]
    print("| size | " + " | ".join(c for c, _, _ in COLUMNS) + " | best own / kit nccl |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for s in TABLE_SIZES:
        own = [cols[6][s], cols[7][s]]
        best = min(own)          # the faster own kernel: lower time, higher busbw
        ratio = f"time {best[0] / nccl[s][0]:.2f}x" if s < MiB else f"{best[1] / nccl[s][1]:.2f}x"
        print(f"| {label(s)} | " + " | ".join(cell(c, s) for c in cols) + f" | {ratio} |")
    return cols


def timing_modes(runs):
    print("\nSmall sizes in the three timing modes (µs, out of place):\n")
    print("| size | batch nccl | oneshot | twoshot | events nccl | oneshot | twoshot "
          "| graph nccl | oneshot | twoshot |")
    print("|---" * 10 + "|")
    modes = [[figures(runs, run, a) for a in ("nccl", "oneshot", "twoshot")]
             for run in ("kit_batch", "kit_events", "kit_graph")]
    for s in (8, 64, 512, 4 * KiB, 32 * KiB, 256 * KiB):
        print(f"| {label(s)} | " + " | ".join(f"{f[s][0]:.2f}" for m in modes for f in m) + " |")


def goals(runs, cols):
    nt, kit, nt_d2 = cols[0], cols[1], cols[5]
    own = {s: max(cols[6][s][1], cols[7][s][1]) for s in cols[6]}
    print("\nbest own busbw / kit nccl, 1-8 MiB:",
          ", ".join(f"{label(s)} {own[s] / kit[s][1]:.2f}x" for s in (MiB, 2 * MiB, 4 * MiB, 8 * MiB)))
    print("best own busbw / nccl-tests default, 1-8 MiB:",
          ", ".join(f"{label(s)} {own[s] / nt[s][1]:.2f}x" for s in (MiB, 2 * MiB, 4 * MiB, 8 * MiB)))
    print("best own busbw / nccl-tests -R 2 -D 2, 2-32 MiB:",
          ", ".join(f"{label(s)} {own[s] / nt_d2[s][1]:.2f}x"
                    for s in (2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB, 32 * MiB)))
    print("best own busbw / kit nccl, >= 256 MiB:",
          ", ".join(f"{label(s)} {own[s] / kit[s][1]:.1%}" for s in (256 * MiB, 512 * MiB, 1024 * MiB)))
    kit_r2, nt_r2 = cols[3], cols[2]
    print("kit -R 2 busbw / nccl-tests -R 2:",
          ", ".join(f"{label(s)} {kit_r2[s][1] / nt_r2[s][1]:.1%}" for s in sorted(kit_r2) if s >= MiB))
    for placement in ("out_of_place", "in_place"):
        k, n = figures(runs, "kit_nccl", "nccl", placement), figures(runs, "nt_default", None, placement)
        print(f"issue 34, {placement}: busbw kit / nccl-tests",
              ", ".join(f"{label(s)} {k[s][1] / n[s][1]:.1%}" for s in sorted(k) if s >= 256 * MiB),
              "; time kit - nccl-tests below 1 KiB:",
              ", ".join(f"{label(s)} {k[s][0] - n[s][0]:+.2f}" for s in sorted(k) if s < KiB))


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        sys.exit("usage: gpu_alg_axis_table.py RUNS (the runs/ folder of gpu_alg_axis.sh's runs.tgz)")
    cols = main_table(argv[0])
    timing_modes(argv[0])
    goals(argv[0], cols)


if __name__ == "__main__":
    main(sys.argv[1:])
