"""Run a file of hypothesis tests with many examples on fresh random seeds
(shared by bench/import_fuzz.py and bench/fuzz_cli.py).

The tests read FUZZ_EXAMPLES (examples per test), FUZZ_SEED (present: random
seeds) and FUZZ_TALLY (a file each example appends its outcome to)."""
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(test_file, per_test, extra_env=None, by_test=False):
    """(pytest's exit status, its output, Counter of tallied outcomes,
    [(passing, failing)] per test, seconds).

    `test_file`: one path or node id, or a list of them; with `by_test` the
    outcomes are counted per (test name, outcome)."""
    tally = tempfile.NamedTemporaryFile(prefix="fuzz-tally-", delete=False).name
    env = dict(os.environ, FUZZ_EXAMPLES=str(per_test), FUZZ_SEED="random", FUZZ_TALLY=tally,
               **(extra_env or {}))
    t0 = time.time()
    tests = [test_file] if isinstance(test_file, str) else list(test_file)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--hypothesis-show-statistics", *tests],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    out = proc.stdout + proc.stderr
    counts = [tuple(map(int, m)) for m in re.findall(r"(\d+) passing, (\d+) failing", out)]
    with open(tally) as f:
        # a line is "TEST OUTCOME" (or OUTCOME alone, from an older test file)
        lines = [line.split() for line in f if line.strip()]
    outcomes = collections.Counter((ln[0], ln[-1]) if by_test else ln[-1] for ln in lines)
    os.unlink(tally)
    if proc.returncode:                     # the failures, with their falsifying examples
        print(out[:out.find("Hypothesis Statistics")] if "Hypothesis Statistics" in out else out)
    return proc.returncode, out, outcomes, counts, wall
