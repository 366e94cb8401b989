"""`make setup` in a fresh clone, two commits side by side: the wall time
and CPU of everything `make test` and `make demo` do before their first test
or run (the apt packages are already there on both sides).

    python bench/setup_time.py OLD NEW [--rounds N]

Each round clones each commit afresh into a temporary folder and runs its
`make setup` there, the order turned every round; the folder is removed
after.  Both sides find this machine's download caches as they are (pip's
and uv's, warm after the first round): what differs is the installing.
"""
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from _side_by_side import ROOT, alternating, children_cpu, commit_pair


def one_setup(commit):
    """(wall s, CPU s of the children, 1-min load before) of `make setup` in
    a fresh clone of `commit`."""
    where = tempfile.mkdtemp(prefix="ccb-setup-")
    try:
        subprocess.run(["git", "clone", "-q", ROOT, where], check=True)
        subprocess.run(["git", "-C", where, "checkout", "-q", "--detach", commit], check=True)
        load = os.getloadavg()[0]
        before = children_cpu()
        t0 = time.monotonic()
        subprocess.run(["make", "setup"], cwd=where, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        cpu = children_cpu() - before
        return wall, cpu, load
    finally:
        shutil.rmtree(where, ignore_errors=True)


def main():
    args = commit_pair(__doc__, rounds=2)
    seen = {args.old: [], args.new: []}
    for k, commit in alternating([args.old, args.new], args.rounds):
        wall, cpu, load = one_setup(commit)
        seen[commit].append(wall)
        print(f"round {k + 1} {commit}: make setup {wall:.0f} s wall, {cpu:.0f} s CPU "
              f"(load {load:.2f} before)", flush=True)
    old, new = (statistics.median(seen[c]) for c in (args.old, args.new))
    print(f"median: {args.old} {old:.0f} s, {args.new} {new:.0f} s; new/old {new / old:.2f}")


if __name__ == "__main__":
    main()
