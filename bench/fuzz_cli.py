"""Generated bad input for the whole CLI: 10,000 examples (issue 17's acceptance).

Runs tests/test_fuzz_cli.py's four hypothesis tests (``run`` argument
vectors with JSON inputs, the other subcommands over garbage files, FIFOs
and device nodes, suite YAML with alias bombs and deep nesting, nccl-tests
logs with any number in the time column) with FUZZ_EXAMPLES each (default
2500: 10,000 in all) on fresh random seeds.  Every example must end in
exit 0, or one line on stderr and a documented status, never a traceback;
a failing example fails its test and is printed.

    .venv/bin/python bench/fuzz_cli.py [EXAMPLES_PER_TEST]
"""
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    per_test = int(sys.argv[1]) if len(sys.argv) > 1 else 2500
    tally = tempfile.NamedTemporaryFile(prefix="fuzz-cli-tally-", delete=False).name
    env = dict(os.environ, FUZZ_EXAMPLES=str(per_test), FUZZ_SEED="random", FUZZ_TALLY=tally)
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--hypothesis-show-statistics", "tests/test_fuzz_cli.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    out = proc.stdout + proc.stderr
    counts = [tuple(map(int, m)) for m in re.findall(r"(\d+) passing, (\d+) failing", out)]
    with open(tally) as f:
        statuses = collections.Counter(line.strip() for line in f)
    os.unlink(tally)
    if proc.returncode:
        print(out[:out.find("Hypothesis Statistics")] if "Hypothesis Statistics" in out else out)
    print(f"# {len(counts)} tests, {sum(c[0] for c in counts)} passing and "
          f"{sum(c[1] for c in counts)} failing examples in the generate phase; "
          f"CLI exit statuses (suite YAML examples call the loader, not the CLI): "
          + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))
          + f"; tracebacks: {out.count('Traceback (most recent call last)')}"
          + f"; {wall:.0f} s; exit {proc.returncode}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
