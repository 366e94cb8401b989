"""The CPU of one `ccbench report` of a small run, two commits side by side.

    .venv/bin/python bench/report_kernel.py [--before 4b5f558] [--rounds 5] [RESULTS.nc]

Checks out `--before` into a git-ignored folder (bench/_trees/; a report
needs no engine, so none is built), then renders the same results file
(default: the real 3-rank run under tests/data/history/) with each tree in
turn, alternating, `--rounds` times, and prints for each render the CPU
seconds (user+sys) of the whole process tree (the ``ccbench report``
process, its kernel, nbconvert) with the 1-minute load average before it,
then the medians and their ratio.  CPU, not wall time: on 2 shared cores
the suite and its users pay in CPU.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from _side_by_side import ROOT, alternating, checkout, children_cpu

DEFAULT_RESULTS = os.path.join(ROOT, "tests", "data", "history", "base-allreduce-3r.nc")


def one_report(tree, results, out):
    """(CPU seconds of the whole `ccbench report` tree, load average before)."""
    env = dict(os.environ, PYTHONPATH=tree)
    load = os.getloadavg()[0]
    before = children_cpu()
    r = subprocess.run([sys.executable, "-m", "ccbench_kit", "report", results, "-o", out],
                       env=env, capture_output=True, text=True, timeout=600, cwd=tree)
    if r.returncode != 0:
        raise SystemExit(f"{tree}: exit {r.returncode}: {r.stderr[-2000:]}")
    return children_cpu() - before, load


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="?", default=DEFAULT_RESULTS)
    ap.add_argument("--before", default="4b5f558")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    trees = {"before": checkout(args.before, build=False), "after": ROOT}
    cpu = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for k, name in alternating(list(trees), args.rounds):
            seconds, load = one_report(trees[name], os.path.abspath(args.results),
                                       os.path.join(tmp, f"{name}.html"))
            cpu[name].append(seconds)
            print(f"round {k + 1} {name:6s} {seconds:6.2f} s CPU  (load {load:.2f})", flush=True)
    med = {name: statistics.median(v) for name, v in cpu.items()}
    print(f"median CPU: before ({args.before}) {med['before']:.2f} s, after {med['after']:.2f} s, "
          f"after/before {med['after'] / med['before']:.2f}")


if __name__ == "__main__":
    main()
