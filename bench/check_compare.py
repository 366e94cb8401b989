"""``--check``'s comparison (`checks.count_wrong`) of one large output, this
tree's against a git revision's, side by side, alternating.

    python bench/check_compare.py REV [--elems N] [--dtype bf16] [--rounds 5]

REV's ``ccbench_kit/checks.py`` is loaded from git (``git show``), so the two
run the same inputs in one process.  Prints each round's seconds and the
median ratio (REV / this tree), with the load average beside each round.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ccbench_kit import checks, collectives  # noqa: E402
from ccbench_kit.dtypes import get_dtype  # noqa: E402


def module_at(rev):
    text = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:ccbench_kit/checks.py"],
                          capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader("ccbench_kit._checks_at_rev", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "ccbench_kit"   # its relative imports resolve in this tree
    exec(compile(text, f"{rev}:ccbench_kit/checks.py", "exec"), mod.__dict__)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rev")
    ap.add_argument("--elems", type=int, default=1 << 27)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    old, dt = module_at(a.rev), get_dtype(a.dtype)
    inputs = [checks.make_input(dt, a.elems, r, "random", 1) for r in range(2)]
    golden, scale = checks.expected(collectives.get("all_reduce"), inputs, 0, 2, "sum", 0, dt)
    out = dt.from_float(golden)
    del inputs
    ratios = []
    for k in range(a.rounds):
        times = {}
        for name, mod in ((a.rev, old), ("tree", checks)):
            t = time.perf_counter()
            wrong = mod.count_wrong(out, golden, dt, "sum", 2, scale)
            times[name] = time.perf_counter() - t
            assert wrong == 0, (name, wrong)
        ratios.append(times[a.rev] / times["tree"])
        print(f"round {k + 1}: {a.rev} {times[a.rev]:.2f} s, tree {times['tree']:.2f} s, "
              f"ratio {ratios[-1]:.2f}; load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"{a.elems} {a.dtype} elements: median ratio {np.median(ratios):.2f}")


if __name__ == "__main__":
    main()
