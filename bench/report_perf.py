"""How long a report takes for a big sweep (issue 6's performance target).

2 collectives × 6 algorithms × 30 sizes × 8 ranks × 100 iterations, drawn
from the α-β models (theory.synthetic), saved as one results file, then:

1. the whole `ccbench report` path (papermill + nbconvert), timed end to end;
2. the same steps in this process, timed one by one, to see where it goes.

    .venv/bin/python bench/report_perf.py [--reps 3] [--keep DIR]

Target: under 60 s end to end.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ALGORITHMS = {
    "all_reduce": ["ring", "recursive_doubling", "rabenseifner", "tree", "direct", "mpi"],
    "all_gather": ["ring", "recursive_doubling", "bruck", "direct", "nccl:pat", "mpi"],
}
SIZES = [8 << i for i in range(30)]      # 8 B .. 4 GiB
NRANKS, ITERS = 8, 100


def make_results(path):
    from ccbench_kit.dataset import save
    from ccbench_kit.theory.synthetic import synthetic_dataset
    parts = {}
    for i, (coll, algs) in enumerate(ALGORITHMS.items()):
        sizes = [s * NRANKS for s in SIZES] if coll == "all_gather" else SIZES
        parts[coll] = synthetic_dataset(coll, algs, sizes=sizes, nranks=NRANKS, iters=ITERS,
                                        alpha=4e-6, beta=1 / 12e9, gamma=1 / 60e9, noise=0.03,
                                        seed=i, straggler=5, warmup_iters=3)
    save(parts, path)
    return parts


def time_steps(path):
    """Seconds of each report step, in this process."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ccbench_kit.report import analysis, notebook as rn, plots
    out = {}
    t = time.perf_counter()
    ctx = rn.prepare([str(path)], theory="ib-ndr", stats=["avg", "p50", "p99"])
    out["load + check"] = time.perf_counter() - t
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, ds in ctx.parts.items():
            for label, fn in [
                ("fit", lambda: rn.fits_of(ctx, name)),
                ("busbw plot", lambda: plots.busbw_vs_size(ds, preset=ctx.presets[name],
                                                           fits=rn.fits_of(ctx, name))),
                ("winner plot", lambda: plots.winner_per_size(ds)),
                ("latency plot", lambda: plots.latency_percentiles(ds)),
                ("stragglers", lambda: [analysis.stragglers(ds, a) for a in ds["algorithm"].values]),
                ("heat map", lambda: plots.rank_heatmap(ds)),
                ("trace", lambda: plots.iteration_trace(ds)),
            ]:
                t = time.perf_counter()
                r = fn()
                if hasattr(r, "savefig"):
                    import io
                    r.savefig(io.BytesIO(), format="png", dpi=110, bbox_inches="tight")
                    plt.close(r)
                out[label] = out.get(label, 0.0) + time.perf_counter() - t
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", default=None, help="keep results and reports in this folder")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="ccb-report-perf-"))
    work.mkdir(parents=True, exist_ok=True)
    results = work / "big.nc"
    t = time.perf_counter()
    make_results(results)
    print(f"results: {results} ({os.path.getsize(results) / 1e6:.1f} MB, "
          f"{len(ALGORITHMS)} collectives × 6 algorithms × {len(SIZES)} sizes × {NRANKS} ranks "
          f"× {ITERS} iterations), written in {time.perf_counter() - t:.1f} s")

    from ccbench_kit.report.driver import render
    ends = []
    for i in range(args.reps):
        t = time.perf_counter()
        html = render([str(results)], work / f"big-{i}.html", theory="ib-ndr",
                      title="report_perf")
        ends.append(time.perf_counter() - t)
        print(f"ccbench report, run {i + 1}: {ends[-1]:.1f} s ({os.path.getsize(html) / 1e6:.1f} MB HTML)")
    print(f"end to end: median {statistics.median(ends):.1f} s, min {min(ends):.1f} s, "
          f"max {max(ends):.1f} s (target < 60 s)")
    steps = time_steps(results)
    print("in-process steps (both collectives):")
    for k, v in steps.items():
        print(f"  {k:<14} {v:6.2f} s")
    print(f"  {'sum':<14} {sum(steps.values()):6.2f} s")


if __name__ == "__main__":
    main()
