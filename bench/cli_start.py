"""CPU of short `ccbench` commands at two commits, side by side.

Each commit's tree is checked out in a git-ignored folder
(`_side_by_side.checkout`; no engine is built: none of these commands loads
it), its kit compiled to bytecode, and put first on the path; the commits
take turns, round after round, the order turned each round.  What is
measured is the CPU (user + system) of the whole process: the imports
before the command does anything, which every command, rank and test pays.

    python bench/cli_start.py OLD NEW [--rounds 5]
"""
import compileall
import os
import statistics
import subprocess
import sys

from _side_by_side import ROOT, alternating, checkout, children_cpu, commit_pair

DATA = os.path.join(ROOT, "tests", "data", "schema", "v1_round1_groups.nc")
COMMANDS = {
    "run --bogus (exit 2)": ["run", "all_reduce", "--bogus"],
    "show FILE": ["show", DATA],
    "cluster status (exit 1)": ["cluster", "status", "--scheduler-file", "/nonexistent/s.json"],
}
ENTRY = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import ccbench_kit; "
         "assert ccbench_kit.__file__.startswith(sys.path[0]), ccbench_kit.__file__; "
         "from ccbench_kit.cli import console; sys.argv[0] = 'ccbench'; console()")


def tree_of(commit):
    """`commit`'s checkout, its kit compiled to bytecode."""
    sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", commit], check=True,
                         capture_output=True, text=True).stdout.strip()
    where = checkout(sha, build=False)
    compileall.compile_dir(os.path.join(where, "ccbench_kit"), quiet=1)
    return where


def cpu(argv):
    before = children_cpu()
    subprocess.run(argv, capture_output=True, timeout=120)
    return children_cpu() - before


def main():
    args = commit_pair(__doc__, rounds=5)
    trees = {c: tree_of(c) for c in (args.old, args.new)}
    got = {}
    print(f"load before: {os.getloadavg()[0]:.2f}")
    for _, c in alternating([args.old, args.new], args.rounds):
        for name, words in COMMANDS.items():
            got.setdefault((name, c), []).append(
                cpu([sys.executable, "-c", ENTRY, trees[c], *words]))
    print(f"load after: {os.getloadavg()[0]:.2f}")
    print(f"| command | {args.old} CPU s | {args.new} CPU s | new/old |")
    print("|---|---|---|---|")
    for name in COMMANDS:
        old, new = (statistics.median(got[(name, c)]) for c in (args.old, args.new))
        print(f"| `ccbench {name}` | {old:.3f} | {new:.3f} | {new / old:.2f} |")


if __name__ == "__main__":
    main()
