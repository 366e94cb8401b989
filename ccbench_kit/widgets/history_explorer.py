"""The History explorer: pick a series and a metric, see its trend with the
noise band and change points, pick a run and open its report.

>>> from ccbench_kit.widgets import HistoryExplorer
>>> HistoryExplorer("/shared/ccbench-history")

Text from the files (facts, names) is escaped before it reaches HTML.
"""
import html
from pathlib import Path

from .._optional import require
from ..history import api
from ..history import changepoints as C
from ..history.facts import METRIC_UNITS, METRICS
from ..history.report import draw_series
from ..report.driver import render
from .explorer import _png


class HistoryExplorer:
    """An interactive view of a history directory.

    Parameters
    ----------
    directory : path of the history (``--history DIR``)
    reports : folder where a run's report is written when asked for
    """

    def __init__(self, directory, reports="reports"):
        w = require("ipywidgets", "notebook")
        self._history = api.open(directory)
        self._reports = Path(reports)
        keys = [k for k, _ in self._history.series()]
        self.series = w.Dropdown(options=keys, description="series",
                                 layout=w.Layout(width="60%"))
        self.metric = w.ToggleButtons(options=list(METRICS), description="metric")
        self.image = w.Image(format="png")
        self.notes = w.HTML()
        self.run = w.Dropdown(description="run", layout=w.Layout(width="60%"))
        self.open_report = w.Button(description="report of this run")
        self.link = w.HTML()
        self.series.observe(lambda _: self._refresh(), names="value")
        self.metric.observe(lambda _: self._refresh(), names="value")
        self.open_report.on_click(lambda _: self.report_of_selected_run())
        self.widget = w.VBox([w.HBox([self.series, self.metric]), self.image, self.notes,
                              w.HBox([self.run, self.open_report]), self.link])
        self._refresh()

    def _ipython_display_(self):
        from IPython.display import display  # lazy: optional dependency (notebook extra)
        display(self.widget)

    def _refresh(self):
        if not self.series.value:
            self.notes.value = "<i>the history holds no series yet</i>"
            return
        plt = require("matplotlib.pyplot", "notebook")
        pts = self._history.points(self.series.value)
        metric = self.metric.value
        verdict = C.detect([v[metric] for _, v in pts])
        fig, ax = plt.subplots(figsize=(8, 3))
        draw_series(ax, pts, metric, verdict, metric)
        ax.set_ylabel(f"{metric} ({METRIC_UNITS[metric]})")
        fig.autofmt_xdate()
        self.image.value = _png(fig)
        lines = [f"{metric}: {verdict.status}" + (f" ({verdict.note})" if verdict.note else "")]
        for ch in verdict.changes:
            why = "; ".join(api.facts_near(pts, ch.index)) or "no recorded fact changed"
            lines.append(f"change at run {ch.index + 1} ({pts[ch.index][0]['created']}): "
                         f"{ch.change:+.1%}, {ch.evidence()}: {why}")
        self.notes.value = "<br>".join(html.escape(line) for line in lines)
        self.run.options = [(f"{n}: {r['created']} {r['name']}", r["run_id"])
                            for n, (r, _) in enumerate(pts, 1)][::-1]

    def report_of_selected_run(self):
        """Render the selected run's report (ccbench report) and link it."""
        run = next(r for r in self._history.runs() if r["run_id"] == self.run.value)
        out = self._reports / f"history-{run['run_id'][:12]}.html"
        if not out.exists():
            render([str(self._history.directory / run["file"])], out, theory="none",
                   title=f"{run['name']} ({run['created']})")
        self.link.value = (f'<a href="{html.escape(str(out))}" target="_blank">'
                           f"{html.escape(str(out))}</a>")
        return out
