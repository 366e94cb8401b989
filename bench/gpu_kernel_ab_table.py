"""The table of `bench/gpu_kernel_ab.sh`'s runs, from its archive.

    python bench/gpu_kernel_ab_table.py RUNS   (RUNS: runs.tgz extracted, its runs/ folder)

For nccl-tests (the script's NT_ARGS) and each version of the kit's kernel:
busbw (GB/s, out of place, nccl-tests' ``-a 1`` reading: each rank's mean
over iterations, then the mean over ranks) per size, the median over rounds
with the rounds' range, and the median's ratio to nccl-tests'.  (Session
20's first archive names its nccl-tests runs ``nt_D2_r*``.)
"""
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_devapi_table import one_run  # noqa: E402  (bench/ on the path)


def busbw(path):
    """{size: busbw GB/s} of the run's only algorithm (`gpu_devapi_table.one_run`)."""
    return {size: bw for size, (_, bw) in one_run(path, None).items()}


def main(runs):
    names = sorted({os.path.basename(p).rsplit("_r", 1)[0]
                    for p in glob.glob(os.path.join(runs, "kit_*_r*.nc"))})
    cols = {"nccl-tests": "nt_*r*.txt", **{n[4:]: f"{n}_r*.nc" for n in names}}
    figs = {}
    for col, pattern in cols.items():
        rounds = [busbw(p) for p in sorted(glob.glob(os.path.join(runs, pattern)))]
        figs[col] = {s: [r[s] for r in rounds] for s in rounds[0]}
    print("| size | " + " | ".join(figs) + " |")
    print("|---" * (len(figs) + 1) + "|")
    ref = figs["nccl-tests"]
    for s in sorted(ref):
        nt = statistics.median(ref[s])
        cells = [f"{statistics.median(v[s]):.1f} [{min(v[s]):.0f}-{max(v[s]):.0f}] "
                 f"({statistics.median(v[s]) / nt:.1%})" for v in figs.values()]
        print(f"| {s >> 20} MiB | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
