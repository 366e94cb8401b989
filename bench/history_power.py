"""Power and false alarms of the history's change detection
(ccbench_kit/history/changepoints.py), on synthetic nightly series.

A series is `before` runs at one level and `after` runs at a level
`step` noise units higher (log values, so a step is relative; the noise is
lognormal night to night).  "called" means `detect` reports a change
within one run of the true one; false alarms are the series (no step, one
outlier night x1.5, or noise that grows 1 % -> 5 %) where it reports any.
Pure numpy, seeded, a minute on one core:

    PYTHONPATH=. .venv/bin/python bench/history_power.py [DRAWS]
"""
import sys

import numpy as np

from ccbench_kit.history import changepoints as C

STEPS = (2, 3, 4, 5, 6, 8, 16)       # noise units
NOISES = (0.003, 0.01, 0.03)         # relative night-to-night noise
BEFORE = (8, 30)
AFTER = (1, 2, 3, 4, 6)
NULL_LENGTHS = (8, 11, 14, 20, 30, 60, 120)


def called(values, at):
    return any(abs(ch.index - at) <= 1 for ch in C.detect(values).changes)


def power(rng, draws):
    print("| noise | runs before | step (noise units) | " +
          " | ".join(f"{a} after" for a in AFTER) + " |")
    print("|---|---|---|" + "---|" * len(AFTER))
    for noise in NOISES:
        for before in BEFORE:
            for step in STEPS:
                rates = []
                for after in AFTER:
                    hits = 0
                    for _ in range(draws):
                        y = rng.normal(0.0, noise, before + after)
                        y[before:] += step * noise
                        hits += called(np.exp(y), before)
                    rates.append(hits / draws)
                print(f"| {noise:.1%} | {before} | {step} | " +
                      " | ".join(f"{r:.2f}" for r in rates) + " |")


def false_alarms(rng, draws):
    print("\n| runs | no step | one outlier night x1.5 | noise 1 % -> 5 % from the middle |")
    print("|---|---|---|---|")
    for n in NULL_LENGTHS:
        plain = outlier = noisier = 0
        for _ in range(draws):
            y = rng.normal(0.0, 0.01, n)
            plain += bool(C.detect(np.exp(y)).changes)
            z = y.copy()
            z[n // 2] += np.log(1.5)
            outlier += bool(C.detect(np.exp(z)).changes)
            w = y.copy()
            w[n // 2:] *= 5
            noisier += bool(C.detect(np.exp(w)).changes)
        print(f"| {n} | {plain / draws:.3f} | {outlier / draws:.3f} | {noisier / draws:.3f} |")


def main():
    draws = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    rng = np.random.default_rng(2026)
    print(f"# {draws} draws a cell; CLEAN_MARGIN {C.CLEAN_MARGIN}, P_VALUE {C.P_VALUE}, "
          f"MIN_SEGMENT {C.MIN_SEGMENT}, MIN_RUNS {C.MIN_RUNS}")
    power(rng, draws)
    false_alarms(rng, 5 * draws)
    # the case: 8 nights, then 6 nights 1.3x slower, 0.8 % noise
    hits = sum(called(1 / np.exp(np.r_[rng.normal(0, 0.008, 8),
                                       np.log(1.3) + rng.normal(0, 0.008, 6)]), 8)
               for _ in range(draws))
    print(f"\n8 nights then 6 nights 1.3x slower (busbw 23 % lower), 0.8 % noise: "
          f"called {hits}/{draws}")


if __name__ == "__main__":
    main()
