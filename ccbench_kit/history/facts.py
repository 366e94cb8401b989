"""What the history keeps of one results file: the run's facts and one
summary row per (collective, algorithm, placement, size).

The facts are the things that, when they change between two runs, explain
a change in performance: the library and driver versions, the nodes, the
environment variables that steer collectives, the kit's version and the
run's configuration (as a digest).
"""
import datetime as dt
import hashlib
import json

import numpy as np

from ..dataset.schema import attr_json, results_kind

# Environment variables that change how a collective runs.  Open MPI's
# launcher also exports per-job OMPI_MCA_* values (job ids, URIs, session
# directories) that differ on every run and steer nothing; they are dropped
# so that they are not reported as "what changed".
STEERING_PREFIXES = ("NCCL_", "OMPI_MCA_", "UCX_", "FI_")
LAUNCHER_SET = ("OMPI_MCA_orte_", "OMPI_MCA_ess", "OMPI_MCA_pmix", "OMPI_MCA_initial_wdir",
                "OMPI_MCA_shmem_RUNTIME_QUERY_hint", "OMPI_MCA_prte_", "OMPI_MCA_plm_rsh_args")
# configuration keys that name where or how a run was written, not what it measured
CONFIG_NOT_MEASURED = ("out", "command", "stats", "checkpoint_every", "timeout")
# the metrics kept per row; the direction says which way is worse
METRICS = {"busbw": "lower", "lat_p50": "higher", "lat_p99": "higher"}
METRIC_UNITS = {"busbw": "GB/s", "lat_p50": "us", "lat_p99": "us"}


def steering_env(env):
    """The collective-steering subset of a run's recorded environment."""
    return {k: str(v) for k, v in sorted((env or {}).items())
            if k.startswith(STEERING_PREFIXES) and not k.startswith(LAUNCHER_SET)}


def config_digest(ds):
    """A short digest of what the run was asked to measure (its `config` attr)."""
    cfg = attr_json(ds, "config", {})
    if not isinstance(cfg, dict):
        cfg = {"config": cfg}
    kept = {k: v for k, v in cfg.items() if k not in CONFIG_NOT_MEASURED}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:12]


def utc_iso(text):
    """A `created` attr as UTC ISO text (naive times are taken as UTC), so
    that runs sort by time as text; left as it is when it is no date."""
    try:
        t = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        return str(text)
    t = t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)
    return t.astimezone(dt.timezone.utc).isoformat(timespec="seconds")


def run_facts(parts):
    """The facts of one run (a {collective: Dataset} mapping from one file)."""
    first = next(iter(parts.values()))
    a = first.attrs
    hosts = attr_json(first, "hosts", []) or []
    if isinstance(hosts, str):
        hosts = [hosts]
    verdict = attr_json(first, "doctor_verdict", None)
    env = attr_json(first, "env", {})
    kind = results_kind(a)
    return {
        "created": utc_iso(a.get("created", "")),
        "kind": kind,
        # the doctor's verdict line: "verdict: none" (healthy), "verdict: node3", ...
        "verdict": (str(verdict.get("line", "")).removeprefix("verdict: ")
                    if isinstance(verdict, dict) else ""),
        "backend": str(a.get("backend", "")),
        "library": str(a.get("library", "")),
        "nccl_version": str(a.get("nccl_version", "")),
        "cuda_driver": str(a.get("cuda_driver", "")),
        "kit_version": str(a.get("kit_version", "")),
        "nranks": int(a.get("nranks", 0) or 0),
        "hosts": sorted(set(map(str, hosts))),
        "env": steering_env(env if isinstance(env, dict) else {}),
        "config_digest": config_digest(first),
        "collectives": list(parts),
    }


def summary_rows(parts):
    """One row per (collective, algorithm, placement, size) of a run:
    busbw (GB/s, avg over iterations of the max over ranks) and the 50th and
    99th percentiles of the iteration time (µs)."""
    rows = []
    for name, ds in parts.items():
        acc = ds.ccb
        busbw = np.asarray(acc.busbw("avg").transpose("algorithm", "placement", "size").values)
        p50 = np.asarray(acc.time("p50").transpose("algorithm", "placement", "size").values)
        p99 = np.asarray(acc.time("p99").transpose("algorithm", "placement", "size").values)
        dtype = str(ds.attrs.get("dtype", ""))
        for i, alg in enumerate(ds["algorithm"].values):
            for j, place in enumerate(ds["placement"].values):
                for k, size in enumerate(ds["size"].values):
                    rows.append((str(name), str(alg), str(place), int(size), dtype,
                                 float(busbw[i, j, k]), float(p50[i, j, k]), float(p99[i, j, k])))
    return rows


def _version(text):
    return text.split(",")[0].strip()


def changed_facts(before, after):
    """What differs between two runs' facts, as short phrases
    ("library Open MPI v4.1.4 → Open MPI v4.1.5", "node7 joined", "NCCL_ALGO unset")."""
    out = []
    for key, label in (("library", "library"), ("nccl_version", "NCCL"),
                       ("cuda_driver", "driver"), ("kit_version", "kit"), ("backend", "backend")):
        a, b = _version(before.get(key, "")), _version(after.get(key, ""))
        if a != b:
            out.append(f"{label} {a or '?'} → {b or '?'}")
    hb, ha = set(before.get("hosts", [])), set(after.get("hosts", []))
    out += [f"{h} joined" for h in sorted(ha - hb)] + [f"{h} left" for h in sorted(hb - ha)]
    eb, ea = before.get("env", {}), after.get("env", {})
    for k in sorted(set(eb) | set(ea)):
        if k not in ea:
            out.append(f"{k} unset")
        elif k not in eb:
            out.append(f"{k}={ea[k]} set")
        elif eb[k] != ea[k]:
            out.append(f"{k} {eb[k]} → {ea[k]}")
    if before.get("config_digest") != after.get("config_digest"):
        out.append(f"config {before.get('config_digest')} → {after.get('config_digest')}")
    return out
