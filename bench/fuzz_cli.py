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
import sys

from _fuzz_runner import run


def main():
    per_test = int(sys.argv[1]) if len(sys.argv) > 1 else 2500
    rc, out, statuses, counts, wall = run("tests/test_fuzz_cli.py", per_test)
    print(f"# {len(counts)} tests, {sum(c[0] for c in counts)} passing and "
          f"{sum(c[1] for c in counts)} failing examples in the generate phase; "
          f"CLI exit statuses (the suite YAML test calls the loader, not the CLI): "
          + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))
          + f"; tracebacks: {out.count('Traceback (most recent call last)')}"
          + f"; {wall:.0f} s; exit {rc}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
