"""What a small run costs before its first size, side by side: the ranks
with dask importable (`--before`) and without (this tree, `worker.without_dask`).

    .venv/bin/python bench/run_start_cost.py [--before eb7c9bb] [--rounds 5]

Checks out `--before` into a git-ignored folder (`one_launch.checkout`),
writes both trees' bytecode (as `make bytecode` does: with
PYTHONDONTWRITEBYTECODE set every rank would compile the kit again), then
runs, alternating, `--rounds` times:

    ccbench run all_reduce -r 2 -b 8 -e 64 -f 2 -n 2 -w 0 --non-interactive

and prints each run's wall time, the CPU time of the launcher and all it
started (their rusage), and the 1-minute load average before it; then the
medians and their ratios.
"""
import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _side_by_side import children_cpu
from one_launch import ROOT, alternating, checkout, tree_env

COMMAND = ["run", "all_reduce", "-r", "2", "-b", "8", "-e", "64", "-f", "2", "-n", "2", "-w", "0",
           "--non-interactive"]


def one_run(tree, out):
    env = tree_env(tree)
    load, cpu0, t0 = os.getloadavg()[0], children_cpu(), time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ccbench_kit", *COMMAND, "--out", out], env=env,
                       capture_output=True, text=True, timeout=600, cwd=tree)
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    if r.returncode != 0:
        raise SystemExit(f"{tree}: exit {r.returncode}: {r.stderr[-2000:]}")
    return wall, cpu, load


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="eb7c9bb")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    old = checkout(args.before, os.path.join(ROOT, "bench", "_trees", args.before))
    trees = {"before": old, "now": ROOT}
    for tree in trees.values():
        compileall.compile_dir(os.path.join(tree, "ccbench_kit"), quiet=1)
    got = {k: {"wall": [], "cpu": []} for k in trees}
    print(f"# {os.uname().nodename}, {os.cpu_count()} CPUs; ccbench {' '.join(COMMAND)}; "
          f"before = {args.before}")
    print(f"{'round':>5} {'tree':>7} {'wall s':>7} {'cpu s':>6} {'load':>5}")
    with tempfile.TemporaryDirectory() as d:
        for k, name in alternating(list(trees), args.rounds):
            wall, cpu, load = one_run(trees[name], os.path.join(d, f"{name}{k}.nc"))
            got[name]["wall"].append(wall)
            got[name]["cpu"].append(cpu)
            print(f"{k:>5} {name:>7} {wall:>7.2f} {cpu:>6.2f} {load:>5.2f}", flush=True)
    for what in ("wall", "cpu"):
        b, n = (statistics.median(got[t][what]) for t in trees)
        print(f"median {what}: before {b:.2f} s, now {n:.2f} s, before/now {b / n:.2f}x")


if __name__ == "__main__":
    main()
