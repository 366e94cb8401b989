"""CPU of short `ccbench` commands at two commits, side by side.

Each commit's ``ccbench_kit/`` is exported (git archive) beside this
checkout's compiled modules, compiled to bytecode, and put first on the
path; the commands then take turns, commit after commit, round after round.
What is measured is the CPU (user + system) of the whole process: the
imports before the command does anything, which every command, rank and
test pays.

    python bench/cli_start.py OLD NEW [--rounds 5]
"""
import argparse
import compileall
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "schema", "v1_round1_groups.nc")
COMMANDS = {
    "run --bogus (exit 2)": ["run", "all_reduce", "--bogus"],
    "show FILE": ["show", DATA],
    "cluster status (exit 1)": ["cluster", "status", "--scheduler-file", "/nonexistent/s.json"],
}
ENTRY = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import ccbench_kit; "
         "assert ccbench_kit.__file__.startswith(sys.path[0]), ccbench_kit.__file__; "
         "from ccbench_kit.cli import console; sys.argv[0] = 'ccbench'; console()")


def export(commit, where):
    os.makedirs(where)
    archive = subprocess.run(["git", "-C", ROOT, "archive", commit, "ccbench_kit"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", where], input=archive, check=True)
    for so in glob.glob(os.path.join(ROOT, "ccbench_kit", "*.so")):
        shutil.copy(so, os.path.join(where, "ccbench_kit"))
    compileall.compile_dir(os.path.join(where, "ccbench_kit"), quiet=1)


def cpu(argv):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, capture_output=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {c: os.path.join(tmp, c) for c in (args.old, args.new)}
        for c, where in trees.items():
            export(c, where)
        got = {}
        print(f"load before: {os.getloadavg()[0]:.2f}")
        for _ in range(args.rounds):
            for c, where in trees.items():
                for name, words in COMMANDS.items():
                    got.setdefault((name, c), []).append(
                        cpu([sys.executable, "-c", ENTRY, where, *words]))
        print(f"load after: {os.getloadavg()[0]:.2f}")
        print(f"| command | {args.old} CPU s | {args.new} CPU s | new/old |")
        print("|---|---|---|---|")
        for name in COMMANDS:
            old, new = (statistics.median(got[(name, c)]) for c in (args.old, args.new))
            print(f"| `ccbench {name}` | {old:.3f} | {new:.3f} | {new / old:.2f} |")


if __name__ == "__main__":
    main()
