"""An algorithm/protocol sweep as the performance CSV of NCCL's tuner example.

NVIDIA/nccl ``plugins/tuner/example/scripts/optimize_config.py`` reads::

    collective,size_bytes,algorithm,protocol,channels,nodes,ranks,pipeOps,regBuff,bandwidth_gbps,latency_us

and writes, per size range, the fastest (algorithm, protocol, channels) as
the tuner plugin's ``nccl_tuner.conf``.  One row here per (variant, size)
that ran:

- ``collective``: the tuner's names (allreduce, allgather, reducescatter,
  broadcast, reduce); other collectives have no tuner entry and are left out;
- ``size_bytes``: the Dataset's size, which is the ``nBytes`` NCCL hands the
  tuner (nccl-tests' convention: the total for all_gather/reduce_scatter);
- ``algorithm``/``protocol``/``channels``: what NCCL *ran* for that variant
  and size (attr ``nccl_ran``, from NCCL's TUNING log: ``RING/LL x4ch``);
  without it, the variant's name (``nccl:ring/ll``) and channels -1;
  a size whose protocol is known neither way is left out and counted;
- ``nodes``: hosts of the run; ``ranks``: its ranks; ``pipeOps`` -1;
  ``regBuff``: 1/0 from the run's ``register`` attr (-1 when unknown);
- ``bandwidth_gbps``: busbw, ``latency_us``: the time (`stat` over
  iterations of the max over ranks).
"""
import csv
import io
import json
import re

import numpy as np

from ...dataset.schema import attr_json

COLUMNS = ("collective", "size_bytes", "algorithm", "protocol", "channels", "nodes", "ranks",
           "pipeOps", "regBuff", "bandwidth_gbps", "latency_us")
# the tuner plugin's ncclFunc names (plugin.c collTypeFromString)
TUNER_COLLECTIVES = {"all_reduce": "allreduce", "all_gather": "allgather",
                     "reduce_scatter": "reducescatter", "broadcast": "broadcast",
                     "reduce": "reduce"}
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")
_RAN = re.compile(r"^\s*([A-Za-z_]+)/([A-Za-z0-9]+)(?:\s+x(\d+)ch)?")


def _from_name(name):
    """(algorithm, protocol) a variant's name forces: ``nccl:ring/ll`` -> (ring, ll)."""
    if not name.startswith("nccl:"):
        return None, None
    algo, _, proto = name[5:].lower().partition("/")
    return (algo if algo in ALGORITHMS else None), (proto if proto in PROTOCOLS else None)


def _reg_buff(ds):
    v = str(ds.attrs.get("register", "")).lower()
    return {"true": 1, "1": 1, "false": 0, "0": 0}.get(v, -1)


def tuner_rows(ds, stat="avg", placement="out_of_place"):
    """(rows, left_out): the CSV rows of one Dataset, and a count of what was not written.

    Raises
    ------
    ValueError
        The collective has no tuner entry.
    """
    coll = str(ds.attrs.get("collective"))
    if coll not in TUNER_COLLECTIVES:
        raise ValueError(f"{coll} has no NCCL tuner entry (the tuner tunes "
                         + ", ".join(TUNER_COLLECTIVES) + ")")
    places = [str(p) for p in ds["placement"].values]
    pl = placement if placement in places else places[0]
    time = ds.ccb.time(stat).sel(placement=pl).transpose("algorithm", "size").values
    busbw = ds.ccb.busbw(stat).sel(placement=pl).transpose("algorithm", "size").values
    ran = attr_json(ds, "nccl_ran", {}) or {}
    hosts = attr_json(ds, "hosts", []) or []
    nodes = len(set(hosts)) if hosts else -1
    ranks = int(ds.attrs.get("nranks") or ds.sizes["rank"])
    reg = _reg_buff(ds)
    rows, left = [], {"not run": 0, "protocol unknown": 0}
    for ai, alg in enumerate(str(a) for a in ds["algorithm"].values):
        by_size = ran.get(alg, {}) if isinstance(ran, dict) else {}
        name_algo, name_proto = _from_name(alg)
        for si, size in enumerate(int(s) for s in ds["size"].values):
            t = float(time[ai, si])
            if not np.isfinite(t) or t <= 0:
                left["not run"] += 1
                continue
            algo, proto, channels = name_algo, name_proto, -1
            m = _RAN.match(str(by_size.get(str(size), "")))
            if m:
                algo, proto = m.group(1).lower(), m.group(2).lower()
                channels = int(m.group(3)) if m.group(3) else -1
            if algo not in ALGORITHMS or proto not in PROTOCOLS:
                left["protocol unknown"] += 1
                continue
            rows.append({"collective": TUNER_COLLECTIVES[coll], "size_bytes": size,
                         "algorithm": algo, "protocol": proto, "channels": channels,
                         "nodes": nodes, "ranks": ranks, "pipeOps": -1, "regBuff": reg,
                         "bandwidth_gbps": float(busbw[ai, si]), "latency_us": t})
    return rows, {k: v for k, v in left.items() if v}


def tuner_csv(parts, stat="avg", placement="out_of_place"):
    """(text, notes): the CSV of every tunable result set in `parts` ({name: Dataset})."""
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    notes = []
    for name, ds in parts.items():
        try:
            rows, left = tuner_rows(ds, stat, placement)
        except ValueError as e:
            notes.append(f"{name}: {e}; left out")
            continue
        for r in rows:
            w.writerow({**r, "bandwidth_gbps": f"{r['bandwidth_gbps']:.9g}",
                        "latency_us": f"{r['latency_us']:.9g}"})
        if left:
            notes.append(f"{name}: {len(rows)} rows; left out " + json.dumps(left))
    return out.getvalue(), notes
