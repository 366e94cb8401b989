"""Fuzz the size/unit parser and the sweep builder with 10,000 examples each.

    .venv/bin/python bench/fuzz_sizes.py [--examples 10000]

Every input must give a size or a ConfigError naming the flag; any other
exception is a bug and fails the run (non-zero exit).
"""
import argparse
import sys
import time

from hypothesis import HealthCheck, given, settings, strategies as st

from ccbench_kit.errors import ConfigError
from ccbench_kit.units import parse_size, sweep

SIZE_TEXT = st.one_of(
    st.text(max_size=16),
    st.from_regex(r"\s*-?\d{0,12}(\.\d{0,4})?\s*[kKmMgGtTxX]?[iI]?[bB]?\s*", fullmatch=True),
)


def run(examples):
    cfg = settings(max_examples=examples, deadline=None, database=None,
                   suppress_health_check=list(HealthCheck))

    @cfg
    @given(SIZE_TEXT)
    def parse(text):
        try:
            v = parse_size(text, "-b/--minbytes")
        except ConfigError as e:
            assert str(e).startswith("-b/--minbytes: "), e
        else:
            assert isinstance(v, int) and v >= 0

    @cfg
    @given(SIZE_TEXT, SIZE_TEXT, st.one_of(st.none(), st.text(max_size=6),
                                          st.floats(allow_nan=True, allow_infinity=True)))
    def sweeps(lo, hi, factor):
        try:
            sizes = sweep(lo, hi, stepfactor=factor)
        except ConfigError:
            return
        assert sizes == sorted(sizes) and all(isinstance(s, int) for s in sizes)

    for name, test in (("parse_size", parse), ("sweep", sweeps)):
        t0 = time.perf_counter()
        test()
        print(f"{name}: {examples} examples, no uncaught exception ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--examples", type=int, default=10000)
    sys.exit(run(ap.parse_args().examples))
