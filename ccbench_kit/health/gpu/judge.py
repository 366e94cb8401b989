"""The GPU check's verdict: which GPU, which figure, against what.

Three references, each stated in the verdict:

- **peers**: per repeat, the GPU's figure over the median of the other GPUs
  of the run (same model; measured seconds apart, so load that comes and
  goes falls on all); outlier when the median ratio over repeats is
  <= `PEER_THRESHOLD`, at least `AGREE` of the repeats agree and the
  bootstrap 90 % interval stays below 1 (`health.verdict`'s rule);
- **preset**: the figure over the hardware preset's typical healthy figure
  (`theory.presets.gpu_preset`), same rule with `PRESET_THRESHOLD`;
- **baseline**: a saved healthy run of this cluster (`health.baseline`):
  ratio with its interval, <= 0.8x.  A fault every GPU shares (a driver
  regression, a node-wide power cap) is invisible to peers and seen here.

The pair matrix (`pairs`, two GPUs or more) is judged by `pair_judge`
against the same three references; its findings name a pair
(``HOST gpu1<->gpu3 NVLink``), a GPU's NVLink, or join a GPU's finding.

And the NVML state, judged on its own: uncorrected ECC errors since the
driver loaded, a row remap pending or failed, XIDs during the check,
thermal / hardware slowdown / power-brake clock reasons, a PCIe link
narrower than its maximum (the link *generation* is not judged: an idle
link trains down to save power), an NVLink link down (named ``nvlink``).
"""
import json
import math
from dataclasses import dataclass, field

import numpy as np

from .. import baseline as _baseline
from ...theory.presets import gpu_preset
from ..verdict import AGREE, Verdict, _summary
from . import nvml as _nvml, pair_judge
from .pairs import named as pair_named
from .check import FIGURES

PEER_THRESHOLD = 0.75
PRESET_THRESHOLD = 0.75
SHORT = {"hbm_gbps": "HBM copy", "matmul_tflops": "bf16 matmul", "h2d_gbps": "H2D",
         "d2h_gbps": "D2H"}


@dataclass
class GpuFinding:
    """One GPU (or its NVLink) that stands out, and every reason."""

    node: str
    gpu: int
    kind: str                  # "gpu" or "nvlink"
    moved: list = field(default_factory=list)    # figures / states that moved
    reasons: list = field(default_factory=list)  # one sentence each

    @property
    def label(self):
        return f"{self.node} gpu{self.gpu}" + (" nvlink" if self.kind == "nvlink" else "")

    def add(self, what, reason):
        """`what` moved (a figure or an NVML field), and why."""
        if what not in self.moved:
            self.moved.append(what)
        self.reasons.append(reason)

    def sentence(self):
        return f"{self.label}: " + "; ".join(self.reasons)


@dataclass
class PairFinding(GpuFinding):
    """A pair of GPUs whose copies stand out (`pair_judge`): gpu <-> peer."""

    peer: int = -1

    @property
    def label(self):
        return f"{self.node} gpu{self.gpu}<->gpu{self.peer} NVLink"


@dataclass
class HostFinding(GpuFinding):
    """The host's NVLink as a whole (gpu -1): every pair of its GPUs moved
    (`pair_judge.attribute`), or its all_reduce over every GPU
    (`per_gpu_baseline`)."""

    @property
    def label(self):
        return f"{self.node} NVLink"


def fmt(figure, v):
    unit = FIGURES[figure][0] if figure in FIGURES else ""
    return f"{v:,.0f} {unit}" if np.isfinite(v) else "-"


def judge(ds, baseline=None, preset_of=None, seed=0):
    """The `Verdict` of a GPU check Dataset.

    `baseline`: a `health.baseline.Baseline` (or None); `preset_of(name)`:
    the preset of a GPU model (default `theory.presets.gpu_preset`).
    `verdict.scores[figure][label]` holds {"value", "peers", "preset",
    "baseline"} ratios (None where that reference is missing)."""
    if preset_of is None:
        preset_of = gpu_preset
    rng = np.random.default_rng(seed)
    nodes, gpus = [str(n) for n in ds["node"].values], [int(g) for g in ds["gpu"].values]
    places = [(n, g) for n in nodes for g in gpus]
    verdict, found = Verdict(), {}

    def finding(place, kind="gpu"):
        key = (place, kind)
        if key not in found:
            found[key] = GpuFinding(place[0], place[1], kind)
        return found[key]
    by_place = {(str(s.where["node"]), int(s.where["gpu"]), s.figure): s
                for s in (_baseline.score(ds, baseline) if baseline is not None else [])
                if s.figure in FIGURES}  # the pair matrix's are `pair_judge`'s
    presets = {}
    for n, g in places:
        name = str(ds["gpu_name"].sel(node=n, gpu=g).values)
        presets[(n, g)] = preset_of(name)
    for figure in FIGURES:
        verdict.scores[figure] = {}
        flat = np.stack([ds[figure].sel(node=n, gpu=g).values for n, g in places])  # (place, rep)
        for i, place in enumerate(places):
            mine = flat[i]
            row = {"value": round(float(np.nanmedian(mine)), 2), "peers": None, "preset": None,
                   "baseline": None}
            others = np.delete(flat, i, axis=0)

            def vote(ref, ratios, threshold, against):
                """Score `ratios` (one a repeat); a reason when they pass the rule."""
                med, votes, total, ci = _summary(ratios, False, threshold, rng)
                row[ref] = round(med, 4)
                if total and med <= threshold and ci[1] < 1 and votes >= AGREE * total:
                    finding(place).add(figure, (
                        f"{SHORT[figure]} {fmt(figure, np.nanmedian(mine))} is {med:.2f}x "
                        f"{against} ({votes}/{total} repeats agree; 90% CI "
                        f"{ci[0]:.2f}-{ci[1]:.2f})"))
            if others.shape[0]:
                with np.errstate(all="ignore"):
                    vote("peers", mine / np.nanmedian(others, axis=0), PEER_THRESHOLD,
                         f"the other GPUs' median {fmt(figure, np.nanmedian(others))} (peers)")
            preset = presets[place]
            typical = preset.extra.get(FIGURES[figure][2]) if preset else None
            if typical:
                vote("preset", mine / typical, PRESET_THRESHOLD,
                     f"the preset's typical {fmt(figure, typical)} ({preset.name})")
            s = by_place.get((place[0], place[1], figure))
            if s is not None:
                row["baseline"] = round(s.ratio, 4)
                if s.flagged:
                    finding(place).add(figure, (
                        f"{SHORT[figure]} {fmt(figure, s.now)} is {s.ratio:.2f}x the baseline's "
                        f"{fmt(figure, s.base)} (baseline {baseline.path}; 90% CI "
                        f"{s.ci[0]:.2f}-{s.ci[1]:.2f}; robust z {s.z:.1f})"))
            verdict.scores[figure][f"{place[0]}/gpu{place[1]}"] = row
    for place in places:
        _state(ds, place, finding)
    if "peer_gbps" in ds:
        for n in nodes:
            _pairs(ds, n, gpus, verdict, found, finding, baseline, presets.get((n, gpus[0])), rng)
    verdict.findings = [found[k] for k in sorted(found, key=lambda k: (k[0], k[1]))]
    _notes(ds, verdict, places, presets, baseline)
    return verdict


def _pairs(ds, node, gpus, verdict, found, finding, baseline, preset, rng):
    """The pair matrix's scores and findings of `node` (`pair_judge`)."""
    scores, evidence = pair_judge.score(ds, node, preset, baseline, rng)
    for figure, rows in scores.items():
        verdict.scores.setdefault(figure, {}).update(rows)
    named = [place[1] for place, kind in found if place[0] == node and kind == "gpu"]
    who = pair_judge.attribute(evidence, gpus, named)
    for g, es in who.to_gpu.items():
        f = finding((node, g), "gpu" if g in named else "nvlink")
        for e in es:
            f.add(e.figure, e.reason)
    for (a, b), es in who.to_pair.items():
        f = found.setdefault(((node, a), f"pair{b}"), PairFinding(node, a, "pair", peer=b))
        for e in es:
            f.add(e.figure, e.reason)
    if who.host:
        f = found.setdefault(((node, -1), "host"), HostFinding(node, -1, "host"))
        for e in who.host:
            f.add(e.figure, e.reason)
    links = int(np.isfinite(ds["peer_latency_us"].sel(node=node)).any("repeat").sum()) \
        if "peer_latency_us" in ds else 0
    verdict.notes += pair_judge.shown_notes(node, who.shown, links)
    unclear = who.unclear_notes(node)
    verdict.notes += unclear
    if unclear and not any(k[0][0] == node for k in found):
        verdict.undecided = "; ".join(unclear)
    for g in gpus:
        for what, why, judged in pair_judge.counter_reasons(ds, node, g):
            if judged:
                finding((node, g), "nvlink").add(what, why)
            elif any(place == (node, g) for place, _ in found):
                found[next(k for k in found if k[0] == (node, g))].add(what, why)
            else:
                verdict.notes.append(f"{node} gpu{g}: {why} (corrected by the link: "
                                     "shown, not judged alone)")
    if preset and preset.extra.get("peer_gbps"):
        verdict.notes.append(f"pair preset {preset.name}: {preset.extra.get('peer_source', '')}")
    for pair in json.loads(ds.attrs.get("peer_no_access", "[]")):
        verdict.notes.append(f"{pair_named(pair)}: no peer access (cudaDeviceCanAccessPeer): "
                             "not copied GPU to GPU; ccbench doctor --per-gpu measures it "
                             "through NCCL")
    for g, why in json.loads(ds.attrs.get("nvlink_counters_missing", "{}")).items():
        verdict.notes.append(f"{g}: NVLink error counters not judged ({why})")
    if ds.attrs.get("peer_sm_missing"):
        verdict.notes.append(f"SM copy and SM latency not measured: {ds.attrs['peer_sm_missing']}"
                             " (the copy-engine figures are)")


def _state(ds, place, finding):
    """Findings of the NVML state of one GPU."""
    n, g = place
    get = lambda key: float(ds[key].sel(node=n, gpu=g).values)  # noqa: E731
    checks = [
        ("ecc_volatile_uncorrected", lambda v: v > 0,
         lambda v: f"{v:.0f} uncorrected ECC error(s) since the driver loaded"),
        ("remap_pending", lambda v: v > 0, lambda v: "a row remap is pending (needs a GPU reset)"),
        ("remap_failure", lambda v: v > 0, lambda v: "a row remap failed (replace the GPU)"),
        ("xid_count", lambda v: v > 0,
         lambda v: f"{v:.0f} XID error(s) during the check ({_xids(ds, g)})"),
        ("clock_event_reasons", lambda v: int(v) & _nvml.BAD_REASONS,
         lambda v: f"clocks held back: {_nvml.reasons_text(int(v) & _nvml.BAD_REASONS)} "
                   f"(SM {get('sm_clock_mhz'):.0f} of {get('sm_clock_max_mhz'):.0f} MHz)"),
    ]
    for key, bad, say in checks:
        v = get(key)
        if math.isfinite(v) and bad(v):
            finding(place).add(key, say(v))
    w, wmax = get("pcie_width"), get("pcie_width_max")
    if math.isfinite(w) and math.isfinite(wmax) and w < wmax:
        finding(place).add("pcie_width", f"PCIe link x{w:.0f} of x{wmax:.0f} (gen "
                                         f"{get('pcie_gen'):.0f} of {get('pcie_gen_max'):.0f})")
    up, links = get("nvlink_up"), get("nvlink_links")
    if math.isfinite(links) and links > 0 and up < links:
        finding(place, "nvlink").add("nvlink_up",
                                     f"{links - up:.0f} of {links:.0f} NVLink links down")


def _xids(ds, g):
    return ", ".join(f"XID {x}" for x in json.loads(ds.attrs.get("xids", "{}")).get(f"gpu{g}", []))


def _notes(ds, verdict, places, presets, baseline):
    if len(places) == 1:
        verdict.notes.append("one GPU: no peers in this run; judged against the preset and "
                             "the baseline; no pair of GPUs to copy between")
    names = {p.name: p for p in presets.values() if p}
    for p in names.values():
        verdict.notes.append(f"preset {p.name} ({p.extra.get('gpu_model')}): "
                             f"{p.extra.get('gpu_source', '')}")
    models = {str(ds['gpu_name'].sel(node=n, gpu=g).values) for (n, g), p in presets.items()
              if p is None}
    if models:
        verdict.notes.append(f"no preset for {', '.join(sorted(models))}: add gpu_model and the "
                             "typical figures to a presets file ($CCBENCH_PRESETS)")
    if baseline is None:
        verdict.notes.append("no baseline (--baseline FILE): a fault every GPU shares shows "
                             "only against the preset")
    else:
        verdict.notes.append(f"baseline: {baseline.path} (saved {baseline.created})")
    if ds.attrs.get("pair_matrix_error"):
        verdict.notes.append(f"the pair matrix stopped ({ds.attrs['pair_matrix_error']}); the "
                             "GPU figures above are kept and judged")
    verdict.notes.append(ds.attrs.get("xid_note", ""))
