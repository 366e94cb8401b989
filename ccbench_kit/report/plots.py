"""Plots of a results Dataset.  Each takes a Dataset and returns a
matplotlib Figure, so notebooks, the Explorer and reports share them.

Every plot says its statistics in its labels: the iteration time is the
`rank_stat` (max) over ranks, then `stat` over iterations; GB = 1e9 B.
"""
import os

import numpy as np

from ..units import format_size
from . import analysis
from .style import (algorithm_colors, approx_size, figure, finish, format_time_us, log2_sizes,
                    pyplot, style_legend, styled, time_axis)
from .. import theory

__all__ = ["busbw_vs_size", "winner_per_size", "latency_percentiles", "rank_heatmap",
           "iteration_trace", "compare_baseline", "size_distribution", "busbw_runs"]


def _subtitle(ds):
    a = ds.attrs
    return (f"{a.get('nranks')} ranks · {a.get('dtype')} · {a.get('backend')} · "
            f"{a.get('iters')} iterations")


def _placement(ds, placement):
    values = [str(p) for p in ds["placement"].values]
    if placement in values:
        return placement
    return "out_of_place" if "out_of_place" in values else values[0]


@styled
def busbw_vs_size(ds, stat="avg", rank_stat="max", placement=None, preset=None, fits=None,
                  band=(10, 90), yscale="log", peak=None, algorithms=None, ax=None,
                  figsize=None):
    """busbw per algorithm vs size (log₂ x), with theory.

    Parameters
    ----------
    stat, rank_stat : str
        The line: `stat` over iterations of the `rank_stat` over ranks.
    placement : str, optional
        ``out_of_place`` (default when present), ``in_place``.
    preset : str or `theory.Preset`, optional
        Draws the link peak, the lower-bound curve at the preset's α and
        peak, and a right axis in % of the peak (efficiency).
    fits : `theory.FitResult` or dict, optional
        Fitted α-β curves (dashed), α and B in the legend; ``True`` fits here.
        A value may be a list of fits (pieces, each drawn over its own size
        range) or None (an algorithm with no fit that holds: drawn as data
        only, "no fit" in the legend).
    band : (lo, hi) percentiles or None
        Shaded busbw band from per-iteration times.
    peak : float, optional
        A plain peak line in GB/s when there is no preset.
    algorithms : list of str, optional
        A subset to draw.
    """
    ds = analysis.sized(ds)
    placement = _placement(ds, placement)
    fig, ax = figure(ax, **({"figsize": figsize} if figsize else {}))
    colors = algorithm_colors(ds)
    sizes = ds["size"].values.astype(float)
    factor = ds.ccb.bus_factor
    bw = ds.ccb.busbw(stat, rank_stat).sel(placement=placement)
    algs = [str(a) for a in (algorithms or bw["algorithm"].values)]
    if band:
        it = ds.ccb.iteration_time(rank_stat).sel(placement=placement)
        q = np.nanpercentile(np.asarray(it.transpose("algorithm", "size", "iteration").values,
                                        dtype=float), band, axis=-1)  # (2, alg, size)
    if fits is True:
        fits = theory.fit(ds, stat=stat, rank_stat=rank_stat, placement=placement)
    dense = np.geomspace(sizes.min(), sizes.max(), 200) if sizes.size else sizes
    for alg in algs:
        i = [str(a) for a in bw["algorithm"].values].index(alg)
        c = colors[alg]
        y = bw.sel(algorithm=alg).values
        if band:
            with np.errstate(divide="ignore", invalid="ignore"):
                ax.fill_between(sizes, factor * sizes / (q[1, i] * 1e3), factor * sizes / (q[0, i] * 1e3),
                                color=c, alpha=0.15, lw=0)
        f = (fits or {}).get(alg)
        pieces = f if isinstance(f, (list, tuple)) else ([f] if f is not None else [])
        label = alg
        if len(pieces) == 1:
            label += f" — {_fit_label(pieces[0])}"
        elif pieces:
            label += " — piecewise: " + " | ".join(_fit_label(x) for x in pieces)
        elif fits and alg in fits:
            label += " — no fit"
        ax.plot(sizes, y, color=c, marker="o", ms=3.5, lw=1.6, label=label)
        for x in pieces:
            lo, hi = (x.size_range if len(pieces) > 1 else (dense[0], dense[-1]))
            d = dense[(dense >= lo) & (dense <= hi)]
            ax.plot(d, x.busbw(d), color=c, ls="--", lw=1.1, alpha=0.9)
    if fits and any(v is not None and v != [] for v in fits.values()):
        ax.plot([], [], color="0.4", ls="--", lw=1.1, label="α-β fit (dashed)")
    p = theory.preset(preset, ds=ds) if preset is not None and preset != "" else None
    if p is not None and not p.has_peak:  # a memcpy preset the run did not measure
        p = None
    if p is not None:
        peak = p.peak_gbps
        lb = theory.curve(ds.attrs["collective"], "lower bound", dense.astype(np.int64),
                          ds.ccb.nranks, alpha=p.alpha, beta=p.beta)
        ax.plot(dense, lb["busbw"].values, color="0.35", ls=":", lw=1.3,
                label=f"bound: α {p.alpha_us:g} µs, B {p.peak_gbps:.3g} GB/s ({p.name})")
    if peak:
        ax.axhline(peak, color="0.2", lw=1.0, ls="-.", label=f"peak {peak:.4g} GB/s"
                   + (f" ({p.name})" if p is not None else ""))
        best = np.nanmax(bw.sel(algorithm=algs).values) if algs else np.nan
        if np.isfinite(best):
            ax.annotate(f"best: {best:.3g} GB/s = {100 * best / peak:.0f} % of peak",
                        xy=(0.99, 0.03), xycoords="axes fraction", ha="right", va="bottom",
                        fontsize=8.5, color="0.2",
                        bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="0.8", lw=0.6))
    log2_sizes(ax)
    ax.set_yscale(yscale)
    if yscale == "log":
        from matplotlib.ticker import FuncFormatter  # lazy: optional dependency (report extra)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    if peak:
        _efficiency_axis(ax, peak, yscale)
    ax.set_xlabel("size")
    ax.set_ylabel(f"busbw (GB/s) — {stat} over iterations")
    band_txt = f", band p{band[0]}–p{band[1]}" if band else ""
    return finish(fig, ax, f"{ds.attrs.get('collective')} bus bandwidth "
                  f"({placement.replace('_', '-')}{band_txt})", _subtitle(ds), ncol=2)


def _efficiency_axis(ax, peak, yscale):
    """A right axis in % of `peak`, over the same range as busbw."""
    # lazy: optional dependency (report extra)
    from matplotlib.ticker import FuncFormatter, NullFormatter
    lo, hi = ax.get_ylim()
    eff = ax.twinx()
    eff.set_yscale(yscale)
    eff.set_ylim(100.0 * lo / peak, 100.0 * hi / peak)
    eff.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g} %"))
    eff.yaxis.set_minor_formatter(NullFormatter())
    eff.grid(False)
    eff.spines["right"].set_visible(True)
    eff.set_ylabel("efficiency (% of peak)")
    ax.set_ylim(lo, hi)


def _fit_label(f):
    """The fitted parameters, with units, as the legend shows them."""
    if f.model.startswith("generic"):
        return f"A {f.latency * 1e6:.3g} µs, B {f.peak_busbw:.3g} GB/s"
    link = f", 1/β {1 / f.beta / 1e9:.3g} GB/s" if f.beta > 0 else ""
    return f"α {f.alpha * 1e6:.3g} µs{link}"


@styled
def winner_per_size(ds, stat="median", rank_stat="max", placement=None, tolerance=0.05, ax=None):
    """The best algorithm at each size (by the median over iterations), its
    margin over the runner-up with the interval the bootstraps allow, ties
    in grey, and the crossovers (`analysis.crossovers`: only where the
    intervals separate) marked and named."""
    plt = pyplot()
    ds = analysis.sized(ds)
    placement = _placement(ds, placement)
    ch = analysis.winner_changes(ds, stat, rank_stat, placement, tolerance)
    w, cross = ch["winners"], ch["crossovers"]
    colors = algorithm_colors(ds)
    fig, (top, bot) = plt.subplots(2, 1, figsize=(9, 4.6), sharex=True, layout="constrained",
                                   gridspec_kw={"height_ratios": [1, 4]})
    sizes = w["size"].values.astype(float)
    edges = _log_edges(sizes)
    margins = 100 * w["margin"].to_numpy(dtype=float)
    lo_m = 100 * w["margin_lo"].to_numpy(dtype=float)
    hi_m = 100 * w["margin_hi"].to_numpy(dtype=float)
    finite = margins[np.isfinite(margins)]
    # one noisy size (a 100× slower average) must not flatten the others
    cap = max(20.0, min(float(finite.max()) if finite.size else 20.0,
                        3 * float(np.percentile(finite, 75)) if finite.size else 20.0))
    tie_color = "0.75"
    for i, row in w.iterrows():
        col = tie_color if row["tie"] else colors[row["winner"]]
        top.axvspan(edges[i], edges[i + 1], color=col, alpha=0.85, lw=0)
        m = margins[i]
        mid = np.sqrt(edges[i] * edges[i + 1])
        bot.bar(edges[i], min(m, cap) if np.isfinite(m) else 0, width=edges[i + 1] - edges[i],
                align="edge", color=colors[row["winner"]], alpha=0.85 if not row["tie"] else 0.3,
                hatch="//" if row["tie"] else None, edgecolor="white", lw=0.5)
        if np.isfinite(lo_m[i]) and np.isfinite(hi_m[i]):
            bot.plot([mid, mid], [max(lo_m[i], -cap), min(hi_m[i], cap)], color="0.2", lw=0.9)
        if np.isfinite(m) and m > cap:
            bot.text(mid, cap, f"↑{m:.0f} %", ha="center", va="bottom", fontsize=7, color="0.3",
                     rotation=90)
    low = float(np.min(lo_m[np.isfinite(lo_m)], initial=0.0))
    bot.set_ylim(bottom=1.1 * max(-cap, min(0.0, low)), top=cap * 1.25)
    labels = ["tie" if t else a for a, t in zip(w["winner"], w["tie"])]
    for start, end, alg in _runs(labels):
        mid = np.sqrt(edges[start] * edges[end + 1])
        top.text(mid, 0.5, alg, ha="center", va="center", fontsize=8.5,
                 color="0.25" if alg == "tie" else "white", fontweight="bold",
                 transform=top.get_xaxis_transform(), clip_on=True)
    for k, c in enumerate(cross):
        for a in (top, bot):
            a.axvline(c["at"], color="0.15", ls="--", lw=1)
        # staggered, so that close crossovers stay readable
        bot.annotate(f"{c['from']} → {c['to']}\n≈ {approx_size(c['at'])}",
                     xy=(c["at"], 1.0), xycoords=("data", "axes fraction"),
                     xytext=(4, -4 - 26 * (k % 3)),
                     bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85),
                     textcoords="offset points", va="top", fontsize=8, color="0.15")
    top.set_yticks([])
    top.set_ylabel("winner", rotation=0, ha="right", va="center")
    log2_sizes(bot)
    bot.set_xlim(edges[0], edges[-1])
    bot.set_xlabel("size")
    bot.set_ylabel("margin over runner-up (%)")
    bot.axhline(0, color="0.5", lw=0.8)
    names = "; ".join(f"{c['from']} → {c['to']} at ≈ {approx_size(c['at'])}"
                      for c in cross[:3]) or "no crossover"
    if len(cross) > 3:
        names += f"; and {len(cross) - 3} more"
    noise = (f" · {ch['noisy']} winner changes within the noise" if ch["noisy"] else "")
    top.set_title(f"{ds.attrs.get('collective')} — best algorithm per size ({stat} busbw)\n"
                  f"{names}{noise}", loc="left")
    how = w["decided_by"].iloc[0] if len(w) else ""
    bot.text(1.0, 1.0, f"bars: margin, whiskers: its range from the {how}; grey / hatched: "
             "tie (the winner is not clearly ahead)",
             transform=bot.transAxes, ha="right", va="bottom", fontsize=7.5, color="0.4")
    return fig


def _log_edges(sizes):
    if sizes.size == 1:
        return np.array([sizes[0] / np.sqrt(2), sizes[0] * np.sqrt(2)])
    mids = np.sqrt(sizes[:-1] * sizes[1:])
    return np.concatenate([[sizes[0] ** 2 / mids[0]], mids, [sizes[-1] ** 2 / mids[-1]]])


def _runs(labels):
    out, start = [], 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            out.append((start, i - 1, labels[start]))
            start = i
    return out


@styled
def latency_percentiles(ds, percentiles=("p50", "p90", "p99"), rank_stat="max",
                        placement=None, algorithms=None, floor=None, ax=None):
    """Latency percentiles (µs, log y) vs size, per algorithm: solid p50,
    dashed p90, dotted p99; the p50–p99 spread shaded; `floor` (µs, the
    measured latency floor, `analysis.latency_floor`) a grey line."""
    ds = analysis.sized(ds)
    placement = _placement(ds, placement)
    fig, ax = figure(ax)
    colors = algorithm_colors(ds)
    it = ds.ccb.iteration_time(rank_stat).sel(placement=placement)
    qs = [float(p[1:]) if p.startswith("p") else 50.0 for p in percentiles]
    vals = np.nanpercentile(np.asarray(it.transpose("algorithm", "size", "iteration").values,
                                       dtype=float), qs, axis=-1)
    sizes = ds["size"].values.astype(float)
    styles = ["-", "--", ":", "-."]
    names = [str(a) for a in it["algorithm"].values]
    for alg in (algorithms or names):
        i = names.index(alg)
        c = colors[alg]
        ax.fill_between(sizes, vals[0, i], vals[-1, i], color=c, alpha=0.1, lw=0)
        for j, q in enumerate(percentiles):
            ax.plot(sizes, vals[j, i], color=c, ls=styles[j % 4], lw=1.4,
                    marker="o" if j == 0 else None, ms=3)
    if floor:
        ax.axhline(floor, color="0.35", lw=1.0, ls="-.")
        ax.annotate(f"floor {floor:.3g} µs", (0.01, floor), xycoords=("axes fraction", "data"),
                    xytext=(0, 3), textcoords="offset points", fontsize=8, color="0.35")
    log2_sizes(ax)
    ax.set_yscale("log")
    time_axis(ax)
    ax.set_xlabel("size")
    ax.set_ylabel(f"time — {rank_stat} over ranks")
    style_legend(ax, {a: colors[a] for a in (algorithms or names)},
                 {q: styles[j % 4] for j, q in enumerate(percentiles)})
    return finish(fig, ax, f"{ds.attrs.get('collective')} latency {', '.join(percentiles)} "
                  f"({placement.replace('_', '-')})", _subtitle(ds), legend=False)


@styled
def rank_heatmap(ds, algorithm=None, placement=None, threshold=3.5, metric="auto"):
    """rank × size heat map of start skew (when `start` exists) or of median
    latency relative to the median rank; stragglers (robust z >
    `threshold`) outlined."""
    plt = pyplot()
    ds = analysis.sized(ds)
    placement = _placement(ds, placement)
    algorithm = algorithm or str(ds["algorithm"].values[0])
    h = analysis.rank_matrix(ds, algorithm, placement, metric)
    z = analysis.robust_z(h.values)
    nr, ns = h.values.shape
    fig, ax = plt.subplots(figsize=(9, min(2.2 + 0.3 * nr, 9)), layout="constrained")
    im = ax.imshow(h.values, aspect="auto", cmap="magma", interpolation="nearest", origin="lower")
    slow = analysis.stragglers(ds, algorithm, placement, threshold, metric)
    rows = [list(h["rank"].values).index(r) for r in slow["rank"]]
    for r, s in np.argwhere(z > threshold):
        if r in rows:
            ax.add_patch(plt.Rectangle((s - 0.5, r - 0.5), 1, 1, fill=False, ec="#00e5ff", lw=1.8))
    step = max(1, -(-ns // 16))
    ax.set_xticks(range(0, ns, step))
    ax.set_xticklabels([format_size(int(s)) for s in h["size"].values[::step]],
                       rotation=45, ha="right")
    rstep = max(1, -(-nr // 32))
    ax.set_yticks(range(0, nr, rstep))
    hosts = [str(x) for x in h["host"].values] if "host" in h.coords else [""] * nr
    ax.set_yticklabels([f"{r}" + (f" ({hosts[i]})" if len(set(hosts)) > 1 else "")
                        for i, r in enumerate(h["rank"].values)][::rstep])
    ax.set_xlabel("size")
    ax.set_ylabel("rank")
    ax.grid(False)
    fig.colorbar(im, ax=ax, label=h.attrs["label"], pad=0.01)
    who = ", ".join(f"rank {r.rank} ({r.flagged}/{ns} sizes)" for r in slow.itertuples()) or "none"
    ax.set_title(f"{ds.attrs.get('collective')} per-rank {h.attrs['what']} — {algorithm}\n"
                 f"stragglers (robust z > {threshold:g}, outlined): {who}", loc="left")
    return fig


@styled
def iteration_trace(ds, sizes=None, algorithms=None, placement=None, rank_stat="max"):
    """Each measured iteration's time, for a small, a middle and the largest
    size: warm-up effects and jitter.  The band spans min to max over ranks."""
    plt = pyplot()
    ds = analysis.sized(ds)
    placement = _placement(ds, placement)
    all_sizes = [int(s) for s in ds["size"].values]
    if sizes is None:
        picks = sorted({0, len(all_sizes) // 2, len(all_sizes) - 1})
        sizes = [all_sizes[i] for i in picks]
    colors = algorithm_colors(ds)
    lat = ds["latency"].sel(placement=placement)
    algs = [str(a) for a in (algorithms or lat["algorithm"].values)]
    fig, axes = plt.subplots(1, len(sizes), figsize=(9, 3.4), squeeze=False, layout="constrained")
    reduce_ranks = {"max": np.nanmax, "min": np.nanmin, "mean": np.nanmean}[rank_stat]
    for ax, s in zip(axes[0], sizes):
        block = lat.sel(size=s)
        x = block["iteration"].values
        shown = []
        for alg in algs:
            v = np.asarray(block.sel(algorithm=alg).values, dtype=float)  # (rank, iteration)
            ax.fill_between(x, np.nanmin(v, axis=0), np.nanmax(v, axis=0),
                            color=colors[alg], alpha=0.15, lw=0, step="mid")
            line = reduce_ranks(v, axis=0)
            shown.append(line)
            ax.plot(x, line, color=colors[alg], lw=1.1, label=alg, drawstyle="steps-mid")
        _robust_time_limits(ax, np.concatenate(shown) if shown else np.array([]))
        ax.set_title(format_size(s), fontsize=10, loc="center")
        ax.set_xlabel("iteration")
        time_axis(ax)
    axes[0][0].set_ylabel(f"time — {rank_stat} over ranks")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center",
               ncol=min(len(algs), 6))
    warm = ds.attrs.get("warmup")
    warm_txt = f"{warm} warm-up iterations ran before these (not recorded)" if warm \
        else "no warm-up iterations"
    fig.suptitle(f"{ds.attrs.get('collective')} per-iteration time ({placement.replace('_', '-')})\n"
                 f"band: min–max over ranks · {warm_txt}", x=0.01, ha="left", fontsize=11,
                 fontweight="bold")
    return fig


def _robust_time_limits(ax, values):
    """One slow iteration must not flatten the rest: a log axis when the
    times span more than 10×, else linear up to 1.5 × p95 with the points
    above it counted in the corner."""
    v = values[np.isfinite(values) & (values > 0)]
    if not v.size:
        return
    lo, hi = float(v.min()), float(v.max())
    if hi > 10 * lo:
        from matplotlib.ticker import NullFormatter  # lazy: optional dependency (report extra)
        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(NullFormatter())
        return
    top = 1.5 * float(np.percentile(v, 95))
    if hi > top:
        ax.set_ylim(max(0.0, 0.9 * lo - 0.1 * (top - lo)), top)
        n = int(np.sum(v > top))
        ax.text(0.99, 0.99, f"{n} above ↑ (max {format_time_us(hi)})", transform=ax.transAxes,
                ha="right", va="top", fontsize=7, color="0.35")


@styled
def compare_baseline(ds, baseline, stat="avg", rank_stat="max", placement=None, ax=None):
    """busbw of `ds` / busbw of `baseline` per algorithm vs size, with the
    bootstrap confidence band of `ccbench_kit.compare` where both sides have
    per-iteration data (a plain ratio where one side is aggregated)."""
    ds = analysis.sized(ds)
    placement = _placement(ds, placement)
    fig, ax = figure(ax)
    colors = algorithm_colors(ds)
    cmp = analysis.compare(ds, analysis.sized(baseline), stat, rank_stat, placement)
    for alg, d in cmp.items():
        c = colors.get(alg, "C0")
        base_alg = alg.split(" vs ")[0]
        c = colors.get(base_alg, c)
        ax.plot(d["size"], d["ratio"], color=c, marker="o", ms=3.5, lw=1.5,
                label=alg if " vs " in alg else f"{alg} vs {d['against']}")
        if d.get("lo") is not None:
            ax.fill_between(d["size"], d["lo"], d["hi"], color=c, alpha=0.2, lw=0,
                            label=f"  {d['ci_label']}")
    ax.axhline(1.0, color="0.2", lw=1)
    ax.axhspan(0.95, 1.05, color="0.5", alpha=0.08, lw=0)
    log2_sizes(ax)
    ax.set_xlabel("size")
    ax.set_ylabel(f"busbw ratio to baseline ({stat})")
    # a file name, never the path it had on the machine that imported it
    src = os.path.basename(str(baseline.attrs.get("source") or "")) \
        or baseline.attrs.get("library") or "baseline"
    return finish(fig, ax, f"{ds.attrs.get('collective')} vs baseline",
                  f"baseline: {src} · > 1 is faster · grey: ±5 %", ncol=2)


@styled
def size_distribution(ds, size, stat="avg", rank_stat="max", placement=None, algorithms=None,
                      ax=None, figsize=None):
    """Iteration times at one size, one box per algorithm (whiskers p5–p95),
    with `stat` marked: how spread out each algorithm is there."""
    ds = analysis.sized(ds)
    placement = _placement(ds, placement)
    fig, ax = figure(ax, **({"figsize": figsize} if figsize else {}))
    colors = algorithm_colors(ds)
    it = ds.ccb.iteration_time(rank_stat).sel(placement=placement, size=size)
    names = [str(a) for a in (algorithms or it["algorithm"].values)]
    data = [np.asarray(it.sel(algorithm=a).values, dtype=float) for a in names]
    data = [d[np.isfinite(d)] for d in data]
    box = ax.boxplot(data, orientation="horizontal", whis=(5, 95), widths=0.6, patch_artist=True,
                     showfliers=True, flierprops=dict(marker=".", ms=3, alpha=0.5))
    ax.set_yticks(range(1, len(names) + 1), names)
    for patch, a in zip(box["boxes"], names):
        patch.set_facecolor(colors[a])
        patch.set_alpha(0.35)
        patch.set_edgecolor(colors[a])
    for med in box["medians"]:
        med.set_color("0.15")
    t = ds.ccb.time(stat, rank_stat).sel(placement=placement, size=size)
    for i, a in enumerate(names):
        ax.plot(float(t.sel(algorithm=a)), i + 1, marker="D", color=colors[a], ms=6, mec="0.1",
                ls="none", label=stat if i == 0 else None)
    finite = np.concatenate(data) if data else np.array([])
    if finite.size and finite.min() > 0 and finite.max() / finite.min() > 10:
        from matplotlib.ticker import NullFormatter  # lazy: optional dependency (report extra)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
    time_axis(ax, "x")
    ax.set_xlabel(f"iteration time — {rank_stat} over ranks")
    ax.grid(axis="y", visible=False)
    return finish(fig, ax, f"{ds.attrs.get('collective')} at {format_size(int(size))}",
                  f"box: p25–p75, whiskers p5–p95, ◆ {stat}", legend=False)


@styled
def busbw_runs(runs, stat="avg", rank_stat="max", placement=None, ax=None):
    """busbw of several runs of one collective on one plot: `runs` maps a
    label to a Dataset; each run has its colour, each algorithm its marker."""
    fig, ax = figure(ax)
    from matplotlib.lines import Line2D  # lazy: optional dependency (report extra)
    markers = "osD^vP*X"
    labels = list(runs)
    algs = list(dict.fromkeys(str(a) for ds in runs.values() for a in ds["algorithm"].values))
    runs = {label: analysis.sized(ds) for label, ds in runs.items()}
    for i, (label, ds) in enumerate(runs.items()):
        pl = _placement(ds, placement)
        bw = ds.ccb.busbw(stat, rank_stat).sel(placement=pl)
        for a in [str(x) for x in bw["algorithm"].values]:
            ax.plot(ds["size"].values, bw.sel(algorithm=a).values, color=f"C{i % 10}",
                    marker=markers[algs.index(a) % len(markers)], ms=3.5, lw=1.4)
    log2_sizes(ax)
    ax.set_yscale("log")
    ax.set_xlabel("size")
    ax.set_ylabel(f"busbw (GB/s) — {stat} over iterations")
    handles = [Line2D([], [], color=f"C{i % 10}", lw=2) for i in range(len(labels))]
    handles += [Line2D([], [], color="0.35", marker=markers[j % len(markers)], ls="none")
                for j in range(len(algs))]
    ax.legend(handles, labels + algs, loc="upper center", bbox_to_anchor=(0.5, -0.14),
              ncol=min(len(handles), 4))
    first = next(iter(runs.values()))
    return finish(fig, ax, f"{first.attrs.get('collective')} bus bandwidth, {len(runs)} runs",
                  "colour: run · marker: algorithm", legend=False)
