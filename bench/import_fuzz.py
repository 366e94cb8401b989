"""Fuzz every importer with 10,000 mutated inputs (issue 5's acceptance).

Runs tests/test_import_fuzz.py's six hypothesis tests with FUZZ_EXAMPLES
each (default 1667: 10,002 in all) on fresh random seeds and prints
hypothesis' statistics.  Zero uncaught exceptions means every test passes:
only ImporterError (or a valid Dataset) came out.

    .venv/bin/python bench/import_fuzz.py [EXAMPLES_PER_TEST]
"""
import collections
import os
import re
import subprocess
import tempfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    per_test = int(sys.argv[1]) if len(sys.argv) > 1 else 1667
    tally = tempfile.NamedTemporaryFile(prefix="fuzz-tally-", delete=False).name
    env = dict(os.environ, FUZZ_EXAMPLES=str(per_test), FUZZ_SEED="random", FUZZ_TALLY=tally)
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--hypothesis-show-statistics", "tests/test_import_fuzz.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    out = proc.stdout + proc.stderr
    counts = [tuple(map(int, m)) for m in re.findall(r"(\d+) passing, (\d+) failing", out)]
    with open(tally) as f:
        outcomes = collections.Counter(line.strip() for line in f)
    os.unlink(tally)
    if proc.returncode:                     # the failures, with their falsifying examples
        print(out[:out.find("Hypothesis Statistics")] if "Hypothesis Statistics" in out else out)
    print(f"# {len(counts)} tests, {sum(c[0] for c in counts)} passing and "
          f"{sum(c[1] for c in counts)} failing examples in the generate phase; "
          f"imports called {sum(outcomes.values())} times (shrinking included): "
          + ", ".join(f"{k} {v}" for k, v in outcomes.most_common())
          + f"; {wall:.0f} s; exit {proc.returncode}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
