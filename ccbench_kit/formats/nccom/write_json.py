"""nccom-test's ``--report-to-json-file`` format.

One row per size (and algorithm) with nccom-test's keys, in its order::

    {"results": [{"size(B)": 1024, "count(elems)": 256, "type": "fp32",
                  "algbw(GB/s)": 0.1655, "busbw(GB/s)": 0.1604,
                  "time:avg(us)": 6.19}]}

``total_input_size(B)`` / ``total_output_size(B)`` (each rank's bytes, as
nccom-test's ``--show-input-output-size``) and ``algorithm`` are added on
request; ``algorithm`` always when several algorithms ran.  nccom-test has
no in-place runs: rows are the out-of-place results (in-place when only
those ran).  Units and counts are the guide's: algbw and busbw in GiB/s
(2^30 B/s, from the first statistic), ``count(elems)`` the elements of
``size(B)`` (the total for all_gather, reduce_scatter and alltoall, where
the kit's own ``count`` is one rank's); numbers keep full precision.  A
``config`` object describes the run (nccom-test "persists config and
results"; its keys here are the kit's).
"""
from .common import GIB, nccom_count

_GB_TO_GIB = 1e9 / GIB  # the kit's bandwidths are GB/s (1e9 B/s)


def nccom_test_json(ds, stats=("avg",), rank_stat="max", show_algorithm=False, show_io=False):
    """The JSON document (a dict) for one collective's Dataset."""
    df = ds.ccb.summary(stats=stats, rank_stat=rank_stat)
    placements = [str(p) for p in ds["placement"].values]
    placement = "out_of_place" if "out_of_place" in placements else placements[0]
    stat_names = [c[1][len("time:"):] for c in df.columns
                  if isinstance(c, tuple) and c[0] == placement and c[1].startswith("time:")]
    io = {int(s): (int(i), int(o)) for s, i, o in
          zip(ds["size"].values, ds["in_bytes"].values, ds["out_bytes"].values)}
    with_alg = show_algorithm or ds.sizes["algorithm"] > 1
    rows = []
    for _, r in df.iterrows():
        row = {"size(B)": int(r[("size", "")]),
               "count(elems)": nccom_count(r[("size", "")], ds.attrs.get("dtype"))}
        if show_io:
            row["total_input_size(B)"], row["total_output_size(B)"] = io[int(r[("size", "")])]
        row["type"] = str(r[("type", "")])
        row["algbw(GB/s)"] = float(r[(placement, "algbw")]) * _GB_TO_GIB
        row["busbw(GB/s)"] = float(r[(placement, "busbw")]) * _GB_TO_GIB
        for s in stat_names:
            row[f"time:{s}(us)"] = float(r[(placement, f"time:{s}")])
        if with_alg:
            row["algorithm"] = str(r[("algorithm", "")])
        rows.append(row)
    a = ds.attrs
    config = {
        "collective": a.get("collective"), "nranks": int(a.get("nranks", ds.sizes["rank"])),
        "group_size": int(ds.ccb.nranks), "type": a.get("dtype"), "op": a.get("op"),
        "root": int(a.get("root", -1)), "iters": int(a.get("iters", ds.sizes["iteration"])),
        "warmup_iters": int(a.get("warmup", 0)), "placement": placement,
        "algorithms": [str(x) for x in ds["algorithm"].values], "stats": stat_names,
        "rank_stat": rank_stat, "backend": a.get("backend"), "library": a.get("library"),
        "command": a.get("command"),
        "units": {"algbw(GB/s)": "GiB/s (2^30 B/s), as nccom-test's guide defines it",
                  "count(elems)": "size(B) / item size, as nccom-test's guide defines it"},
    }
    return {"config": config, "results": rows}
