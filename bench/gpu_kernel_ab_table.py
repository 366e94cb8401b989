"""The table of `bench/gpu_kernel_ab.sh`'s runs, from its archive.

    python bench/gpu_kernel_ab_table.py RUNS   (RUNS: runs.tgz extracted, its runs/ folder)

For nccl-tests (the script's NT_ARGS) and each version of the kit's kernel,
per size: from 1 MiB busbw (GB/s, out of place, nccl-tests' ``-a 1``
reading: each rank's mean over iterations, then the mean over ranks), the
median over rounds with the rounds' range, and the median's ratio to
nccl-tests'; below 1 MiB the time (µs, same reading) and its difference
from nccl-tests'.  (Session
20's first archive names its nccl-tests runs ``nt_D2_r*``.)
"""
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_devapi_table import one_run  # noqa: E402  (bench/ on the path)


MIB = 1 << 20


def figure(path):
    """{size: busbw GB/s from 1 MiB, µs below} of the run's only algorithm
    (`gpu_devapi_table.one_run`)."""
    return {size: bw if size >= MIB else t for size, (t, bw) in one_run(path, None).items()}


def label(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def main(runs):
    names = sorted({os.path.basename(p).rsplit("_r", 1)[0]
                    for p in glob.glob(os.path.join(runs, "kit_*_r*.nc"))})
    cols = {"nccl-tests": "nt_*r*.txt", **{n[4:]: f"{n}_r*.nc" for n in names}}
    figs = {}
    for col, pattern in cols.items():
        rounds = [figure(p) for p in sorted(glob.glob(os.path.join(runs, pattern)))]
        figs[col] = {s: [r[s] for r in rounds] for s in rounds[0]}
    print("| size | " + " | ".join(figs) + " |")
    print("|---" * (len(figs) + 1) + "|")
    ref = figs["nccl-tests"]
    for s in sorted(ref):
        nt = statistics.median(ref[s])
        if s >= MIB:
            cells = [f"{statistics.median(v[s]):.1f} [{min(v[s]):.0f}-{max(v[s]):.0f}] "
                     f"({statistics.median(v[s]) / nt:.1%})" for v in figs.values()]
        else:
            cells = [f"{statistics.median(v[s]):.2f} µs [{min(v[s]):.2f}-{max(v[s]):.2f}] "
                     f"({statistics.median(v[s]) - nt:+.2f})" for v in figs.values()]
        print(f"| {label(s)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
