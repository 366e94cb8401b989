"""The table of `bench/gpu_r2_parity.sh`'s runs.

    python bench/gpu_r2_parity_table.py RUNS   (RUNS: runs.tgz extracted, its runs/ folder)

busbw (GB/s, out of place, nccl-tests' ``-a 1`` reading) per size: the
median over rounds [range] of nccl-tests `-R 2` with -e 1G and -e 64M and of
the kit's NCCL `-R 2` (alone, -e 1G and -e 64M; beside its own kernels),
each as a ratio to nccl-tests' -e 1G; then the symmetric kernel NCCL ran
per size in nccl-tests (its TUNING log) and in the kit (`nccl_ran`).  Runs
of MODE=unique: nccl-tests `-R 2` and `-R 2 -D 2` beside the kit's nccl and
lsa-vec without and with --unique-buff, each as a ratio to the nccl-tests
run of the same kernel.
"""
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gpu_devapi_table import one_run  # noqa: E402  (bench/ on the path)
from gpu_alg_axis_table import label  # noqa: E402
from ccbench_kit.backends import nccl_tuning  # noqa: E402

UNIQUE = (("nt -R 2", "nt_R2", None, "nt -R 2"),
          ("kit nccl", "kit_warm", "nccl", "nt -R 2"),
          ("kit nccl --unique-buff", "kit_unique", "nccl", "nt -R 2"),
          ("nt -R 2 -D 2", "nt_D2", None, "nt -R 2 -D 2"),
          ("kit lsa-vec", "kit_warm", "lsa-vec", "nt -R 2 -D 2"),
          ("kit lsa-vec --unique-buff", "kit_unique", "lsa-vec", "nt -R 2 -D 2"))
COLUMNS = (("nt -e 1G", "nt_1G", None), ("nt -e 64M", "nt_64M", None),
           ("kit -e 1G", "kit_1G", "nccl"), ("kit -e 64M", "kit_64M", "nccl"),
           ("kit beside own", "kit_six", "nccl"))


def medians(runs, stem, algorithm):
    suffix = ".nc" if stem.startswith("kit") else ".txt"
    rounds = [one_run(p, algorithm) for p in sorted(glob.glob(os.path.join(runs, f"{stem}_r*{suffix}")))]
    return {s: [r[s][1] for r in rounds] for s in rounds[0]} if rounds else {}


def unique_table(runs):
    figs = {name: medians(runs, stem, alg) for name, stem, alg, _ in UNIQUE}
    refs = {name: ref for name, _, _, ref in UNIQUE}
    print("| size | " + " | ".join(figs) + " |")
    print("|---" * (len(figs) + 1) + "|")
    for s in sorted(figs["nt -R 2"]):
        cells = []
        for name, v in figs.items():
            m, r = statistics.median(v[s]), statistics.median(figs[refs[name]][s])
            cells.append(f"{m:.1f} [{min(v[s]):.0f}-{max(v[s]):.0f}] ({m / r:.1%})")
        print(f"| {label(s)} | " + " | ".join(cells) + " |")


def main(runs):
    if glob.glob(os.path.join(runs, "nt_R2_r*.txt")):
        return unique_table(runs)
    figs = {name: medians(runs, stem, alg) for name, stem, alg in COLUMNS}
    ref = figs["nt -e 1G"]
    print("| size | " + " | ".join(figs) + " |")
    print("|---" * (len(figs) + 1) + "|")
    for s in sorted(figs["kit -e 64M"]):
        nt = statistics.median(ref[s])
        cells = []
        for v in figs.values():
            if s not in v:
                cells.append("-")
                continue
            m = statistics.median(v[s])
            cells.append(f"{m:.1f} [{min(v[s]):.0f}-{max(v[s]):.0f}] ({m / nt:.1%})")
        print(f"| {label(s)} | " + " | ".join(cells) + " |")
    with open(os.path.join(runs, "nt_tuning.txt")) as f:
        nt_ran = {}
        for d in nccl_tuning.parse(f.read()):
            nt_ran.setdefault(d["bytes"], nccl_tuning.summarize([d]))
    import xarray as xr
    kit_ran = json.loads(xr.open_dataset(sorted(glob.glob(os.path.join(runs, "kit_1G_r*.nc")))[0])
                         .attrs["nccl_ran"])["nccl"]
    print("\n| size | nccl-tests ran | the kit ran |\n|---|---|---|")
    for s in sorted(set(nt_ran) | {int(k) for k in kit_ran}):
        print(f"| {label(s)} | {nt_ran.get(s, '-')} | {kit_ran.get(str(s), '-')} |")


if __name__ == "__main__":
    main(sys.argv[1])
