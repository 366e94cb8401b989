"""``ccbench history report``: the trend page of a history (papermill).

notebooks/history.ipynb calls the functions here: per collective, busbw of
its largest size over time, one line per algorithm, with the noise band and
the change points marked and explained; then the newest run against the
history of every series.  Every text that comes from a file (facts, names)
reaches the page through pandas' escaped HTML tables or matplotlib text,
never as markup.
"""
import os
from pathlib import Path

import numpy as np

from .._optional import require
from ..errors import ConfigError
from ..report import driver
from . import api
from . import changepoints as C

NOTEBOOK = "history.ipynb"


def render(directory, output, timeout=600):
    """Execute notebooks/history.ipynb on `directory` and write `output` (.html)."""
    output = Path(output)
    if output.suffix != ".html":
        raise ConfigError(f"{output}: the report is HTML; name it NAME.html", "-o/--output")
    with api.open(directory):  # a bad DIR fails here, before a kernel starts
        pass
    driver._check_outputs(output)
    driver.execute(NOTEBOOK, output, {"history": str(Path(directory).resolve())},
                   timeout=timeout)
    driver.write_html(output.with_suffix(".ipynb"), output, title="ccbench history")
    return str(output)


def plotted_series(h):
    """{collective: [series key]}: each collective's largest size, one series
    per (algorithm, ranks/nodes, backend), out of place where there is one."""
    rows = h._con.execute(
        "SELECT collective, algorithm, placement, size, key, nranks, nnodes, backend "
        "FROM series ORDER BY collective, algorithm, nranks, nnodes, backend, "
        "placement = 'out_of_place', size").fetchall()
    best = {}
    for coll, alg, place, size, key, nr, nn, be in rows:
        best[(coll, alg, nr, nn, be)] = key   # sorted: the last is out of place and largest
    out = {}
    for (coll, *_), key in best.items():
        out.setdefault(coll, []).append(key)
    return out


def header(h):
    """A one-row table: runs, time span, series."""
    pd = require("pandas", "report")
    runs = h.runs()
    return pd.DataFrame([{"history": str(h.directory), "runs": len(runs),
                          "first": runs[0]["created"] if runs else "",
                          "newest": runs[-1]["created"] if runs else "",
                          "series": len(h.series())}])


def trends(h):
    """Draw one figure per collective; returns the table of change points."""
    plt = require("matplotlib.pyplot", "report")
    pd = require("pandas", "report")
    explained = []
    for coll, keys in plotted_series(h).items():
        fig, ax = plt.subplots(figsize=(9, 3.2))
        for key in keys:
            pts, verdict = _busbw_verdict(h, key)
            draw_series(ax, pts, "busbw", verdict, key.split("/", 1)[1])
            for ch in verdict.changes:
                explained.append({"series": key, "run": ch.index + 1,
                                  "date": pts[ch.index][0]["created"],
                                  "busbw change": f"{ch.change:+.1%}",
                                  "p-value": round(ch.p_value, 3),
                                  "what changed": "; ".join(api.facts_near(pts, ch.index))
                                  or "no recorded fact changed"})
            if verdict.status != "ok":
                explained.append({"series": key, "run": "", "date": "", "busbw change": "",
                                  "p-value": "", "what changed": f"{verdict.status}: {verdict.note}"})
        ax.set_title(f"{coll}: busbw of the largest size, noise band shaded, changes dashed")
        ax.set_ylabel("busbw (GB/s)")
        ax.legend(fontsize=7, loc="best")
        fig.autofmt_xdate()
        plt.show()
    return pd.DataFrame(explained)


def draw_series(ax, pts, metric, verdict, label):
    """One series' `metric` over time on `ax`: the line, the noise band of
    each level and the change points (dashed, with their size)."""
    when = np.array([np.datetime64(r["created"][:19]) for r, _ in pts])
    y = np.array([v[metric] for _, v in pts])
    line, = ax.plot(when, y, marker=".", lw=1, label=label)
    _band(ax, when, y, verdict, line.get_color())
    for ch in verdict.changes:
        ax.axvline(when[ch.index], color=line.get_color(), ls="--", lw=1)
        ax.annotate(f"{ch.change:+.1%}", (when[ch.index], y[ch.index]), fontsize=8,
                    color=line.get_color(), xytext=(3, 6), textcoords="offset points")


def _busbw_verdict(h, key):
    pts = h.points(key)
    return pts, C.detect([v["busbw"] for _, v in pts])


def _band(ax, when, y, verdict, color):
    """The level of each segment ± its night-to-night noise."""
    if verdict.noise != verdict.noise or not len(y):
        return
    bounds = [0] + [c.index for c in verdict.changes] + [len(y)]
    for a, b in zip(bounds, bounds[1:]):
        level = np.median(y[a:b])
        ax.fill_between(when[a:b], level * np.exp(-2 * verdict.noise),
                        level * np.exp(2 * verdict.noise), color=color, alpha=0.15, lw=0)


def newest_against_history(h, limit=40):
    """Every series of the newest run: its busbw against the median of its
    history, worst first (the `limit` worst)."""
    pd = require("pandas", "report")
    runs = h.runs()
    if not runs:
        return pd.DataFrame()
    newest = runs[-1]["run_id"]
    df = pd.read_sql_query(
        "SELECT s.key, p.run_id, p.busbw, r.created FROM points p JOIN series s "
        "USING (series_id) JOIN runs r USING (run_id) WHERE p.series_id IN "
        "(SELECT series_id FROM points WHERE run_id = ?)", h._con, params=(newest,))
    now = df[df.run_id == newest].set_index("key")["busbw"]
    past = df[df.run_id != newest].groupby("key")["busbw"]
    table = pd.DataFrame({"newest busbw": now, "history median": past.median(),
                          "history runs": past.size()}).dropna()
    table["newest / median"] = table["newest busbw"] / table["history median"]
    return table.sort_values("newest / median").head(limit).round(4)


def history_from_env(default=""):
    """The history DIR a notebook opens: its parameter, else CCBENCH_HISTORY."""
    return default or os.environ.get("CCBENCH_HISTORY", "")
