"""The health check for people: a text summary, plots, and the report page
(``notebooks/doctor.ipynb`` run by papermill, written as one HTML file)."""
import json
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..report.driver import execute, write_html
from ..report.notebook import show_figure


def text(diag):
    """Per-node ratios to their peers, one line a node, and the findings."""
    v = diag.verdict
    lines = []
    metrics = [m for m in v.scores if m != "uplink"]  # uplinks are not a node's
    if metrics:
        lines.append(f"{'node':<14}" + "".join(f"{m:>12}" for m in metrics))
        for node in diag.nodes:
            cells = []
            for m in metrics:
                s = v.scores[m].get(node)
                # '-': no ratio (a file written before NaN scores were left out)
                cells.append(f"{f'{s:.2f}x' if s is not None and np.isfinite(s) else '-':>12}")
            lines.append(f"{node:<14}" + "".join(cells))
        lines.append("(ratio to the other nodes' median: local and latency > 1 is slower, "
                     "bandwidth < 1 is slower)")
    for link, ratio in v.scores.get("uplink", {}).items():
        lines.append(f"uplink {link}: pairs across it at {ratio:.2f}x the pairs inside a leaf")
    for f in v.findings:
        lines.append(f.sentence())
    if v.undecided:
        lines.append(f"cannot tell: {v.undecided}")
    if diag.out:
        lines.append(f"results: {diag.out}")
    lines.append(f"reproduce: {diag.command}")
    return "\n".join(lines)


def verdict_of(ds):
    """The verdict dict stored with a results file's ``pairs`` part."""
    return json.loads(ds.attrs.get("doctor_verdict") or "{}")


def bisection_markdown(ds):
    """The bisection's path as a Markdown table: each step's groups, their
    median busbw, the ratio and the decision."""
    spec = json.loads(ds.attrs.get("doctor_bisect") or "{}")
    nodes = list(json.loads(ds.attrs["doctor_nodes"]))
    rows = ["| step | groups (median busbw, Mbit/s) | decision |", "|---|---|---|"]
    for e in spec.get("path", []):
        groups = "; ".join(f"{'+'.join(nodes[k] for k in g)} ({bw * 8 / 1e6:.0f})"
                           for g, bw in zip(e["groups"], e["median_busbw"]))
        rows.append(f"| {e['kind']} | {groups} | {e.get('decision', '')} |")
    if spec.get("note"):
        rows += ["", spec["note"]]
    return "\n".join(["## Bisection of the all_reduce", "", *rows])


def matrices(ds):
    """(nodes, bandwidth Mbit/s, latency µs): node x node medians over every
    iteration of every repeat, NaN on the diagonal and where not measured."""
    nodes = list(json.loads(ds.attrs["doctor_nodes"]))
    n = len(nodes)
    bw, lat = np.full((n, n), np.nan), np.full((n, n), np.nan)
    sizes = ds["size"].values
    for k, label in enumerate(ds["algorithm"].values):
        a, b = nodes.index(str(ds["node_a"].values[k])), nodes.index(str(ds["node_b"].values[k]))
        t_lat = ds["latency"].isel(algorithm=k, placement=0, size=0, rank=0).values
        t_bw = ds["latency"].isel(algorithm=k, placement=0, size=1, rank=0).values
        if np.isfinite(t_lat).any():
            lat[a, b] = lat[b, a] = np.nanmedian(t_lat)
        if np.isfinite(t_bw).any():
            bw[a, b] = bw[b, a] = sizes[1] * 8 / np.nanmedian(t_bw)  # bits per µs = Mbit/s
    return nodes, bw, lat


def plot_matrix(ds, ax=None, what="bandwidth"):
    """Heat map of the node x node matrix (bandwidth in Mbit/s or latency in µs)."""
    import matplotlib.pyplot as plt  # lazy: optional dependency (report extra)
    nodes, bw, lat = matrices(ds)
    m = bw if what == "bandwidth" else lat
    ax = ax or plt.subplots(figsize=(4.8, 4))[1]
    im = ax.imshow(m, cmap="viridis" if what == "bandwidth" else "magma_r")
    ax.set_xticks(range(len(nodes)), nodes, rotation=45)
    ax.set_yticks(range(len(nodes)), nodes)
    for i in range(len(nodes)):
        for j in range(len(nodes)):
            if np.isfinite(m[i, j]):
                ax.text(j, i, f"{m[i, j]:.0f}", ha="center", va="center", color="w", fontsize=8)
    ax.figure.colorbar(im, ax=ax, label="Mbit/s" if what == "bandwidth" else "µs (one way)")
    ax.set_title(f"pair {what}")
    return ax


def plot_nodes(ds, ax=None):
    """Per-node bars: each statistic's ratio to the other nodes' median."""
    import matplotlib.pyplot as plt  # lazy: optional dependency (report extra)
    v = verdict_of(ds)
    scores = {m: s for m, s in v.get("scores", {}).items() if m != "uplink"}  # not a node's
    nodes = list(json.loads(ds.attrs["doctor_nodes"]))
    ax = ax or plt.subplots(figsize=(7, 3.2))[1]
    width = 0.8 / max(len(scores), 1)
    flagged = {f["node"] for f in v.get("findings", [])}
    for k, (metric, per_node) in enumerate(scores.items()):
        vals = [per_node.get(n) or np.nan for n in nodes]
        # rates: show slowness (1/ratio) so that taller is worse everywhere
        vals = [1 / x if metric in ("bandwidth", "baseline") and x else x for x in vals]
        ax.bar(np.arange(len(nodes)) + k * width, vals, width, label=metric)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(nodes)) + 0.4 - width / 2,
                  [f"{n} *" if n in flagged else n for n in nodes])
    ax.set_ylabel("slowdown vs the other nodes")
    ax.legend(fontsize=8)
    ax.set_title("per node (* named in the verdict)")
    return ax


def show_matrices(ds):
    """Both heat maps, displayed as a PNG whatever the backend (`report.notebook.show_figure`)."""
    import matplotlib.pyplot as plt  # lazy: optional dependency (report extra)

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    plot_matrix(ds, axes[0], "bandwidth")
    plot_matrix(ds, axes[1], "latency")
    fig.tight_layout()
    show_figure(fig, plt)


def show_nodes(ds):
    import matplotlib.pyplot as plt  # lazy: optional dependency (report extra)

    show_figure(plot_nodes(ds).figure, plt)


def html(results, output, title="ccbench doctor", timeout=600, notebook="doctor.ipynb"):
    """Execute notebooks/`notebook` for `results` and write `output` (.html)."""

    output = Path(output)
    if output.suffix != ".html":
        raise ConfigError(f"{output}: the report is HTML; name it NAME.html", "--report")
    execute(notebook, output, {"results": str(Path(results).resolve()), "title": title},
            timeout=timeout)
    write_html(output.with_suffix(".ipynb"), output, title=title)
    return str(output)
