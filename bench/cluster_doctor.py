"""The health check on the testbed: bring it up, inject a fault, run
`ccbench doctor -S` on its 4 nodes, tear down; print the verdict last.

    python bench/cluster_doctor.py [--fault KIND:NODE]          # make cluster-doctor FAULT=...
    python bench/cluster_doctor.py --bench 10 [--kinds all]     # hit rate per fault kind
    python bench/cluster_doctor.py --fault slow-link:node3 --doctor-args=--bisect  # bisection

With --bench N, each fault kind runs N times on a node drawn at random (and
N clean runs); a run hits when the verdict names that node (or its link)
and no other, or, clean, names nobody.  Results go to --json (default
bench/cluster_doctor.json) and a table on stdout.  The testbed stays up
between runs (a fault is applied before and cleared after each).
"""
import argparse
import json
import os
import random
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from testbed import Cluster, Config, FaultUnavailable  # noqa: E402

KINDS = ("slow-link", "congested-link", "cpu-contended", "stopped", "lossy-link")
CCBENCH = os.path.join(os.path.dirname(sys.executable), "ccbench")


def doctor(cluster, out, timeout=15, extra=()):
    """Run the health check on the head node; (verdict line, output, seconds, exit code)."""
    argv = [CCBENCH, "doctor", "-S", "--srun-mpi", "pmix", "--hosts", *cluster.config.node_names,
            "--topology", cluster.topology_file, "--timeout", str(timeout), "--out", out, *extra]
    t0 = time.monotonic()
    proc = cluster.login(argv, timeout=600)
    took = time.monotonic() - t0
    text = proc.stdout + proc.stderr
    lines = [l for l in proc.stdout.splitlines() if l.startswith("verdict:")]
    return (lines[-1] if lines else "verdict: (none printed)"), text, took, proc.returncode


def scores(out):
    """Each statistic's ratio per node, from the verdict kept in the results
    file ({} if the run saved none): what a hit or a miss was decided on."""
    try:
        import xarray as xr
        with xr.open_dataset(out) as ds:
            return json.loads(ds.attrs["doctor_verdict"]).get("scores", {})
    except (OSError, KeyError, ValueError):
        return {}


def left_jobs(cluster, wait=20):
    """Slurm jobs still running or pending `wait` s after a check ended (a
    check must release its allocation; one left behind holds the nodes'
    CPUs and the next check waits for them)."""
    deadline = time.monotonic() + wait
    while True:
        q = cluster.login(["squeue", "-h", "-o", "%i %T"], timeout=30).stdout.split("\n")
        jobs = [l for l in q if l.strip()]
        if not jobs or time.monotonic() > deadline:
            return jobs
        time.sleep(1)


def named(line):
    """{node names} in a verdict line."""
    body = line.split(":", 1)[1]
    return set(re.findall(r"node\d+", body))


def one(fault, name, out, nodes=4, extra=()):
    with Cluster(Config(name=name, nodes=nodes)) as c:
        if fault:
            kind, node = fault.split(":", 1)
            c.fault(kind, node)
        line, text, took, rc = doctor(c, out, extra=extra)
    print(text.rstrip())
    print(f"(health check {took:.0f} s, exit {rc})")
    print(line)
    return 0 if line.startswith("verdict:") and "(none printed)" not in line else 3


def bench(n, kinds, name, path, seed):
    rng = random.Random(seed)
    rows = []
    skipped = set()
    with Cluster(Config(name=name, nodes=4)) as c:
        # kinds interleaved (every kind once, then again): a bench cut short
        # still covers every kind, and the machine's load falls on all alike
        for i in range(n):
            for kind in ["clean", *kinds]:
                if kind in skipped:
                    continue
                node = rng.choice(c.config.node_names) if kind != "clean" else None
                key = None
                out = f"/tmp/{name}-doctor-{kind}-{i}.nc"
                try:
                    if node:
                        key = c.fault(kind, node)
                except FaultUnavailable as e:
                    rows.append({"kind": kind, "skipped": str(e)})
                    print(f"{kind}: skipped: {e}", flush=True)
                    skipped.add(kind)
                    continue
                try:
                    line, text, took, rc = doctor(c, out)
                finally:
                    if key:
                        c.clear(key)
                left = left_jobs(c)
                got = named(line)
                printed = "(none printed)" not in line and "unknown" not in line
                hit = printed and got == ({node} if node else set())
                exact = hit and (node is None or line.split(":", 1)[1].strip() ==
                                 (f"{node} link" if kind.endswith("link") else node))
                load = os.getloadavg()[0]
                rows.append({"kind": kind, "node": node, "verdict": line, "hit": hit,
                             "exact": exact, "seconds": round(took, 1), "exit": rc,
                             "load1": round(load, 1), "jobs_left": left,
                             "scores": scores(out),
                             **({} if hit else {"output": text[-4000:]})})
                print(f"{kind:15s} {node or '-':6s} {line:30s} hit={hit} exact={exact} "
                      f"{took:5.0f} s load {load:.1f}", flush=True)
                with open(path, "w") as f:
                    json.dump(rows, f, indent=1)
    print("\nkind             hits  exact  runs  median s")
    for kind in ["clean", *kinds]:
        rs = [r for r in rows if r["kind"] == kind and "hit" in r]
        if rs:
            secs = sorted(r["seconds"] for r in rs)
            print(f"{kind:15s} {sum(r['hit'] for r in rs):5d} {sum(r['exact'] for r in rs):6d} "
                  f"{len(rs):5d} {secs[len(secs) // 2]:9.0f}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fault", default="", help="KIND:NODE, e.g. slow-link:node3; empty: clean")
    p.add_argument("--bench", type=int, default=0, metavar="N", help="N runs per fault kind")
    p.add_argument("--kinds", default="all", help="comma-separated fault kinds (default all)")
    p.add_argument("--name", default=f"doc{os.getpid() % 100000}", help="testbed instance name")
    p.add_argument("--json", default=os.path.join(HERE, "cluster_doctor.json"))
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--nodes", type=int, default=4, help="testbed nodes (default 4)")
    p.add_argument("--doctor-args", default="", metavar="ARGS",
                   help="more arguments for ccbench doctor, e.g. '--bisect --ranks-per-node 1'")
    a = p.parse_args()
    if a.bench:
        kinds = KINDS if a.kinds == "all" else tuple(a.kinds.split(","))
        return bench(a.bench, kinds, a.name, a.json, a.seed)
    fault = a.fault.strip()
    if fault:
        kind, _, node = fault.partition(":")
        if kind not in KINDS or not re.match(r"^node\d+$", node):
            print(f"FAULT={fault!r}: expected KIND:NODE with KIND one of {', '.join(KINDS)} "
                  "and NODE like node3", file=sys.stderr)
            return 2
    return one(fault, a.name, f"/tmp/{a.name}-doctor.nc", a.nodes, a.doctor_args.split())


if __name__ == "__main__":
    sys.exit(main())
