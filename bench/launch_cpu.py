"""The CPU of one short ``ccbench run`` at two commits, side by side.

    .venv/bin/python bench/launch_cpu.py OLD NEW [--rounds 10]

Each commit's tree is checked out in a git-ignored folder with its engine
built (`_side_by_side.checkout`; the current tree for ``HEAD``), and the
same small run is launched from each in turn, the order turned each round:

    python -m ccbench_kit run all_reduce -r 3 -b 1K -e 4K -f 4 -n 5 -w 1 --out F

What is measured is the CPU (user + system) of the whole process tree (the
``ccbench`` launcher, mpirun and the three ranks): start-up and the results
file, which every launch pays, and the suite a hundred times.  The
environment leaves the BLAS thread variables unset, as a user's shell
does.  Prints each round with the 1-minute load average before it, then the
medians and their ratio.
"""
import os
import statistics
import subprocess
import sys
import tempfile

from _side_by_side import ROOT, alternating, checkout, children_cpu, commit_pair

COMMAND = ["run", "all_reduce", "-r", "3", "-b", "1K", "-e", "4K", "-f", "4", "-n", "5",
           "-w", "1"]


def tree_of(commit):
    if commit == "HEAD":
        return ROOT
    sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", commit], check=True,
                         capture_output=True, text=True).stdout.strip()
    return checkout(sha)


def one_run(tree, out):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update(PYTHONPATH=tree, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    before = children_cpu()
    r = subprocess.run([sys.executable, "-m", "ccbench_kit", *COMMAND, "--out", out], env=env,
                       capture_output=True, text=True, timeout=300, cwd=tree)
    if r.returncode != 0:
        raise SystemExit(f"{tree}: exit {r.returncode}: {r.stderr[-2000:]}")
    return children_cpu() - before


def main():
    args = commit_pair(__doc__, rounds=10)
    trees = {c: tree_of(c) for c in (args.old, args.new)}
    got = {c: [] for c in trees}
    print(f"# {os.uname().nodename}, {os.cpu_count()} CPUs: ccbench {' '.join(COMMAND)}")
    print(f"{'round':>5} {'commit':>8} {'CPU s':>7} {'load':>6}")
    with tempfile.TemporaryDirectory() as d:
        for k, c in alternating(list(trees), args.rounds):
            load = os.getloadavg()[0]
            got[c].append(one_run(trees[c], os.path.join(d, f"{k}-{len(got[c])}.nc")))
            print(f"{k:>5} {c:>8} {got[c][-1]:>7.2f} {load:>6.2f}", flush=True)
    old, new = (statistics.median(got[c]) for c in (args.old, args.new))
    print(f"median CPU of a launch: {args.old} {old:.2f} s, {args.new} {new:.2f} s, "
          f"new/old {new / old:.2f}")


if __name__ == "__main__":
    main()
