"""One launch per invocation against one launch per part, side by side.

    .venv/bin/python bench/one_launch.py [--before e296f9d] [--rounds 5] [--ranks 5]

Checks out `--before` (the last commit that started one mpirun per part)
into a git-ignored folder, builds its engine, then runs the same command
with each tree in turn, alternating, `--rounds` times:

    ccbench run <the 12 collectives> -r RANKS --sizes 1K -n 5 -w 2 --non-interactive

and prints each round's wall time with the 1-minute load average before it,
the medians and their ratio.  It also counts the mpirun launches of
``ccbench run all_reduce -d all -o all`` in the current tree (``--debug``
prints one ``# debug: launch:`` line per launch).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _side_by_side import ROOT, alternating, checkout

COLLECTIVES = ("all_reduce,all_gather,reduce_scatter,alltoall,alltoallv,sendrecv,permute,"
               "broadcast,reduce,gather,scatter,hypercube")


def tree_env(tree):
    """The environment that runs `tree`'s kit (launcher and ranks) as root."""
    return dict(os.environ, PYTHONPATH=tree, OMPI_ALLOW_RUN_AS_ROOT="1",
                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def one_run(tree, ranks, out):
    env = tree_env(tree)
    cmd = [sys.executable, "-m", "ccbench_kit", "run", COLLECTIVES, "-r", str(ranks),
           "--sizes", "1K", "-n", "5", "-w", "2", "--non-interactive", "--out", out]
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, cwd=tree)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"{tree}: exit {r.returncode}: {r.stderr[-2000:]}")
    return wall, load


def launches_of_dtype_op_all(tree):
    env = tree_env(tree)
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, "-m", "ccbench_kit", "run", "all_reduce", "-r", "2",
                            "-d", "all", "-o", "all", "--sizes", "64", "-n", "2", "-w", "1",
                            "--debug", "--out", os.path.join(d, "r.nc")],
                           env=env, capture_output=True, text=True, timeout=1200, cwd=tree)
    parts = r.stdout.count("# ccbench all_reduce")
    return r.stderr.count("# debug: launch:"), parts, r.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="e296f9d")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=5)
    args = ap.parse_args()
    old = checkout(args.before)
    trees = {"before": old, "now": ROOT}
    walls = {k: [] for k in trees}
    print(f"# {os.uname().nodename}, {os.cpu_count()} CPUs; {args.ranks} ranks, 12 collectives, "
          f"1 KiB; before = {args.before}")
    print(f"{'round':>5} {'tree':>7} {'wall s':>8} {'load':>6}")
    with tempfile.TemporaryDirectory() as d:
        for k, name in alternating(list(trees), args.rounds):
            wall, load = one_run(trees[name], args.ranks, os.path.join(d, f"{name}{k}.nc"))
            walls[name].append(wall)
            print(f"{k:>5} {name:>7} {wall:>8.1f} {load:>6.2f}", flush=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(f"median wall: before {med['before']:.1f} s, now {med['now']:.1f} s, "
          f"before/now {med['before'] / med['now']:.2f}x")
    launches, parts, rc = launches_of_dtype_op_all(ROOT)
    print(f"ccbench run all_reduce -d all -o all (now): {launches} launch(es) for {parts} parts, "
          f"exit {rc}")


if __name__ == "__main__":
    main()
