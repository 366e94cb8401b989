"""What MPI's thread level alone costs a call: a plain C loop, no Python.

    python bench/thread_level.py [--rounds 10] [--iters 1000] [--min 8] [--max 1048576]

Builds ``bench/thread_level.c`` with ``mpicc`` in a temporary folder and, in
each round, runs it on 2 ranks (the kit's launcher command and environment,
`ccbench_kit.launch.mpirun`) at each thread level in a turning order, plus
IMB-MPI1 Allreduce where ``python bench/imb_compare.py build`` made one.
Each run times MPI_Allreduce (fp32 sum) as IMB does: the call alone, then an
untimed barrier; buffers malloc'd once at the largest size.  Prints, per
size, the median over rounds of each and, against ``single`` (what
``MPI_Init`` gives), the paired ratio with its 95 % bootstrap interval.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from imb_compare import IMB, loadavg, mpirun_stdout, paired_ratio, run_imb  # noqa: E402

LEVELS = ("single", "funneled", "multiple")


def build(tmp):
    exe = os.path.join(tmp, "thread_level")
    subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(HERE, "thread_level.c")], check=True)
    return exe


def run_level(exe, level, lo, hi, iters):
    out = mpirun_stdout(2, [exe, level, str(lo), str(hi), str(iters)])
    return {int(s): float(t) for s, t in (line.split() for line in out.splitlines())}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--min", type=int, default=8)
    p.add_argument("--max", type=int, default=1 << 20)
    args = p.parse_args()
    lo_log, hi_log = args.min.bit_length() - 1, args.max.bit_length() - 1
    names = list(LEVELS) + (["imb"] if os.path.exists(IMB) else [])
    runs, loads = {n: [] for n in names}, []
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(tmp)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                loads.append(float(loadavg().split()[0]))
                if name == "imb":
                    runs[name].append(run_imb(IMB, 2, args.iters, (lo_log, hi_log)))
                else:
                    runs[name].append(run_level(exe, name, 1 << lo_log, 1 << hi_log, args.iters))
    sizes = sorted(runs["single"][0])
    print(f"# {args.rounds} rounds, {args.iters} iterations, 2 ranks; load average (1 min) "
          f"before the runs: {min(loads)}-{max(loads)}\n")
    print("| size (B) |" + "".join(f" {n} (us) |" for n in names)
          + "".join(f" {n} / single | 95 % interval |" for n in names[1:]))
    print("|---:|" + "---:|" * len(names) + "---:|---:|" * (len(names) - 1))
    for s in sizes:
        cells = "".join(f" {statistics.median(run[s] for run in runs[n]):.2f} |" for n in names)
        single = [run[s] for run in runs["single"]]
        for n in names[1:]:
            mid, lo, hi = paired_ratio(single, [run[s] for run in runs[n]])
            cells += f" {mid:.3f} | {lo:.3f}–{hi:.3f} |"
        print(f"| {s} |{cells}")


if __name__ == "__main__":
    main()
