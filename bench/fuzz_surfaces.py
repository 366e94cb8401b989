"""Generated hostile input per surface (issue 28): doctor, suite, export,
import, report, compare, show, recover -- the eight hypothesis tests of
tests/test_fuzz_surfaces.py with FUZZ_EXAMPLES each (default 1250: 10^4 in
all) on fresh random seeds.  Every example must end in exit 0, or one line
on stderr and a documented status, never a traceback.

    .venv/bin/python bench/fuzz_surfaces.py [EXAMPLES_PER_TEST]
"""
import sys

from _fuzz_runner import run


def main():
    per_test = int(sys.argv[1]) if len(sys.argv) > 1 else 1250
    print("load average before:", open("/proc/loadavg").read().split()[:3])
    rc, out, statuses, counts, wall = run("tests/test_fuzz_surfaces.py", per_test)
    print(f"# {len(counts)} tests, {sum(c[0] for c in counts)} passing and "
          f"{sum(c[1] for c in counts)} failing examples in the generate phase; "
          f"CLI exit statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))
          + f"; tracebacks: {out.count('Traceback (most recent call last)')}"
          + f"; {wall:.0f} s; exit {rc}")
    print("load average after:", open("/proc/loadavg").read().split()[:3])
    return rc


if __name__ == "__main__":
    sys.exit(main())
