"""Judge saved `ccbench doctor` results files again with the current
statistics (`health.verdict.judge`), without measuring again:

    python bench/doctor_rejudge.py /tmp/NAME-doctor-*.nc

(the records are read back from the file's `pairs` and `local` parts).
"""
import sys, json, numpy as np, xarray as xr
from ccbench_kit.health import results, verdict
def raw_of(path):
    ds = xr.open_dataset(path); l = xr.open_dataset(path, group="local")
    nodes = json.loads(ds.attrs["doctor_nodes"]); plan = json.loads(ds.attrs["doctor_plan"])
    raw = results.Raw(nodes, [], [], plan)
    rep = ds["repeat"].values; lrep = l["repeat"].values
    for k in range(ds.sizes["algorithm"]):
        a, b = nodes.index(str(ds.node_a.values[k])), nodes.index(str(ds.node_b.values[k]))
        for r in range(plan["repeats"]):
            lat = ds.latency.isel(algorithm=k, placement=0, rank=0, size=0).values[rep == r] / 1e6
            bw = ds.latency.isel(algorithm=k, placement=0, rank=0, size=1).values[rep == r] / 1e6
            lat, bw = lat[np.isfinite(lat)], bw[np.isfinite(bw)]
            if lat.size:
                raw.add("pair", r, {"a": a, "b": b, "lat_s": list(lat), "bw_s": list(bw), "bw_bytes": plan["bw_bytes"]})
    for k in range(l.sizes["algorithm"]):
        for r in range(plan["repeats"]):
            lat = l.latency.isel(algorithm=k, placement=0, rank=0, size=0).values[lrep == r] / 1e6
            bw = l.latency.isel(algorithm=k, placement=0, rank=0, size=1).values[lrep == r] / 1e6
            lat, bw = lat[np.isfinite(lat)], bw[np.isfinite(bw)]
            if lat.size:
                raw.add("local", r, {"node": k, "ranks": 2, "lat_s": list(lat), "bw_s": list(bw), "bw_bytes": plan["local_bytes"]})
    return raw
for p in sys.argv[1:]:
    v = verdict.judge(raw_of(p))
    print(p.split("doctor-")[-1], v.line(), "|", "; ".join(f.sentence()[:90] for f in v.findings))
