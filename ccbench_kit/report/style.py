"""One look for every plot: sizes, fonts, colours per algorithm, log₂ axes."""
import functools
import math

from .._optional import require
from ..units import format_size

STYLE = {
    "figure.figsize": (9.0, 4.6),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 9.5,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.labelsize": 9.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
}

# Fixed colours for the common algorithms, so a name keeps its colour
# across plots and reports; others take the next free colour of tab10.
_KNOWN = {
    "mpi": "#3b3b3b", "nccl": "#3b3b3b",
    "ring": "#1f77b4", "nccl:ring": "#1f77b4",
    "recursive_doubling": "#ff7f0e", "recursive_halving": "#ff7f0e",
    "rabenseifner": "#2ca02c", "nccl:pat": "#2ca02c",
    "tree": "#d62728", "nccl:tree": "#d62728",
    "direct": "#9467bd", "bruck": "#8c564b", "pairwise": "#e377c2",
    "binomial": "#bcbd22", "scatter_allgather": "#17becf", "chain": "#7f7f7f",
    "linear": "#aec7e8",
}
_SPARE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#bcbd22", "#17becf", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896"]


def pyplot():
    """matplotlib.pyplot, on Agg unless a notebook backend is active."""
    require("matplotlib", "report")
    import matplotlib  # lazy: optional dependency (report extra)
    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline",
                                                 "module://ipympl.backend_nbagg", "widget", "ipympl"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: optional dependency (report extra)
    return plt


def styled(fn):
    """Run a plot function inside the kit's rc settings (no global change)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with pyplot().rc_context(STYLE):
            return fn(*args, **kwargs)
    return wrapper


def algorithm_colors(*datasets):
    """{algorithm: colour} over the algorithms of `datasets`, stable by name."""
    names = []
    for ds in datasets:
        names += [str(a) for a in ds["algorithm"].values if str(a) not in names]
    out, used = {}, set()
    for n in names:
        base = n.split("/")[0]
        c = _KNOWN.get(n) or _KNOWN.get(base)
        if c is None or c in used:
            c = next((s for s in _SPARE if s not in used), _SPARE[len(out) % len(_SPARE)])
        out[n] = c
        used.add(c)
    return out


def figure(ax=None, **kw):
    """(fig, ax): `ax`'s figure, or a new constrained-layout figure."""
    if ax is not None:
        return ax.figure, ax
    fig, ax = pyplot().subplots(layout="constrained", **kw)
    return fig, ax


def log2_sizes(ax, max_ticks=None):
    """Log₂ size axis labelled 8 B, 4 KiB, 64 MiB, at most `max_ticks` ticks
    (default: as many as the figure's width holds)."""
    if max_ticks is None:
        max_ticks = max(4, int(ax.figure.get_figwidth() * 1.35))
    # lazy: optional dependency (report extra)
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    lo, hi = ax.dataLim.intervalx
    if lo > 0 and hi >= lo:
        e0, e1 = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
        step = max(1, math.ceil((e1 - e0 + 1) / max_ticks))
        ax.xaxis.set_major_locator(FixedLocator([2.0 ** e for e in range(e0, e1 + 1, step)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(int(v)) if v >= 1 else ""))
    for lab in ax.get_xticklabels():
        lab.set_rotation(0)


def finish(fig, ax, title, subtitle="", ncol=1, legend=True):
    """Title (bold) over a grey subtitle; legend below the axes."""
    ax.set_title(title, loc="left", pad=17 if subtitle else 6)
    if subtitle:
        ax.annotate(subtitle, xy=(0, 1), xycoords="axes fraction", xytext=(0, 5),
                    textcoords="offset points", va="bottom", ha="left", fontsize=9,
                    color="0.35")
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=max(ncol, 1),
                  fontsize=8.5, frameon=False)
    return fig


def format_time_us(us):
    """µs as people say it: 850 ns, 12 µs, 3.4 ms, 1.2 s."""
    us = float(us)
    for scale, unit in ((1e6, "s"), (1e3, "ms"), (1.0, "µs"), (1e-3, "ns")):
        if abs(us) >= scale or unit == "ns":
            return f"{us / scale:.3g} {unit}"
    return f"{us:g} µs"


def approx_size(nbytes):
    """A size that is not a power of two, readably: 38.6 KiB."""
    n = float(nbytes)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def time_axis(ax, axis="y"):
    """Label a µs axis in ns / µs / ms / s."""
    from matplotlib.ticker import FuncFormatter  # lazy: optional dependency (report extra)
    getattr(ax, f"{axis}axis").set_major_formatter(FuncFormatter(lambda v, _: format_time_us(v)))


def style_legend(ax, colors, styles, loc="upper center", anchor=(0.5, -0.14)):
    """One legend of algorithms (colour) and line styles (meaning), below the axes.

    `colors`: {label: colour}; `styles`: {label: linestyle}.
    """
    from matplotlib.lines import Line2D  # lazy: optional dependency (report extra)
    handles = [Line2D([], [], color=c, lw=2, marker="o", ms=3.5) for c in colors.values()]
    handles += [Line2D([], [], color="0.35", lw=1.4, ls=s) for s in styles.values()]
    labels = list(colors) + list(styles)
    ax.legend(handles, labels, loc=loc, bbox_to_anchor=anchor,
              ncol=min(len(labels), 6), frameon=False)
