"""nccl-tests' JSON output (``-J FILE``, format version 3).

``results[].{out_of_place,in_place}.{time|cpu_time,alg_bw,bus_bw,nwrong}``
are the printed numbers; with ``-I``, ``*_per_iter.times_us`` fills
`iteration` and ``per_process_max_times_us`` fills `rank` (one row per
process).  nccl-tests writes NaN as the string ``"nan"``.
"""
import math

import numpy as np

from . import meta as meta_
from ..common.build import to_dataset
from .rows import PLACEMENTS, Meta, Rows, sweep_length, tables_from_rows
from ..common.source import half_of, json_line_finder, json_number, key_line, loads_json

NAME = "nccl-tests JSON"
_ENV_PREFIXES = ("NCCL_", "CUDA_", "OMPI_", "FI_", "UCX_", "NVIDIA_", "SLURM_", "PMIX_")


def sniff(src, head):
    h = head.lstrip()
    return h.startswith("{") and '"size(B)"' not in head and (
        '"nccl_version"' in head or '"bus_bw"' in head
        or ('"out_of_place"' in head and '"results"' in head))


def _int(value, src, line, what, default=None):
    if value is None and default is not None:
        return default
    out = None
    if isinstance(value, str):
        try:
            out = int(value.strip())
        except ValueError:
            pass
    elif isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value) and float(value).is_integer():
        out = int(value)
    if out is None or abs(out) >= 1 << 62:
        raise src.error(line, f"a whole number for {what}", value)
    return out


def _dict(value, src, line, what):
    if not isinstance(value, dict):
        raise src.error(line, f"an object for {what}", type(value).__name__)
    return value


def _series(value, src, line, what):
    if not isinstance(value, list):
        raise src.error(line, f"a list of numbers for {what}", type(value).__name__)
    return np.array([json_number(v, src, line, what) for v in value], dtype=float)


def _per_iter(block, src, line, p):
    if block is None:
        return None
    block = _dict(block, src, line, f"{p}_per_iter")
    procs = block.get("per_process_max_times_us")
    if isinstance(procs, list) and procs:
        rows = [_series(r, src, line, f"{p}_per_iter.per_process_max_times_us") for r in procs]
        width = max(len(r) for r in rows)
        out = np.full((len(rows), width), np.nan)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return out
    if "times_us" in block:
        return _series(block["times_us"], src, line, f"{p}_per_iter.times_us")[None, :]
    return None


def _rows(src, results, line_of):
    n = len(results)
    rows = Rows(size=np.zeros(n, np.int64), count=np.zeros(n, np.int64),
                type=np.empty(n, object), redop=np.empty(n, object),
                root=np.zeros(n, np.int64), line=np.zeros(n, np.int64),
                time={}, algbw={}, busbw={}, time_hu={}, algbw_hu={}, busbw_hu={}, wrong={},
                algorithm=np.full(n, "", dtype=object))
    cols = {p: {k: np.full(n, np.nan) for k in ("time", "algbw", "busbw", "time_hu",
                                                "algbw_hu", "busbw_hu")} for p in PLACEMENTS}
    wrong = {p: np.full(n, -1, np.int64) for p in PLACEMENTS}
    seen = set()
    per_iter = {p: [None] * n for p in PLACEMENTS}
    cputime = False
    for i, r in enumerate(results):
        line = line_of(i)
        r = _dict(r, src, line, f"results[{i}]")
        for key in ("size", "count", "type"):
            if key not in r:
                raise src.error(line, f"'{key}' in results[{i}]", ", ".join(map(str, r)))
        rows.size[i] = _int(r["size"], src, line, "size")
        rows.count[i] = _int(r["count"], src, line, "count")
        if rows.size[i] < 0 or rows.count[i] < 0:
            raise src.error(line, "a size and count of at least 0", r["size"])
        rows.type[i] = str(r["type"])
        rows.redop[i] = str(r.get("redop", "none"))
        rows.root[i] = _int(r.get("root", -1), src, line, "root", -1)
        rows.line[i] = line or 0
        # nccl-tests leaves experiment_name empty; the kit's exporter names
        # each row's algorithm there
        name = r.get("experiment_name")
        rows.algorithm[i] = name.strip() if isinstance(name, str) else ""
        for p in PLACEMENTS:
            body = r.get(p)
            if body is None:
                continue
            pline = key_line(src, line, p)
            body = _dict(body, src, pline, f"results[{i}].{p}")
            seen.add(p)
            tkey = "cpu_time" if "cpu_time" in body else "time"
            cputime |= tkey == "cpu_time"
            for k, key in (("time", tkey), ("algbw", "alg_bw"), ("busbw", "bus_bw")):
                if key not in body:
                    raise src.error(pline, f"'{key}' in results[{i}].{p}", ", ".join(map(str, body)))
                v = body[key]
                cols[p][k][i] = json_number(v, src, key_line(src, pline, key), f"{p}.{key}")
                cols[p][k + "_hu"][i] = half_of(v)
            nw = body.get("nwrong")
            if nw is not None:
                w = json_number(nw, src, key_line(src, pline, "nwrong"), f"{p}.nwrong")
                wrong[p][i] = int(w) if np.isfinite(w) else -1
            per_iter[p][i] = _per_iter(r.get(f"{p}_per_iter"), src,
                                       key_line(src, line, f"{p}_per_iter"), p)
    for p in PLACEMENTS:
        if p not in seen:
            continue
        for k in ("time", "algbw", "busbw"):
            getattr(rows, k)[p] = cols[p][k]
            getattr(rows, k + "_hu")[p] = np.nan_to_num(cols[p][k + "_hu"])
        rows.wrong[p] = wrong[p]
        if any(a is not None for a in per_iter[p]):
            rows.per_iter[p] = per_iter[p]
    return rows, cputime


def parse(src, hints):
    doc = loads_json(src)
    if not isinstance(doc, dict):
        raise src.error(1, "a JSON object with nccl-tests' 'results'", type(doc).__name__)
    version = doc.get("version")
    results = doc.get("results")
    if not isinstance(results, list):
        raise src.error(json_line_finder(src, "results")(0) or 1,
                        "a 'results' list (nccl-tests -J format)", type(results).__name__)
    if not results:
        raise src.error(json_line_finder(src, "results")(0) or 1,
                        "at least one entry in 'results'")
    rows, cputime = _rows(src, results, json_line_finder(src, "size"))
    if not rows.time:
        raise src.error(json_line_finder(src, "results")(0) or 1,
                        "out_of_place or in_place numbers in 'results'")

    cfg = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    args = doc.get("args") if isinstance(doc.get("args"), list) else []
    env = {}
    for e in doc.get("env") if isinstance(doc.get("env"), list) else []:
        if isinstance(e, str) and "=" in e and e.startswith(_ENV_PREFIXES):
            k, v = e.split("=", 1)
            env[k] = v
    # config values are the run's description, not results: odd ones are dropped
    cfg = {k: v for k, v in cfg.items()
           if k == "devices" or (isinstance(v, (int, float, str)) and not isinstance(v, bool)
                                 and (not isinstance(v, float) or math.isfinite(v)))
           or v in ("true", "false")}
    if not isinstance(cfg.get("devices"), list):
        cfg["devices"] = []
    devices = [d for d in cfg["devices"] if isinstance(d, dict)]
    per_proc = 1
    try:
        per_proc = max(1, int(cfg.get("nthreads", 1)) * int(cfg.get("ngpus", 1)))
    except (TypeError, ValueError):
        pass
    nranks = len(devices) * per_proc if devices else None
    group_size = None
    groups = {}
    for d in devices:
        g = str(d.get("group", 0))
        groups[g] = groups.get(g, 0) + per_proc
    if len(groups) > 1 and len(set(groups.values())) == 1:
        group_size = next(iter(groups.values()))
    hosts = sorted({str(d.get("hostname", "")) for d in devices} - {""})

    def dev_name(d):
        base = str(d.get("device_info", "")).strip()
        if d.get("device_hex"):
            base += f" [{d['device_hex']}]"
        return base if per_proc == 1 else f"{per_proc} GPUs from {base}"

    step = cfg.get("step_factor"), cfg.get("step_bytes")
    n = sweep_length(cfg.get("minimum_bytes"), cfg.get("maximum_bytes"), *step)
    attrs = {"backend": "nccl", "warmup": cfg.get("warmup_iters", ""),
             "iters": cfg.get("iterations", ""), "hosts": hosts, "env": env,
             "command": " ".join(map(str, args)),
             "library": f"NCCL {meta_.nccl_version(doc.get('nccl_version'))}"
             if meta_.nccl_version(doc.get("nccl_version")) else "",
             "json_version": version if isinstance(version, (int, str)) else ""}
    start = doc.get("start_time")
    if isinstance(start, str) and start.strip():
        attrs["created"] = start.strip().replace(" ", "T")
    for key, name in (("aggregated_iterations", "agg_iters"), ("graph", "graph_launches"),
                      ("per_iter_skip", "per_iter_skip"), ("blocking_collectives", "blocking")):
        if key in cfg and not isinstance(cfg[key], (dict, list)):
            attrs[name] = cfg[key]
    for key in ("out_of_bounds", "average_bus_bandwidth"):
        if isinstance(doc.get(key), dict):
            attrs["reported_" + key] = {k: v for k, v in doc[key].items()
                                        if isinstance(v, (int, float, str))}
    errs = [e for e in doc.get("errors") or [] if isinstance(e, str) and e]
    if errs:
        attrs["errors"] = errs

    has_iter = bool(rows.per_iter)
    procs = max((a.shape[0] for p in rows.per_iter for a in rows.per_iter[p] if a is not None),
                default=1)
    meta = Meta(fmt=f"{NAME} v{version}", line=json_line_finder(src, "results")(0) or 1,
                collective=meta_.collective_of_program(args[0]) if args else None,
                nranks=nranks, group_size=group_size, sweep=[0] * n if n else None,
                algorithm=meta_.algorithm_name(env), check_time=not cputime,
                aggregated=meta_.aggregated_text(cfg.get("iterations"),
                                                 cfg.get("aggregated_iterations"), cputime)
                + ("; latency holds -I's per-iteration CUDA-event times" if has_iter else ""),
                attrs=attrs)
    if has_iter and procs > 1:
        meta.ranks = list(range(procs))
        if len(devices) == procs:
            meta.hosts = [str(d.get("hostname", "")) for d in devices]
            meta.devices = [dev_name(d) for d in devices]
        else:
            meta.hosts, meta.devices = [""] * procs, [""] * procs
        meta.rank_meaning = ("rank = process (per_process_max_times_us: each process's max "
                             "over its GPUs)")
    elif has_iter:
        meta.rank_meaning = "rank -1 = the max over all processes and GPUs (times_us)"
    return [to_dataset(t, hints) for t in tables_from_rows(src, rows, meta)]
