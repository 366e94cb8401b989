"""Write the shipped notebooks from the cell sources below.

    python notebooks/build.py          # rewrite report/compare/explore/doctor.ipynb
    python notebooks/build.py --check  # exit 1 if a committed notebook differs

This file is the one source of the notebooks.  Each is written twice, byte
for byte the same: here in notebooks/ (the pages a user opens in JupyterLab
from a checkout) and into ``ccbench_kit/notebooks/`` (package data, which
``ccbench report`` and ``ccbench doctor --report`` execute, so an installed
kit has them without a checkout).  ``--check`` checks both copies.

The notebooks stay thin: each cell calls ``ccbench_kit.report.notebook`` or
``ccbench_kit.widgets``, where the logic is tested.  Cells get stable ids and
no outputs, so the files diff cleanly; the kernelspec is the kit's
``ccbench`` kernel (``make kernel``), so JupyterLab opens them without asking.
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# where each notebook is written: the user-facing folder and the package's data
TARGETS = (HERE, HERE.parent / "ccbench_kit" / "notebooks")
KERNELSPEC = {"display_name": "Python (ccbench)", "language": "python", "name": "ccbench"}


def md(text, tags=()):
    return ("markdown", text.strip("\n"), list(tags))


def code(text, tags=()):
    return ("code", text.strip("\n"), list(tags))


REPORT = [
    md("""
# ccbench report
Executed by `ccbench report RESULTS.nc -o reports/NAME.html` (papermill, then
nbconvert with the code hidden), or by hand:
`papermill notebooks/report.ipynb out.ipynb -y "{results: [results/demo.nc], theory: cpu}"`.
""", tags=["remove-cell"]),
    code("""
# Parameters (papermill injects the values given on the command line after this cell)
results = []  # results files (.nc, or any baseline format the kit imports)
baseline = ""  # optional baseline file to compare against
theory = "auto"  # hardware preset for the peak and the bound ("auto", "", or a name: h100-nvlink4, ib-ndr, cpu...)
stats = ["avg", "p50", "p99"]  # statistics over iterations: the first one is plotted
title = ""  # report title
""", tags=["parameters"]),
    code("""
# Check every parameter before reading any data: a wrong one fails here, in one line.
from ccbench_kit.report import notebook as rn

with rn.one_line_errors():
    ctx = rn.prepare(results=results, baseline=baseline, theory=theory, stats=stats, title=title)
"""),
    code("rn.show_header(ctx)"),
    code("rn.show_summary(ctx)"),
    code("rn.show_collectives(ctx)"),
    code("rn.show_tables(ctx)"),
]

COMPARE = [
    md("""
# ccbench comparison
Several runs of the same collectives side by side, each against the first
(or against `baseline` when given):
`papermill notebooks/compare.ipynb out.ipynb -y "{results: [a.nc, b.nc]}"`.
""", tags=["remove-cell"]),
    code("""
# Parameters
results = []  # two or more results files; the first is the reference unless baseline is set
baseline = ""  # optional: compare every run against this file instead
stats = ["avg"]  # statistic over iterations
title = ""  # title
""", tags=["parameters"]),
    code("""
# Check every parameter before reading any data: a wrong one fails here, in one line.
from ccbench_kit.report import notebook as rn

with rn.one_line_errors():
    cmp = rn.prepare_compare(results=results, baseline=baseline, stats=stats, title=title)
"""),
    code("rn.show_compare(cmp)"),
]

EXPLORE = [
    md("""
# Explore results
Pick a collective, algorithm, dtype and statistic; move the size slider.
The left plot is busbw against size with its α-β fit; the right one the
iteration times at the chosen size. Below, the Run panel starts a new sweep
(mpirun on this machine); its result opens in the Explorer when it is done.
"""),
    code("""
results = "../results/demo.nc"  # a results file (make demo writes this one; paths are relative to notebooks/)
"""),
    code("""
import os

import ccbench_kit as ccb
from ccbench_kit.widgets import Explorer, RunPanel

if os.path.exists(results):
    data = ccb.load(results)
else:  # nothing measured yet: a synthetic sweep from the α-β model, until the Run panel adds one
    from ccbench_kit.theory.synthetic import synthetic_dataset
    data = synthetic_dataset("all_reduce", ["ring", "recursive_doubling", "mpi"], nranks=4, iters=20)
explorer = Explorer(data)
explorer
"""),
    code("""
panel = RunPanel(explorer=explorer, out="../results/explore-run.nc")
panel
"""),
]


DOCTOR = [
    md("""
# ccbench doctor
Executed by `ccbench doctor ... --report reports/NAME.html`, or by hand:
`papermill notebooks/doctor.ipynb out.ipynb -p results results/doctor.nc`.
""", tags=["remove-cell"]),
    code("""
# Parameters (papermill injects the values given on the command line after this cell)
results = ""  # a results file written by `ccbench doctor`
title = "ccbench doctor"  # report title
""", tags=["parameters"]),
    code("""
import json
import xarray as xr
from IPython.display import Markdown, display
from ccbench_kit import markup
from ccbench_kit.health import report

pairs = xr.open_dataset(results)
verdict = report.verdict_of(pairs)
lines = [f"# {title}", f"**{verdict.get('line', 'verdict: ?')}**", ""]
for f in verdict.get("findings", []):
    lines.append(f"- {f['node']}{' link' if f['kind'] == 'link' else ''}: {f['metric']}, "
                 f"ratio {f['ratio']:.2f} to the other nodes, {f['agree']} agree; {f['detail']}")
for note in verdict.get("notes", []):
    lines.append(f"- note: {note}")
plan = json.loads(pairs.attrs["doctor_plan"])
lines += ["", f"Nodes: {', '.join(json.loads(pairs.attrs['doctor_nodes']))}; " +
          (f"{plan['repeats']} repeats of {len(plan['waves'])} waves of disjoint pairs; "
           if plan["waves"] else f"bisection, {plan['repeats']} repeats a step; ") +
          f"timing: {pairs.attrs.get('doctor_timing', '{}')}",
          "", "Reproduce:", "", f"    {pairs.attrs.get('command') or 'ccbench doctor --hosts ...'}"]
display(Markdown(markup.markdown("\\n".join(lines))))
"""),
    code("""
if json.loads(pairs.attrs["doctor_plan"])["waves"]:
    report.show_matrices(pairs)
else:  # bisection instead of the pair matrix
    display(Markdown(markup.markdown(report.bisection_markdown(pairs))))
"""),
    code("""
report.show_nodes(pairs)
"""),
]


DOCTOR_GPU = [
    md("""
# ccbench doctor --local (GPU checks)
Executed by `ccbench doctor --local --report reports/NAME.html`, or by hand:
`papermill notebooks/doctor_gpu.ipynb out.ipynb -p results results/doctor-gpu.nc`.
""", tags=["remove-cell"]),
    code("""
# Parameters (papermill injects the values given on the command line after this cell)
results = ""  # a results file written by `ccbench doctor --local`
title = "ccbench doctor --local"  # report title
""", tags=["parameters"]),
    code("""
from ccbench_kit.health.gpu import check, report

ds = check.load(results)
# plain text, never markup: names and notes come from the machine
print(title)
for line in report.summary_lines(ds):  # what `ccbench show` prints of it
    print(line)
"""),
    code("""
import matplotlib.pyplot as plt
from ccbench_kit.report.notebook import show_figure
show_figure(report.plot(ds).figure, plt)
"""),
]


def notebook(cells, name):
    out = []
    for i, (kind, text, tags) in enumerate(cells):
        cell = {"cell_type": kind, "id": f"{name}-{i:02d}", "metadata": {}, "source": _lines(text)}
        if tags:
            cell["metadata"]["tags"] = tags
        if kind == "code":
            cell["execution_count"] = None
            cell["outputs"] = []
        out.append(cell)
    return {"cells": out,
            "metadata": {"kernelspec": KERNELSPEC,
                         "language_info": {"name": "python", "pygments_lexer": "ipython3"}},
            "nbformat": 4, "nbformat_minor": 5}


def _lines(text):
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


HISTORY = [
    md("""
# ccbench history
Executed by `ccbench history report --history DIR -o trend.html`, or by hand:
`papermill notebooks/history.ipynb out.ipynb -p history DIR`.
""", tags=["remove-cell"]),
    code("""
# Parameters (papermill injects the values given on the command line after this cell)
history = ""  # the history directory (ccbench history add --history DIR ...)
""", tags=["parameters"]),
    code("""
import ccbench_kit.history as H
from ccbench_kit.history import report as hr
from ccbench_kit.report import notebook as rn

with rn.one_line_errors():
    h = H.open(hr.history_from_env(history))
hr.header(h)
"""),
    md("""
## Trends
Per collective, busbw of its largest size over time, one line per algorithm.
The shaded band is each level ± twice its night-to-night noise; a dashed line
is a change point (binary segmentation with the median cost, then a
permutation test: see docs/history.md). The table says what changed there.
"""),
    code("hr.trends(h)"),
    md("## The newest run against the history (busbw, worst first)"),
    code("hr.newest_against_history(h)"),
]

NOTEBOOKS = {"report.ipynb": REPORT, "compare.ipynb": COMPARE, "explore.ipynb": EXPLORE,
             "doctor.ipynb": DOCTOR, "doctor_gpu.ipynb": DOCTOR_GPU, "history.ipynb": HISTORY}


def render(name):
    # nbformat's own layout (indent 1, sorted keys), so saving in Jupyter changes nothing
    return json.dumps(notebook(NOTEBOOKS[name], name.split(".")[0]), indent=1, sort_keys=True,
                      ensure_ascii=False) + "\n"


def main(argv):
    check = "--check" in argv
    stale = []
    for name in NOTEBOOKS:
        text = render(name)
        for folder in TARGETS:
            path = folder / name
            if check:
                if not path.exists() or path.read_text(encoding="utf-8") != text:
                    stale.append(str(path.relative_to(HERE.parent)))
            else:
                folder.mkdir(exist_ok=True)
                path.write_text(text, encoding="utf-8")
    if stale:
        print(f"stale: {', '.join(stale)}; run python notebooks/build.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
