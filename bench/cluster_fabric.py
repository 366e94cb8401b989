"""The kit on the emulated Slurm cluster (testbed/): does it see the fabric?

(a) α-β fit of sendrecv between two nodes of one leaf: β must be within 10%
    of the shaped rate, α within 25% of the 8-byte sendrecv time measured in
    the same run.
(b) ring all_reduce on 4 nodes, the topology-sorted host order (node1 node2
    node3 node4: the ring crosses the spine once each way) against the order
    that crosses it four times (node1 node3 node2 node4: two flows share each
    direction of the spine), rounds interleaved in one allocation: the
    sorted order must reach >= 1.7x the busbw at 16 MiB and above.

Every run is ``ccbench run -S --slurm-job-id J`` on the head node, inside
one ``salloc --no-shell`` allocation.  Run as root from the repository root:

    .venv/bin/python bench/cluster_fabric.py [--rate 100] [--rounds 3]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from testbed import Cluster, Config  # noqa: E402

CCBENCH = os.path.join(os.path.dirname(sys.executable), "ccbench")
SORTED = ["node1", "node2", "node3", "node4"]
CROSSING = ["node1", "node3", "node2", "node4"]


def ccbench(cluster, job, args, out, env=None):
    cmd = [CCBENCH, "run", *args, "-S", "--slurm-job-id", job, "--out", out]
    proc = cluster.login(cmd, timeout=900, env=env)  # srun passes the environment on
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    import ccbench_kit as ccb
    return ccb.load(out)


# Open MPI's TCP transport sends a message over its eager limit (64 KiB) by
# rendezvous: a request, the receiver's go-ahead, then the data.  In a
# sendrecv both ranks do that at once over one socket each way, and a rank's
# go-ahead is queued behind its own data already on that socket: when it
# loses that race, the peer's data waits until the rank's own has crossed
# the link, and the two directions take turns (exactly half the rate).  How
# often it loses depends on timing (more often on a loaded machine).  That
# is MPI's protocol, not the link, so (a) is measured twice in the same
# allocation: as Open MPI comes, and with every message sent eagerly (no
# go-ahead to wait for), which is what measures the link.
EAGER_TCP = {"OMPI_MCA_btl_tcp_eager_limit": str(16 << 20),
             "OMPI_MCA_btl_tcp_max_send_size": str(16 << 20)}


def alpha_beta(cluster, job, workdir, rate_mbit, pair, env=None, tag="default"):
    """α and β of a sendrecv sweep, by the rule the kit's reports use
    (`report.analysis.fit_models`, fixed before this benchmark was run): one
    α-β line where it holds; where it does not, two, split where the
    protocol changes, with α from the piece below the split (the time of a
    message that the link's bucket passes whole) and β from the piece above
    (the link's rate)."""
    from ccbench_kit.report.analysis import fit_models
    from ccbench_kit.theory.fit import fit
    args = ["sendrecv", "-r", "2", "--hosts", *pair, "-b", "8", "-e", "8M", "-f", "2", "-n", "9",
            "-w", "2", "-z", "1", "--placement", "out_of_place"]
    ds = ccbench(cluster, job, args, os.path.join(workdir, f"sendrecv-{tag}.nc"), env)
    shaped = rate_mbit * 1e6 / 8                      # B/s
    out = {"pair": pair, "hosts": list(ds.host.values), "shaped_MBps": shaped / 1e6,
           "slurm_job_id": ds.attrs.get("slurm_job_id"), "launcher": ds.attrs.get("launcher"),
           "tag": tag}
    for stat in ("median", "min"):
        model = fit_models(ds, fit(ds, stat=stat))["mpi"]
        t8 = float(ds.ccb.time(stat).sel(size=8, algorithm="mpi",
                                         placement="out_of_place")) * 1e-6
        row = {"kind": model["kind"], "text": model["text"], "t8_us": t8 * 1e6}
        if model["pieces"]:
            lo, hi = model["pieces"][0], model["pieces"][-1]
            bw = 1 / hi.beta if hi.beta > 0 else float("inf")
            row.update(alpha_us=lo.alpha * 1e6, alpha_ratio=lo.alpha / t8, beta_MBps=bw / 1e6,
                       beta_ratio=bw / shaped, alpha_from=lo.size_range, beta_from=hi.size_range)
        t = ds.ccb.time(stat).sel(algorithm="mpi", placement="out_of_place") * 1e-6
        row["rate_per_size"] = {int(s): float(s / t.sel(size=s)) / shaped
                                for s in ds["size"].values if s >= 8 << 10}
        out[stat] = row
    return out


def print_alpha_beta(ab):
    from ccbench_kit.units import format_size
    print(f"(a) sendrecv {ab['pair'][0]}<->{ab['pair'][1]}, {ab['tag']} (job "
          f"{ab['slurm_job_id']}, {ab['launcher']}), shaped {ab['shaped_MBps']:.2f} MB/s:")
    ok_all = True
    for stat in ("median", "min"):
        r = ab[stat]
        rates = " ".join(f"{format_size(s)}:{v:.2f}" for s, v in r["rate_per_size"].items())
        print(f"    {stat:6s}: fit {r['kind']}: {r['text']}")
        print(f"            rate / shaped per size: {rates}")
        if "beta_ratio" not in r:
            ok_all = False
            print("            -> FAIL (no fit)")
            continue
        ok = abs(r["beta_ratio"] - 1) <= 0.10 and abs(r["alpha_ratio"] - 1) <= 0.25
        ok_all &= ok
        print(f"            beta {r['beta_MBps']:.2f} MB/s = {r['beta_ratio']:.3f} of shaped "
              f"(sizes {format_size(r['beta_from'][0])}-{format_size(r['beta_from'][1])}); "
              f"alpha {r['alpha_us']:.1f} us vs 8 B sendrecv {r['t8_us']:.1f} us = "
              f"{r['alpha_ratio']:.3f} (sizes {format_size(r['alpha_from'][0])}-"
              f"{format_size(r['alpha_from'][1])}) -> {'PASS' if ok else 'FAIL'}", flush=True)
    return ok_all


def ring_orders(cluster, job, workdir, rounds, sizes):
    busbw = {"sorted": {s: [] for s in sizes}, "crossing": {s: [] for s in sizes}}
    for r in range(rounds):
        # interleaved, and the first order alternates: drift in the machine's
        # load hits both orders alike
        for name in (("sorted", "crossing") if r % 2 == 0 else ("crossing", "sorted")):
            hosts = SORTED if name == "sorted" else CROSSING
            t0 = time.time()
            ds = ccbench(cluster, job, ["all_reduce", "-r", "4", "--hosts", *hosts,
                                        "--algorithms", "ring", "-b", str(min(sizes)),
                                        "-e", str(max(sizes)), "-f", "2", "-n", "3", "-w", "1",
                                        "--placement", "out_of_place"],
                         os.path.join(workdir, f"ring-{name}-{r}.nc"))
            assert list(ds.host.values) == hosts, (list(ds.host.values), hosts)
            bw = ds.ccb.busbw("median").sel(algorithm="ring", placement="out_of_place")
            for s in sizes:
                busbw[name][s].append(float(bw.sel(size=s)))
            print(f"  round {r + 1} {name:8s} " + "  ".join(
                f"{s >> 20} MiB {busbw[name][s][-1] * 1e3:.2f} MB/s" for s in sizes)
                + f"  ({time.time() - t0:.0f} s)", flush=True)
    return busbw


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rate", type=int, default=100, help="link rate, Mbit/s")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--name", default="bfab")
    p.add_argument("--skip-alpha-beta", action="store_true")
    p.add_argument("--skip-ring", action="store_true")
    args = p.parse_args()
    sizes = [16 << 20, 32 << 20]
    workdir = tempfile.mkdtemp(prefix="ccb-bench-fabric-")
    with Cluster(Config(name=args.name, rate_mbit=args.rate)) as c:
        proc = c.login(["salloc", "--no-shell", "-N", "4", "--ntasks-per-node", "1",
                        "--job-name", "bench-fabric"], timeout=120)
        m = re.search(r"Granted job allocation (\d+)", proc.stderr)
        if not m:
            sys.exit(f"salloc failed: {proc.stderr}")
        job = m.group(1)
        print(f"testbed {args.name}: 4 nodes, links and spine at {args.rate} Mbit/s, "
              f"allocation {job}; results in {workdir}", flush=True)
        try:
            if not args.skip_alpha_beta:
                for tag, env in (("Open MPI as it comes", None),
                                 ("every message eager (the link)", EAGER_TCP)):
                    print_alpha_beta(alpha_beta(c, job, workdir, args.rate, ["node1", "node2"],
                                                env, tag))
            if not args.skip_ring:
                bw = ring_orders(c, job, workdir, args.rounds, sizes)
                ok_b = True
                for s in sizes:
                    good, bad = statistics.median(bw["sorted"][s]), statistics.median(bw["crossing"][s])
                    ratio = good / bad
                    ok_b &= ratio >= 1.7
                    print(f"(b) {s >> 20} MiB: sorted {good * 1e3:.2f} MB/s, crossing "
                          f"{bad * 1e3:.2f} MB/s (medians of {args.rounds}), ratio {ratio:.2f}; "
                          f"per round " + ", ".join(f"{g / b:.2f}" for g, b in zip(
                              bw["sorted"][s], bw["crossing"][s])))
                print(f"(b) {'PASS' if ok_b else 'FAIL'} (ratio >= 1.7 at every size)")
        finally:
            c.login(["scancel", job])


if __name__ == "__main__":
    main()
