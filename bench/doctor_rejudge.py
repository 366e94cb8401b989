"""Judge saved `ccbench doctor` results files again with the current
statistics (`health.verdict.judge`), without measuring again:

    python bench/doctor_rejudge.py [--baseline FILE] [--fixture DIR] RESULTS.nc|RAW.json ...

The records are read back from the file's `pairs` and `local` parts (the
plan and the node names from its attributes), or from a raw JSON that
``--fixture`` wrote.  Run it under two checkouts
(``PYTHONPATH=/path/to/other/tree``) to compare two versions of the verdict
on the same measurements.  ``--fixture DIR`` also writes each file's records
as a raw JSON (`results.Raw`) with every time rounded to 4 significant
digits: small enough for tests/data, judged the same way.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.dirname(HERE))  # after PYTHONPATH: another tree's verdict may judge

from ccbench_kit.health import baseline as _baseline, results, verdict  # noqa: E402

DIGITS = 4


def _repeat_values(var, repeat, r, size):
    """One repeat's finite times (s) of `var` (µs) at size index `size`."""
    v = var.isel(placement=0, rank=0, size=size).values[repeat == r] / 1e6
    return [float(x) for x in v[np.isfinite(v)]]


def raw_of(path):
    """The `results.Raw` of a saved doctor results file."""
    import xarray as xr  # lazy: only this script reads the files back
    with xr.open_dataset(path) as ds, xr.open_dataset(path, group="local") as loc:
        nodes = json.loads(ds.attrs["doctor_nodes"])
        plan = json.loads(ds.attrs["doctor_plan"])
        raw = results.Raw(nodes, [], [], plan)
        rep, lrep = ds["repeat"].values, loc["repeat"].values
        for k in range(ds.sizes["algorithm"]):
            a, b = nodes.index(str(ds.node_a.values[k])), nodes.index(str(ds.node_b.values[k]))
            lat = ds.latency.isel(algorithm=k)
            for r in range(plan["repeats"]):
                lat_s, bw_s = _repeat_values(lat, rep, r, 0), _repeat_values(lat, rep, r, 1)
                if lat_s:
                    raw.add("pair", r, {"a": a, "b": b, "lat_s": lat_s, "bw_s": bw_s,
                                        "bw_bytes": plan["bw_bytes"]})
        for k in range(loc.sizes["algorithm"]):
            lat = loc.latency.isel(algorithm=k)
            for r in range(plan["repeats"]):
                lat_s, bw_s = _repeat_values(lat, lrep, r, 0), _repeat_values(lat, lrep, r, 1)
                if lat_s:
                    raw.add("local", r, {"node": k, "ranks": plan["ranks_per_node"],
                                         "lat_s": lat_s, "bw_s": bw_s,
                                         "bw_bytes": plan["local_bytes"]})
        raw.complete = ds.attrs.get("complete") == "true"
    return raw


def judged_then(path):
    """The verdict line the run printed (kept in the file), "" if none."""
    import xarray as xr  # lazy: only this script reads the files back
    if path.endswith(".json"):
        return ""
    with xr.open_dataset(path) as ds:
        return json.loads(ds.attrs.get("doctor_verdict", "{}")).get("line", "")


def trimmed(raw):
    """`raw` with every time rounded to `DIGITS` significant digits."""
    def rnd(xs):
        return [float(f"{x:.{DIGITS - 1}e}") for x in xs]
    for rec in raw.pair + raw.local:
        for key in ("lat_s", "bw_s"):
            rec[key] = rnd(rec[key])
    return raw


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+", metavar="RESULTS.nc|RAW.json")
    p.add_argument("--baseline", default=None, metavar="FILE",
                   help="judge against this saved baseline too (--save-baseline's file)")
    p.add_argument("--fixture", default=None, metavar="DIR",
                   help="also write each file's trimmed records as DIR/NAME.raw.json")
    a = p.parse_args()
    base = _baseline.load(a.baseline, "--baseline") if a.baseline else None
    for path in a.files:
        raw = results.Raw.read(path) if path.endswith(".json") else raw_of(path)
        if a.fixture:
            raw = trimmed(raw)
            name = os.path.basename(path).split(".", 1)[0]
            raw.write(os.path.join(a.fixture, f"{name}.raw.json"))
        v = verdict.judge(raw, baseline=base)
        why = "; ".join([v.undecided] * bool(v.undecided) + [f.sentence() for f in v.findings]
                        + [n for n in v.notes if " not named: " in n])
        then = judged_then(path)
        print(f"{os.path.basename(path)}\t{f'then: {then}' + chr(9) if then else ''}"
              f"now: {v.line()}\t{why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
