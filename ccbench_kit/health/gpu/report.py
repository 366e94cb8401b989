"""The GPU check for people: one table a node (every GPU's figures and
their ratios to peers, preset and baseline), the NVML state, and bars."""

import numpy as np

from .. import baseline as _baseline
from ...dataset.schema import attr_json
from ..report import html as _html
from . import nvml as _nvml
from .check import FIGURES
from .judge import SHORT, fmt
from .pairs import PAIR_FIGURES, SHORT as PAIR_SHORT, named


def _ratio(r):
    return "-" if r is None else f"{r:.2f}x"


def text(ds, verdict):
    """The per-GPU table, the state lines and the findings (no verdict line)."""
    lines = [f"{'gpu':<22}{'figure':<13}{'value':>14}{'peers':>9}{'preset':>9}{'baseline':>10}"]
    for n in ds["node"].values:
        for g in ds["gpu"].values:
            label = f"{n}/gpu{int(g)}"
            for figure in FIGURES:
                row = verdict.scores.get(figure, {}).get(label, {})
                lines.append(f"{label:<22}{SHORT[figure]:<13}"
                             f"{fmt(figure, row.get('value', np.nan)):>14}"
                             f"{_ratio(row.get('peers')):>9}{_ratio(row.get('preset')):>9}"
                             f"{_ratio(row.get('baseline')):>10}")
            lines.append(f"{'':<22}{state_line(ds, n, g)}")
    lines.append("(ratios: the GPU's median over the reference; < 1 is slower. peers: the "
                 "other GPUs of this run; preset: its typical healthy figure; baseline: "
                 "--baseline FILE)")
    if "peer_gbps" in ds:
        lines.extend(pair_lines(ds, verdict.scores))
    for f in verdict.findings:
        lines.append(f.sentence())
    return "\n".join(lines)


def pair_lines(ds, scores):
    """The pair matrix: every link's and pair's figures with their ratios
    (`scores`: the verdict's, or its ``scores`` as stored with the results),
    then each GPU's NVLink error counters."""
    lines = [f"{'pair':<22}{'figure':<13}{'value':>14}{'peers':>9}{'preset':>9}{'baseline':>10}"]
    for n in ds["node"].values:
        for figure, (dim, unit, _, _) in PAIR_FIGURES.items():
            if figure not in ds:
                continue  # the SM figures where their kernels could not run
            for label in ds[dim].values:
                row = scores.get(figure, {}).get(f"{n}/{label}")
                value = "not measured" if row is None else f"{row['value']:,.1f} {unit}"
                row = row or {}
                lines.append(f"{f'{n}/{named(str(label))}':<22}{PAIR_SHORT[figure]:<13}"
                             f"{value:>14}"
                             f"{_ratio(row.get('peers')):>9}{_ratio(row.get('preset')):>9}"
                             f"{_ratio(row.get('baseline')):>10}")
        for g in ds["gpu"].values:
            counts = []
            for key in _nvml.NVLINK_COUNTERS:
                if f"{key}_during" in ds:
                    during = float(ds[f"{key}_during"].sel(node=n, gpu=g).values)
                    total = float(ds[f"{key}_total"].sel(node=n, gpu=g).values)
                    counts.append(f"{key.removeprefix('nvlink_')} +{during:.0f} ({total:.0f})"
                                  if np.isfinite(total) else f"{key.removeprefix('nvlink_')} ?")
            lines.append(f"{f'{n}/gpu{int(g)}':<22}NVLink errors during the matrix (since the "
                         f"driver loaded): {', '.join(counts)}")
    lines.append("(pair ratios: < 1 is worse, latency included; peers: the best other link or "
                 "pair of this run; preset: the model's NVLink rate per direction)")
    return lines


def summary_lines(ds):
    """The check of a results file as plain text: the verdict line, the
    findings and notes as judged, every GPU's NVML state, the pair matrix,
    how long it took (``ccbench show``, the report's first cell).  A file
    whose check stopped before its judgement says so and shows the rest."""
    verdict = attr_json(ds, "doctor_verdict")
    lines = []
    if not isinstance(verdict, dict) or not isinstance(verdict.get("line"), str):
        lines.append("verdict: not judged (the file holds no readable attr doctor_verdict)")
        verdict = {}
    else:
        lines.append(verdict["line"])
    for f in verdict.get("findings") or ():
        if isinstance(f, dict):
            where = {"pair": f"<->gpu{f.get('peer')} NVLink",
                     "nvlink": " nvlink"}.get(f.get("kind"), "")
            lines.append(f"- {f.get('node')} gpu{f.get('gpu')}{where}: "
                         + "; ".join(map(str, f.get("reasons") or ())))
    for note in verdict.get("notes") or ():
        lines.append(f"- note: {note}")
    for n in ds["node"].values:
        for g in ds["gpu"].values:
            lines.append(f"{n}/gpu{int(g)}: {state_line(ds, n, g)}")
    if "peer_gbps" in ds and isinstance(verdict.get("scores"), dict):
        lines.extend(pair_lines(ds, verdict["scores"]))
    lines.append(f"check took {ds.attrs.get('gpu_check_s')} s; reproduce: "
                 f"{ds.attrs.get('command') or 'ccbench doctor --local'}")
    return lines


def state_line(ds, n, g):
    """The NVML state of one GPU in one line."""
    # a field the file lacks reads "?", as one NVML could not give
    get = lambda k: float(ds[k].sel(node=n, gpu=g).values) if k in ds else np.nan  # noqa: E731
    num = lambda k, f="{:.0f}": "?" if not np.isfinite(get(k)) else f.format(get(k))  # noqa: E731
    reasons = _nvml.reasons_text(get("clock_event_reasons"))
    missing = attr_json(ds, "nvml_missing", {})
    missing = missing.get(f"gpu{int(g)}", {}) if isinstance(missing, dict) else {}
    return (f"{ds['gpu_name'].sel(node=n, gpu=g).values}: {num('temperature_c')} C, "
            f"{num('power_w')}/{num('power_limit_w')} W, SM {num('sm_clock_mhz')}/"
            f"{num('sm_clock_max_mhz')} MHz, mem {num('mem_clock_mhz')}/"
            f"{num('mem_clock_max_mhz')} MHz, clock reasons: {reasons}; PCIe gen "
            f"{num('pcie_gen')}/{num('pcie_gen_max')} x{num('pcie_width')}/"
            f"x{num('pcie_width_max')}; ECC uncorrected volatile {num('ecc_volatile_uncorrected')}"
            f" aggregate {num('ecc_aggregate_uncorrected')}, corrected volatile "
            f"{num('ecc_volatile_corrected')}; remapped rows {num('remapped_rows_correctable')}+"
            f"{num('remapped_rows_uncorrectable')} (pending {num('remap_pending')}, failed "
            f"{num('remap_failure')}); NVLink {num('nvlink_up')}/{num('nvlink_links')} up; "
            f"XIDs {num('xid_count')}"
            + (f"; NVML could not give: {', '.join(sorted(missing))}" if missing else ""))


def plot(ds, ax=None):
    """Per-GPU bars: each figure's ratio to the preset and to the baseline
    (from the verdict stored with the results); 1 is healthy."""
    import matplotlib.pyplot as plt  # lazy: optional dependency (report extra)
    verdict = attr_json(ds, "doctor_verdict", {})
    scores = verdict.get("scores", {})
    labels = [f"{n}/gpu{int(g)}" for n in ds["node"].values for g in ds["gpu"].values]
    flagged = {f"{f['node']}/gpu{f['gpu']}" for f in verdict.get("findings", [])}
    ax = ax or plt.subplots(figsize=(8, 3.4))[1]
    bars = [(fig, ref) for fig in FIGURES for ref in ("preset", "baseline")]
    width = 0.8 / len(bars)
    colors = dict(zip(FIGURES, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for k, (fig, ref) in enumerate(bars):
        vals = [(scores.get(fig, {}).get(lab, {}) or {}).get(ref) for lab in labels]
        ax.bar(np.arange(len(labels)) + k * width, [np.nan if v is None else v for v in vals],
               width, label=f"{SHORT[fig]} / {ref}", color=colors[fig],
               hatch="//" if ref == "baseline" else None, edgecolor="w")
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(labels)) + 0.4 - width / 2,
                  [f"{lab} *" if lab in flagged else lab for lab in labels])
    ax.set_ylabel("figure / reference")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("per GPU against preset and baseline (* named in the verdict)")
    return ax



def html(results, output, title="ccbench doctor --local", timeout=600):
    """Execute notebooks/doctor_gpu.ipynb for `results` and write `output` (.html)."""
    return _html(results, output, title, timeout, notebook="doctor_gpu.ipynb")


def compare_lines(base_ds, run_ds, base_label, run_label, min_ratio=None):
    """``ccbench compare`` of two GPU check files: every GPU's figures, run
    over baseline, with the bootstrap interval (`health.baseline.score`).
    Returns (lines, [(place, figure, ratio)] below `min_ratio`)."""
    base = _baseline.from_dataset(base_ds, base_label)
    lines = [f"## {run_label} vs {base_label} (GPU checks)",
             f"{'gpu':<22}{'figure':<13}{'baseline':>14}{'run':>14}{'ratio':>8}"
             f"{'90% CI':>13}  verdict"]
    below = []
    for s in _baseline.score(run_ds, base):
        if s.figure in PAIR_FIGURES:  # the pair matrix: a link or a pair, not a GPU
            dim, unit = PAIR_FIGURES[s.figure][:2]
            place, short = f"{s.where['node']}/{named(str(s.where[dim]))}", PAIR_SHORT[s.figure]
            base_v, now_v = f"{s.base:,.1f} {unit}", f"{s.now:,.1f} {unit}"
        else:
            place, short = f"{s.where['node']}/gpu{s.where['gpu']}", SHORT[s.figure]
            base_v, now_v = fmt(s.figure, s.base), fmt(s.figure, s.now)
        ci = f"{s.ci[0]:.2f}-{s.ci[1]:.2f}"
        worse, better = (s.ci[1] < 1, s.ci[0] > 1) if s.better == "higher" else \
            (s.ci[0] > 1, s.ci[1] < 1)
        word = "slower" if worse else "faster" if better else "same"
        lines.append(f"{place:<22}{short:<13}{base_v:>14}{now_v:>14}{s.ratio:>7.2f}x{ci:>13}"
                     f"  {word}")
        kept = s.ratio if s.better == "higher" else 1 / s.ratio  # < 1: worse, either way
        if min_ratio is not None and kept < min_ratio:
            below.append((place, s.figure, s.ratio))
    return lines, below
