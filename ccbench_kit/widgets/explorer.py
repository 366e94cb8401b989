"""The Explorer: pick a collective, algorithm, dtype, statistic and size;
the busbw plot and the distribution at the chosen size follow.

Plots are rendered to PNG and shown in ``ipywidgets.Image``, so the widget
works the same in JupyterLab, in classic notebooks and in headless tests
(where ``Image.value`` holds the bytes the browser would show).
"""
import os
import warnings

import xarray as xr

from .._optional import require
from ..backends import default_preset
from ..report import cells, plots
from ..report.parameters import _open
from ..theory import fit, presets
from ..markup import html_text
from ..units import format_size

STATS = ("avg", "median", "min", "max", "p90", "p99")
ALL = "all algorithms"


def _png(fig):
    import matplotlib.pyplot as plt  # lazy: optional dependency (report extra)
    return cells._png(fig, plt, dpi=100)


def _entries(data):
    """[(collective, dtype, label, Dataset)] from a Dataset, DataTree, dict,
    a path or a list of paths."""
    if isinstance(data, xr.Dataset):
        data = {data.attrs.get("collective", "results"): data}
    elif isinstance(data, xr.DataTree):
        data = {name: node.to_dataset() for name, node in data.children.items()} \
            or {"results": data.to_dataset()}
    elif isinstance(data, (str, os.PathLike)):
        data = [data]
    if isinstance(data, (list, tuple)):
        merged = {}
        for path in data:
            for name, ds in _open(path).items():
                merged[f"{os.path.basename(os.fspath(path))}:{name}" if len(data) > 1 else name] = ds
        data = merged
    out = []
    for label, ds in data.items():
        out.append((str(ds.attrs.get("collective", label)), str(ds.attrs.get("dtype", "")),
                    str(label), ds.load()))
    return out


class Explorer:
    """An interactive view of ccbench results.

    Parameters
    ----------
    data : Dataset, DataTree, {label: Dataset}, path or list of paths
    preset : str, optional
        Theory preset for the peak line: ``"auto"`` (chosen per Dataset),
        ``"none"``, or a name (`ccbench_kit.theory.presets`).

    Examples
    --------
    >>> from ccbench_kit.widgets import Explorer
    >>> Explorer("results/demo.nc")          # last expression of a cell: renders
    """

    def __init__(self, data=None, preset="auto"):
        self.w = require("ipywidgets", "notebook")
        self.preset = preset
        self.entries = _entries(data) if data is not None else []
        self._fits = {}
        w = self.w
        self.collective = w.Dropdown(description="collective", layout=w.Layout(width="250px"))
        self.algorithm = w.Dropdown(description="algorithm", layout=w.Layout(width="290px"))
        self.dtype = w.Dropdown(description="dtype", layout=w.Layout(width="160px"))
        self.stat = w.Dropdown(options=STATS, value="avg", description="statistic",
                               layout=w.Layout(width="200px"))
        self.size = w.SelectionSlider(options=[("—", 0)], description="size",
                                      continuous_update=False, layout=w.Layout(width="98%"))
        self.busbw_image = w.Image(format="png", layout=w.Layout(width="58%", object_fit="contain"))
        self.detail_image = w.Image(format="png", layout=w.Layout(width="42%", object_fit="contain"))
        self.numbers = w.HTML()
        self.title = w.HTML()
        for c in (self.dtype, self.collective, self.algorithm, self.stat, self.size):
            c.style.description_width = "initial"
        self.widget = w.VBox([
            self.title,
            w.HBox([self.collective, self.algorithm, self.dtype, self.stat]),
            self.size,
            w.HBox([self.busbw_image, self.detail_image]),
            self.numbers,
        ], layout=w.Layout(border="1px solid #d0d7de", padding="8px"))
        self.widget.add_class("ccb-explorer")
        self._quiet = False
        self.collective.observe(self._on_collective, "value")
        self.dtype.observe(self._on_dtype, "value")
        for c in (self.algorithm, self.stat, self.size):
            c.observe(lambda change: self.refresh(), "value")
        self._fill_collectives()

    # -- Jupyter display ------------------------------------------------------------
    def _ipython_display_(self):
        from IPython.display import display  # lazy: optional dependency (report extra)
        display(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # -- data -----------------------------------------------------------------------
    def add(self, ds, label=None, select=True):
        """Add a Dataset (e.g. a run just finished); show it when `select`."""
        label = label or f"{ds.attrs.get('collective')} ({len(self.entries) + 1})"
        self.entries.append((str(ds.attrs.get("collective", label)), str(ds.attrs.get("dtype", "")),
                             label, ds.load()))
        if select:
            self._fill_collectives(self.entries[-1][0], self.entries[-1][1])
        else:
            self._fill_collectives(self.collective.value, self.dtype.value)

    @property
    def dataset(self):
        """The Dataset the controls select: the latest of that collective and dtype."""
        for coll, dtype, _, ds in reversed(self.entries):
            if coll == self.collective.value and dtype == self.dtype.value:
                return ds
        return None

    def _fill_collectives(self, collective=None, dtype=None):
        names = list(dict.fromkeys(c for c, _, _, _ in self.entries))
        self._quiet = True
        try:
            self.collective.options = names
            if names:
                self.collective.value = collective if collective in names else names[0]
            self._fill_dtypes(dtype)
            self._fill_controls()
        finally:
            self._quiet = False
        self.refresh()

    def _fill_dtypes(self, dtype=None):
        dtypes = list(dict.fromkeys(d for c, d, _, _ in self.entries if c == self.collective.value))
        current = dtype if dtype in dtypes else self.dtype.value
        self.dtype.options = dtypes
        if dtypes:
            self.dtype.value = current if current in dtypes else dtypes[0]

    def _fill_controls(self):
        ds = self.dataset
        if ds is None:
            return
        algs = [str(a) for a in ds["algorithm"].values]
        keep = self.algorithm.value if self.algorithm.value in algs else ALL
        self.algorithm.options = [ALL] + algs
        self.algorithm.value = keep
        sizes = [int(s) for s in ds["size"].values]
        old = self.size.value
        self.size.options = [(format_size(s), s) for s in sizes]
        self.size.value = old if old in sizes else sizes[len(sizes) // 2]

    def _on_collective(self, change):
        self._refill(dtypes=True)

    def _on_dtype(self, change):
        self._refill(dtypes=False)

    def _refill(self, dtypes):
        """Options that depend on the selection, set without redrawing each."""
        if self._quiet:
            return
        self._quiet = True
        try:
            if dtypes:
                self._fill_dtypes()
            self._fill_controls()
        finally:
            self._quiet = False
        self.refresh()

    # -- drawing --------------------------------------------------------------------
    def _preset(self, ds):
        name = default_preset(ds) if self.preset == "auto" else self.preset
        if not name or str(name).lower() in ("none", "off", "no"):
            return None
        key = (name, id(ds))
        if key not in self._fits:
            self._fits[key] = presets.get(name, ds=ds)
        return self._fits[key]

    def _fit(self, ds):
        key = ("fit", id(ds))
        if key not in self._fits:
            self._fits[key] = fit(ds)
        return self._fits[key]

    def refresh(self):
        """Redraw both plots and the numbers for the current selection."""
        if self._quiet:
            return
        ds = self.dataset
        if ds is None:
            self.title.value = "<b>ccbench Explorer</b> — no results yet: run a sweep below."
            return

        algs = None if self.algorithm.value in (None, ALL) else [self.algorithm.value]
        size = self.size.value
        stat = self.stat.value
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            fig = plots.busbw_vs_size(ds, stat=stat, algorithms=algs, preset=self._preset(ds),
                                      fits=self._fit(ds), figsize=(6.6, 4.4))
            ax = fig.axes[0]
            ax.axvline(size, color="#c2185b", lw=1.2, alpha=0.8)
            self.busbw_image.value = _png(fig)
            self.detail_image.value = _png(plots.size_distribution(
                ds, size, stat=stat, algorithms=algs, figsize=(4.8, 4.4)))
        a = {k: html_text(ds.attrs.get(k)) for k in ("collective", "nranks", "dtype",
                                                       "backend", "iters")}
        self.title.value = (f"<b>ccbench Explorer</b> — {a['collective']}, {a['nranks']} "
                            f"ranks, {a['dtype']}, backend {a['backend']}, "
                            f"{a['iters']} iterations")
        self.numbers.value = self._numbers(ds, size, stat, algs)

    def _numbers(self, ds, size, stat, algs):
        place = "out_of_place" if "out_of_place" in ds["placement"].values \
            else str(ds["placement"].values[0])
        t = ds.ccb.time(stat).sel(placement=place, size=size)
        bw = ds.ccb.busbw(stat).sel(placement=place, size=size)
        fit = self._fit(ds)
        rows = []
        td = "style='padding:3px 14px;text-align:right;font-variant-numeric:tabular-nums'"
        for a in (algs or [str(x) for x in ds["algorithm"].values]):
            f = fit.get(a)
            model = f"{float(f.busbw([size])[0]):.3g}" if f is not None else "—"
            rows.append(f"<tr><td style='padding:3px 14px 3px 0'>{html_text(a)}</td>"
                        f"<td {td}>{float(t.sel(algorithm=a)):.4g}</td>"
                        f"<td {td}>{float(bw.sel(algorithm=a)):.4g}</td><td {td}>{model}</td></tr>")
        th = "style='padding:3px 14px;text-align:right;border-bottom:1px solid #d0d7de'"
        return ("<table class='ccb-numbers' style='border-collapse:collapse;margin-top:4px'>"
                f"<thead><tr><th style='text-align:left;padding:3px 14px 3px 0;border-bottom:1px "
                f"solid #d0d7de'>at {format_size(int(size))}</th><th {th}>time {stat} (µs)</th>"
                f"<th {th}>busbw (GB/s)</th><th {th}>α-β fit (GB/s)</th></tr></thead><tbody>"
                + "".join(rows) + "</tbody></table>")
