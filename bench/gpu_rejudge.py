"""Judge saved ``ccbench doctor --local --per-gpu`` runs again with the
current statistics, without measuring again:

    python bench/gpu_rejudge.py --baseline BASE.json GPU.nc[:NCCL.nc] ...

GPU.nc is the GPU checks' results file (``--out``), NCCL.nc the ``--per-gpu``
part's (``results/doctor-STAMP.nc``, the path its ``results:`` line
printed); BASE.json the file ``--save-baseline`` wrote (the GPU figures,
the pair matrix's, the NCCL pairs' and the host all_reduce).  Prints, per
run, the verdict the run printed (kept in GPU.nc) and the one judged now,
the way ``cli/doctor.main_local`` joins the two parts.  ``--fixture FILE``
also writes every run's GPU Dataset and ``--per-gpu`` figures, rounded to
4 significant digits, as one JSON (tests/data).
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(HERE)  # doctor_rejudge: a saved doctor file's records
sys.path.append(os.path.dirname(HERE))  # after PYTHONPATH: another tree's verdict may judge

from doctor_rejudge import raw_of  # noqa: E402
from ccbench_kit.health import api, baseline as _baseline, results  # noqa: E402
from ccbench_kit.health.gpu import check, judge, per_gpu_baseline  # noqa: E402

DIGITS = 4


def per_gpu_figures(nccl_path, host):
    """The ``--per-gpu`` figures of a saved NCCL doctor file, as the run
    handed them to `per_gpu_baseline.judge` ({name: figure})."""
    out = _baseline.as_dict(results.figures(raw_of(nccl_path)), "--fixture")["figures"]
    import xarray as xr  # lazy: only this script reads the files back
    with xr.open_dataset(nccl_path) as ds:
        rec = json.loads(ds.attrs.get("doctor_host_allreduce", "null"))
    if rec:
        out[per_gpu_baseline.HOST_FIGURE] = {
            "dims": ["node"], "labels": {"node": [host]}, "better": "higher",
            "units": "GB/s", "samples": [list(rec["busbw_gbps"])]}
    return out


def rejudge(ds, per_gpu, base):
    """(line, [sentences]) of one run: the GPU checks, then the NCCL pairs
    against `base`, joined as the command joins them."""
    diag = api.Diagnosis(judge.judge(ds, base), 0)
    diags = [diag]
    if per_gpu is not None:
        past = per_gpu_baseline.judge(per_gpu, base, str(ds["node"].values[0]), diag.verdict)
        diags.append(api.Diagnosis(past, 0))
    line, _ = api.joint_verdict(diags)
    return line, [f.sentence() for d in diags for f in d.verdict.findings], \
        [n for d in diags for n in d.verdict.notes if "host-wide" in n or "not named" in n]


def _rounded(x):
    if isinstance(x, float):
        return float(f"{x:.{DIGITS - 1}e}") if np.isfinite(x) else None
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    return x


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", metavar="GPU.nc[:NCCL.nc]")
    p.add_argument("--baseline", required=True, metavar="FILE")
    p.add_argument("--fixture", default=None, metavar="FILE")
    a = p.parse_args()
    base = _baseline.load(a.baseline, "--baseline")
    fixture = {}
    for run in a.runs:
        gpu_path, _, nccl_path = run.partition(":")
        ds = check.load(gpu_path)
        then = json.loads(ds.attrs.get("doctor_verdict", "{}")).get("line", "")
        per_gpu = per_gpu_figures(nccl_path, str(ds["node"].values[0])) if nccl_path else None
        line, why, notes = rejudge(ds, per_gpu, base)
        print(f"{os.path.basename(gpu_path)}\tthen (GPU checks): {then}\tnow: {line}")
        for s in why + notes:
            print(f"    {s[:300]}")
        if a.fixture:
            keep = ds.drop_vars([v for v in ds.data_vars if "repeat" not in ds[v].dims
                                 and not v.startswith(("nvlink_", "clock", "pcie_", "ecc_",
                                                       "remap_", "xid", "sm_clock"))])
            keep.attrs = {k: v for k, v in ds.attrs.items() if k != "doctor_verdict"}
            keep.attrs["verdict_then"] = then
            fixture[os.path.basename(gpu_path).split(".")[0]] = {
                "gpu": _rounded(keep.to_dict()), "per_gpu": _rounded(per_gpu)}
    if a.fixture:
        with open(a.fixture, "w") as f:
            json.dump(fixture, f, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
