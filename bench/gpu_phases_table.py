"""The phase breakdown (`report.analysis.phase_breakdown`) of results files,
a line per own kernel and size: bench/gpu_phases.sh and
gpu_phases_timing.sh print it into their summaries.
Usage: python bench/gpu_phases_table.py RESULTS.nc [...]"""
import sys

from ccbench_kit.backends import phases_of
from ccbench_kit.dataset import load
from ccbench_kit.report.analysis import phase_breakdown

for path in sys.argv[1:]:
    ds = load(path)
    for r in phase_breakdown(ds, phases_of(ds)):
        print(f"{r['algorithm']:8s} {r['size']:>10d} B  whole {r['whole']:6.2f}  launch "
              f"{r['launch']:6.2f}  barrier {r['barrier']:6.2f}  data {r['data']:6.2f} us")
