"""``ccbench doctor --local --per-gpu``'s one baseline file: the GPU checks'
figures (and the pair matrix's), plus what ``--per-gpu`` measured through
NCCL: each pair of GPUs' sendrecv rate and the host's all_reduce over all
its GPUs.  A node of 2 GPUs has one pair and no peer to compare it with;
against its own healthy past a busy or degraded NVLink shows (a peer copy
loop between the two GPUs took the host all_reduce from 296 to 166 GB/s
on 2 H200, docs/doctor.md).

`extend` adds the ``--per-gpu`` figures to the file the GPU checks saved;
`judge` scores a ``--per-gpu`` run against it: a pair whose NCCL rate
moved is named as the pair (``HOST gpu0<->gpu1 NVLink``), grouped as the
pair matrix's are (`pair_judge.attribute`); a pair with a GPU the GPU
checks named, or a GPU of a pair they named, joins that finding (a copy
loop between gpu0 and gpu1 slows the NCCL sendrecv of every pair with
either: 0.52-0.60x on 4 H200, where the copy matrix named the pair
alone); the host all_reduce alone (3 GPUs or more, no pair that moved,
nothing the GPU checks named) names the host's NVLink.
"""
import json
import numpy as np
import xarray as xr

from ..._files import atomic_write_text
from ...dataset.io import open_parts
from ...dataset.schema import attr_json
from .. import baseline as _baseline
from ..results import pair_figure
from ..verdict import Verdict
from .judge import GpuFinding, HostFinding, PairFinding
from .pair_judge import Attribution, Evidence, attribute

HOST_FIGURE = "host_allreduce_gbps"
BACKEND = "nccl"


def figures(results_path, pair_baseline_path, host):
    """The ``--per-gpu`` run's figures in a baseline's form ({name: figure}):
    the pairs' rates (`results.figures`, saved by the run to
    `pair_baseline_path`) and the host all_reduce's busbw per repeat (GB/s,
    from the results file's ``doctor_host_allreduce``), node `host`."""
    out = dict(_baseline.load(pair_baseline_path, "--save-baseline").figures)
    parts = open_parts(results_path)
    host_rec = next((attr_json(ds, "doctor_host_allreduce", None) for ds in parts.values()
                     if "doctor_host_allreduce" in ds.attrs), None)
    if host_rec:
        out[HOST_FIGURE] = {"dims": ["node"], "labels": {"node": [host]}, "better": "higher",
                            "units": "GB/s", "samples": [list(host_rec["busbw_gbps"])]}
    return out


def extend(path, per_gpu):
    """Add the `per_gpu` figures ({name: figure}) to the baseline file at
    `path` (saved by the GPU checks), its nodes to the file's identity."""
    with open(path) as f:
        data = json.load(f)
    data["figures"].update(per_gpu)
    nodes = data["identity"].setdefault("nodes", [])
    for fig in per_gpu.values():
        nodes.extend(str(x) for x in fig["labels"]["node"] if str(x) not in nodes)
    atomic_write_text(path, json.dumps(data, indent=1))


def as_datasets(per_gpu):
    """The figures ({name: figure}) as Datasets `baseline.score` reads, one
    a figure (their ``node`` labels differ: GPUs, the host)."""
    out = []
    for name, fig in per_gpu.items():
        samples = np.array(fig["samples"], dtype=float)  # None (not measured): NaN
        out.append(xr.Dataset({name: xr.DataArray(
            samples, dims=[*fig["dims"], _baseline.SAMPLES],
            coords={d: fig["labels"][d] for d in fig["dims"]},
            attrs={"better": fig["better"], "units": fig["units"]})}))
    return out


def judge(per_gpu, base, host, gpu_checks=None):
    """The `Verdict` of the ``--per-gpu`` figures against `base` (a
    `baseline.Baseline`); `gpu_checks`: the GPU checks' `Verdict` of the
    same run (a pair with a GPU or a pair it named joins that finding)."""
    verdict = Verdict()
    pair_fig = pair_figure(BACKEND)
    if pair_fig not in base.figures and HOST_FIGURE not in base.figures:
        verdict.notes.append(f"{base.path} holds no --per-gpu figures (save it with --local "
                             "--per-gpu --save-baseline): the NCCL pairs and the host "
                             "all_reduce are not judged against it")
        return verdict
    kinds, named_pairs, host_named = named_by(gpu_checks)
    evidence, gpus = [], set()
    for s in (s for ds in as_datasets(per_gpu) for s in _baseline.score(ds, base)):
        if s.figure == pair_fig:
            a, b = _gpu(s.where["node"]), _gpu(s.where["peer"])
            gpus |= {a, b}
            if s.flagged and a < b:  # both orders are filled: one reason a pair
                evidence.append(Evidence(a, b, s.figure, (
                    f"NCCL sendrecv gpu{a}<->gpu{b} {s.now / 1e9:,.1f} GB/s is {s.ratio:.2f}x "
                    f"the baseline's {s.base / 1e9:,.1f} GB/s (90% CI {s.ci[0]:.2f}-"
                    f"{s.ci[1]:.2f})"), s.ratio, "baseline"))
        elif s.figure == HOST_FIGURE:
            why = (f"host all_reduce {s.now:,.1f} GB/s is {s.ratio:.2f}x the baseline's "
                   f"{s.base:,.1f} GB/s (90% CI {s.ci[0]:.2f}-{s.ci[1]:.2f})")
            verdict.notes.append(f"{why}; baseline {base.path}")
            if s.flagged:
                evidence.append(Evidence(-1, -1, s.figure, why, s.ratio, "baseline"))
    host_moved = [e for e in evidence if e.a < 0]
    who = attribute([e for e in evidence if e.a >= 0], sorted(gpus), kinds, named_pairs)
    if host_named:  # the copy matrix named the host's NVLink: every pair joins it
        who = Attribution({}, {}, [e for e in evidence if e.a >= 0], [])
    checks_named = bool(kinds or named_pairs or host_named)
    if host_moved and len(gpus) == 2 and not (who.to_gpu or kinds or host_named):
        # two GPUs: the host all_reduce is their one pair's
        who.to_pair.setdefault(tuple(sorted(gpus)), []).extend(host_moved)
        host_moved = []
    if host_moved and (who.to_gpu or who.to_pair or checks_named):
        # the all_reduce runs over every GPU of the host: a GPU or a pair
        # named, here or by the GPU checks, explains it, and it cannot tell
        # the host's NVLink from that GPU (a PCIe copy loop on one H200 took
        # it to 0.74x its baseline, 2026-11-28); its sentence is a note above
        host_moved = []
    for (a, b), es in who.to_pair.items():
        f = PairFinding(host, a, "pair", peer=b)
        for e in es:
            f.add(e.figure, e.reason)
        verdict.findings.append(f)
    for g, es in who.to_gpu.items():
        f = GpuFinding(host, g, kinds.get(g, "nvlink"))
        for e in es:
            f.add(e.figure, e.reason)
        verdict.findings.append(f)
    if who.host or host_moved:
        f = HostFinding(host, -1, "host")
        for e in who.host + host_moved:
            f.add(e.figure, e.reason)
        verdict.findings.append(f)
    verdict.notes += who.unclear_notes(host)
    if who.unclear and not verdict.findings:
        verdict.undecided = "; ".join(who.unclear_notes(host))
    return verdict


def named_by(gpu_checks):
    """What the GPU checks' `Verdict` named: ({gpu: "gpu" or "nvlink"},
    [(a, b)] the pairs, whether the host's NVLink); nothing for None."""
    findings = gpu_checks.findings if gpu_checks is not None else []
    kinds = {f.gpu: f.kind for f in findings if f.kind in ("gpu", "nvlink")}
    return (kinds, [(f.gpu, f.peer) for f in findings if f.kind == "pair"],
            any(f.kind == "host" for f in findings))


def _gpu(node_label):
    """K of a ``--per-gpu`` node label ``HOST gpuK``."""
    return int(str(node_label).rsplit("gpu", 1)[1])
