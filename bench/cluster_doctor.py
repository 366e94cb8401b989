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

--backends tcp,mpi runs every fault once through each of the doctor's
transports, back to back (order turning), so they meet the same fault on the
same node.  Two kinds the peer ratios cannot see (the "invisible" kinds):

- spine-40: the spine between the leaves shaped to 40 % (the verdict
  must name the uplink; the doctor gets --topology);
- two-slow: 2 of the 4 nodes with slow links, checked without a baseline
  (the verdict must say it cannot tell) and with the baseline each backend
  saved on the clean fabric at the start (both nodes named).

One more kind shapes one direction only: one-way-35, the node's own
sending side (its end of the link) at 35 % of the rate, the other
direction untouched (the verdict must name that node's link, and no other).
"""
import argparse
import json
import os
import random
import re
import shlex
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from testbed import Cluster, Config, FaultUnavailable  # noqa: E402

KINDS = ("slow-link", "congested-link", "cpu-contended", "stopped", "lossy-link")
INVISIBLE = ("spine-40", "two-slow")
SPINE_FRACTION = 0.4
ONE_WAY = "one-way-35"
ONE_WAY_FRACTION = 0.35
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


def shape_spine(cluster, fraction):
    """The spine link (both directions) shaped to `fraction` of its rate."""
    from testbed import fabric
    rate = max(1, int(cluster.config.spine_rate_mbit * fraction))
    for end in ("sp1", "sp2"):
        fabric.tbf(cluster.config.netns("fab"), end, rate)


def shape_one_way(cluster, node, fraction):
    """`node`'s sending direction (its namespace's end of the link) shaped
    to `fraction` of the node rate; the direction into it keeps its rate."""
    from testbed import fabric
    rate = max(1, int(cluster.config.rate_mbit * fraction))
    fabric.tbf(cluster.config.netns(node), "eth0", rate)


def judge_run(kind, node, line, with_baseline=False):
    """(hit, exact) of one verdict line: `node` is the faulted node (two
    nodes, "a,b", for two-slow; None clean or spine-40)."""
    printed = "(none printed)" not in line and "unknown" not in line
    body = line.split(":", 1)[1].strip()
    if kind == "spine-40":
        hit = printed and body.startswith("uplink ") and not named(line)
        return hit, hit and "," not in body
    if kind == "two-slow":
        want = set(node.split(","))
        if with_baseline:
            hit = printed and named(line) == want
            return hit, hit and body == ", ".join(f"{n} link" for n in sorted(want))
        hit = body == "cannot tell"
        return hit, hit
    got = named(line)
    hit = printed and got == ({node} if node else set())
    link = kind.endswith("link") or kind == ONE_WAY
    exact = hit and (node is None or body == (f"{node} link" if link else node))
    return hit, exact


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


def bench(n, kinds, name, path, seed, backends=("tcp",), extra=(), clean=True):
    rng = random.Random(seed)
    rows = []
    skipped = set()
    baselines = {}

    def check(kind, node, i, backend, more=(), with_baseline=False):
        tag = f"{kind}-{backend}{'-baseline' if with_baseline else ''}-{i}"
        out = f"/tmp/{name}-doctor-{tag}.nc"
        before = os.getloadavg()
        line, text, took, rc = doctor(c, out, extra=("--backend", backend, *extra, *more))
        left = left_jobs(c)
        hit, exact = judge_run(kind, node, line, with_baseline)
        load = os.getloadavg()
        rows.append({"kind": kind, "backend": backend, "baseline": with_baseline, "node": node,
                     "verdict": line, "hit": hit, "exact": exact, "seconds": round(took, 1),
                     "exit": rc, "load1_before": round(before[0], 1),
                     "load1": round(load[0], 1), "load5": round(load[1], 1), "out": out,
                     "jobs_left": left, "scores": scores(out),
                     **({} if hit else {"output": text[-4000:]})})
        print(f"{kind:15s} {backend:4s} {'B' if with_baseline else ' '} {node or '-':12s} "
              f"{line:40s} hit={hit} exact={exact} {took:5.0f} s load {load[0]:.1f}", flush=True)
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)

    with Cluster(Config(name=name, nodes=4)) as c:
        if "two-slow" in kinds:  # the healthy fabric's figures, one baseline per backend
            for backend in backends:
                baselines[backend] = f"/tmp/{name}-baseline-{backend}.json"
                line, text, took, rc = doctor(c, f"/tmp/{name}-doctor-baseline-{backend}.nc",
                                              extra=("--backend", backend, *extra,
                                                     "--save-baseline", baselines[backend]))
                print(f"baseline {backend}: {line} ({took:.0f} s)", flush=True)
                if not os.path.exists(baselines[backend]):
                    print(text, file=sys.stderr)
                    return 3
        # kinds interleaved (every kind once, then again): a bench cut short
        # still covers every kind, and the machine's load falls on all alike
        for i in range(n):
            order = list(backends) if i % 2 == 0 else list(reversed(backends))
            for kind in ["clean", *kinds] if clean else list(kinds):
                if kind in skipped:
                    continue
                keys = []
                node = None
                try:
                    if kind == "spine-40":
                        shape_spine(c, SPINE_FRACTION)
                    elif kind == "two-slow":
                        two = sorted(rng.sample(c.config.node_names, 2))
                        keys = [c.fault("slow-link", m) for m in two]
                        node = ",".join(two)
                    elif kind == ONE_WAY:
                        node = rng.choice(c.config.node_names)
                        shape_one_way(c, node, ONE_WAY_FRACTION)
                    elif kind != "clean":
                        node = rng.choice(c.config.node_names)
                        keys = [c.fault(kind, node)]
                except FaultUnavailable as e:
                    rows.append({"kind": kind, "skipped": str(e)})
                    print(f"{kind}: skipped: {e}", flush=True)
                    skipped.add(kind)
                    continue
                try:
                    for backend in order:
                        check(kind, node, i, backend)
                        if kind == "two-slow":
                            check(kind, node, i, backend, ("--baseline", baselines[backend]),
                                  with_baseline=True)
                finally:
                    for key in keys:
                        c.clear(key)
                    if kind == "spine-40":
                        shape_spine(c, 1.0)
                    elif kind == ONE_WAY:
                        shape_one_way(c, node, 1.0)
    summarize(rows)
    return 0


def summarize(rows):
    """The hit table of a bench's rows (also of a bench cut short: --summary)."""
    print("\nkind             backend baseline hits  exact  runs  median s  load1")
    runs = [r for r in rows if "hit" in r]
    for kind in dict.fromkeys(r["kind"] for r in runs):
        for backend in dict.fromkeys(r.get("backend", "tcp") for r in runs):
            for with_baseline in (False, True):
                rs = [r for r in runs if r["kind"] == kind and r.get("backend", "tcp") == backend
                      and r.get("baseline", False) == with_baseline]
                if rs:
                    secs = sorted(r["seconds"] for r in rs)
                    loads = sorted(r["load1"] for r in rs)
                    print(f"{kind:15s} {backend:7s} {'yes' if with_baseline else 'no':8s} "
                          f"{sum(r['hit'] for r in rs):5d} {sum(r['exact'] for r in rs):6d} "
                          f"{len(rs):5d} {secs[len(secs) // 2]:9.0f} "
                          f"{loads[0]:.1f}-{loads[-1]:.1f}")


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
                   help="more arguments for ccbench doctor, e.g. '--bisect --ranks-per-node 1' "
                        "(make cluster-doctor DOCTOR_ARGS=...)")
    p.add_argument("--backends", default="tcp", metavar="LIST",
                   help="--bench: the doctor's transports, each run on every fault "
                        "(e.g. tcp,mpi)")
    p.add_argument("--no-clean", action="store_true",
                   help="--bench: skip the clean run of each round (faulted runs only)")
    p.add_argument("--summary", default="", metavar="JSON",
                   help="print the hit table of a bench's JSON (one cut short too) and exit")
    a = p.parse_args()
    if a.summary:
        with open(a.summary) as f:
            summarize(json.load(f))
        return 0
    extra = shlex.split(a.doctor_args)
    if a.bench:
        kinds = KINDS if a.kinds == "all" else tuple(a.kinds.split(","))
        known = KINDS + INVISIBLE + (ONE_WAY,)
        unknown = [k for k in kinds if k not in known]
        if unknown:
            print(f"--kinds: unknown kind {unknown[0]!r}; one of {', '.join(known)}",
                  file=sys.stderr)
            return 2
        return bench(a.bench, kinds, a.name, a.json, a.seed, tuple(a.backends.split(",")),
                     extra, clean=not a.no_clean)
    fault = a.fault.strip()
    if fault:
        kind, _, node = fault.partition(":")
        if kind not in KINDS or not re.match(r"^node\d+$", node):
            print(f"FAULT={fault!r}: expected KIND:NODE with KIND one of {', '.join(KINDS)} "
                  "and NODE like node3", file=sys.stderr)
            return 2
    return one(fault, a.name, f"/tmp/{a.name}-doctor.nc", a.nodes, extra)


if __name__ == "__main__":
    sys.exit(main())
