"""Two commits measured side by side (bench/one_launch.py, bench/report_kernel.py,
bench/setup_time.py, bench/cli_start.py): an older commit's tree in a
git-ignored folder, the order in which the trees take turns, and the CPU
their processes used."""
import argparse
import os
import resource
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def commit_pair(doc, rounds):
    """The arguments of a script that measures two commits: OLD, NEW and
    ``--rounds`` (default `rounds`); `doc`'s first line describes it."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=rounds)
    return ap.parse_args()


def checkout(commit, build=True):
    """`commit`'s tree in bench/_trees/COMMIT (a git worktree), with its
    engine built in place (the venv's Python) unless not `build` (a report
    needs no engine)."""
    where = os.path.join(ROOT, "bench", "_trees", commit)
    if not os.path.isdir(where):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", where, commit],
                       check=True, capture_output=True)
        if build:
            subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace", "-j", "2"],
                           cwd=where, check=True, capture_output=True)
    return where


def children_cpu():
    """CPU seconds (user + system) of every child this process has waited
    for so far: the difference across a `subprocess.run` is that command's
    whole process tree."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def alternating(names, rounds):
    """(round, name) for `rounds` rounds of every name, the order turned each
    round, so that neither side always runs first."""
    for k in range(rounds):
        for name in (names if k % 2 == 0 else names[::-1]):
            yield k, name
