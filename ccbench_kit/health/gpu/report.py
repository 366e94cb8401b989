"""The GPU check for people: one table a node (every GPU's figures and
their ratios to peers, preset and baseline), the NVML state, and bars."""
import json

import numpy as np

from . import nvml as _nvml
from .check import FIGURES
from .judge import SHORT, fmt


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
    for f in verdict.findings:
        lines.append(f.sentence())
    return "\n".join(lines)


def state_line(ds, n, g):
    """The NVML state of one GPU in one line."""
    get = lambda k: float(ds[k].sel(node=n, gpu=g).values)  # noqa: E731
    num = lambda k, f="{:.0f}": "?" if not np.isfinite(get(k)) else f.format(get(k))  # noqa: E731
    reasons = _nvml.reasons_text(get("clock_event_reasons"))
    missing = json.loads(ds.attrs.get("nvml_missing", "{}")).get(f"gpu{int(g)}", {})
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
    import matplotlib.pyplot as plt
    verdict = json.loads(ds.attrs.get("doctor_verdict") or "{}")
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
    from pathlib import Path

    from ...errors import ConfigError
    from ...report.driver import execute, write_html
    output = Path(output)
    if output.suffix != ".html":
        raise ConfigError(f"{output}: the report is HTML; name it NAME.html", "--report")
    execute("doctor_gpu.ipynb", output, {"results": str(Path(results).resolve()),
                                         "title": title}, timeout=timeout)
    write_html(output.with_suffix(".ipynb"), output, title=title)
    return str(output)
