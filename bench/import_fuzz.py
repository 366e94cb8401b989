"""Fuzz every importer with 10,000 mutated inputs (issue 5's acceptance).

Runs tests/test_import_fuzz.py's six hypothesis tests with FUZZ_EXAMPLES
each (default 1667: 10,002 in all) on fresh random seeds and prints
hypothesis' statistics.  Zero uncaught exceptions means every test passes:
only ImporterError (or a valid Dataset) came out.

    .venv/bin/python bench/import_fuzz.py [EXAMPLES_PER_TEST]
"""
import sys

from _fuzz_runner import run


def main():
    per_test = int(sys.argv[1]) if len(sys.argv) > 1 else 1667
    rc, out, outcomes, counts, wall = run("tests/test_import_fuzz.py", per_test)
    print(f"# {len(counts)} tests, {sum(c[0] for c in counts)} passing and "
          f"{sum(c[1] for c in counts)} failing examples in the generate phase; "
          f"imports called {sum(outcomes.values())} times (shrinking included): "
          + ", ".join(f"{k} {v}" for k, v in outcomes.most_common())
          + f"; {wall:.0f} s; exit {rc}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
