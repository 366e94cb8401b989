"""``make cluster-demo``: the kit on the emulated Slurm cluster, end to end.

1. bring a 4-node testbed up (two leaves, one spine, links at 200 Mbit/s);
2. sort its host list by the fabric's topology file (EC2 format), as the
   AWS nccl-tests recipe does;
3. run a multi-node suite as sbatch jobs (collectives x node counts x
   environment variants, hosts in topology order), follow it with
   ``ccbench suite status``, gather it with ``ccbench suite collect`` into
   one DataTree and one HTML report, and export the recipe's CSV names;
4. the topology comparison: ring all_reduce on 4 nodes in the sorted order
   and in the order that crosses the spine four times, in one allocation;
5. print where everything is, and tear the testbed down.
"""
import os
import re
import sys
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from testbed import Cluster, Config  # noqa: E402

BIN = os.path.dirname(sys.executable)
CCBENCH = os.path.join(BIN, "ccbench")


def say(text):
    print(f"== {text}", flush=True)


def main():
    results = os.path.join(ROOT, "results", "cluster-demo")
    reports = os.path.join(ROOT, "reports")
    os.makedirs(results, exist_ok=True)
    os.makedirs(reports, exist_ok=True)
    name = f"demo{os.getpid() % 10000}"
    with Cluster(Config(name=name, nodes=4, rate_mbit=200)) as c:
        say(f"testbed {name}: {', '.join(c.nodes)}; leaves {{node1,node2}} {{node3,node4}}, "
            f"every link and the spine at {c.config.rate_mbit} Mbit/s; {c.config.statedir}")

        def ccb(*args, check=True, timeout=900):
            proc = c.login([CCBENCH, *map(str, args)], capture_output=False, timeout=timeout)
            if check and proc.returncode != 0:
                sys.exit(f"ccbench {' '.join(map(str, args))} failed ({proc.returncode})")
            return proc

        # -- 2. the host list, sorted by the topology -------------------------
        hosts = os.path.join(results, "hostnames.txt")
        with open(hosts, "w") as f:
            f.write("node3\nnode1\nnode4\nnode2\n")      # as a scheduler lists them
        sorted_hosts = os.path.join(results, "topo_sorted_hostnames.txt")
        say("topology-sorted host file")
        ccb("cluster", "hostfile", "-i", hosts, "--topology", c.topology_file,
            "-o", sorted_hosts)

        # -- 3. a suite of sbatch jobs ----------------------------------------------
        suite = os.path.join(results, "cluster-demo.yaml")
        with open(suite, "w") as f:
            f.write(textwrap.dedent(f"""\
                name: cluster-demo
                title: ccbench on a 4-node Slurm testbed
                launcher: slurm
                workdir: suite
                out: cluster-demo.nc
                report: {os.path.join(reports, 'cluster-demo.html')}
                hosts_file: {sorted_hosts}
                ranks_per_node: 1
                stats: [avg, p50]
                run: {{minbytes: 8, maxbytes: 1M, stepfactor: 8, iters: 5, warmup: 1,
                       check: random}}
                matrix:
                  collectives: [all_reduce, all_gather]
                  nnodes: [2, 4]
                  env:
                    env1: {{}}
                    env2: {{OMPI_MCA_btl_tcp_links: "2"}}
                """))
        say("suite: 8 sbatch jobs (all_reduce, all_gather x 2, 4 nodes x 2 env variants)")
        ccb("suite", suite)
        deadline = time.monotonic() + 900
        while c.login(["squeue", "-h", "-o", "%i"]).stdout.strip():
            if time.monotonic() > deadline:
                sys.exit("the suite's jobs did not finish in 15 minutes")
            time.sleep(3)
        ccb("suite", "status", suite)
        say("collect: one DataTree and one report")
        ccb("suite", "collect", suite, timeout=1200)
        csv_dir = os.path.join(results, "nccl_results")
        ccb("export", os.path.join(results, "cluster-demo.nc"), "--aws-naming", csv_dir, "--topo")

        # -- 4. the topology comparison ----------------------------------------------
        alloc = c.login(["salloc", "--no-shell", "-N", "4", "--ntasks-per-node", "1",
                         "--job-name", "topology"], timeout=120)
        job = re.search(r"Granted job allocation (\d+)", alloc.stderr).group(1)
        try:
            order = {"sorted": ["node1", "node2", "node3", "node4"],
                     "crossing": ["node1", "node3", "node2", "node4"]}
            for label, nodes in order.items():
                say(f"ring all_reduce, hosts {' '.join(nodes)} ({label}), job {job}")
                ccb("run", "all_reduce", "-r", "4", "-S", "--slurm-job-id", job, "--hosts", *nodes,
                    "--algorithms", "ring", "-b", "4M", "-e", "16M", "-f", "4", "-n", "3", "-w", "1",
                    "--placement", "out_of_place", "--out",
                    os.path.join(results, f"ring-{label}.nc"))
        finally:
            c.login(["scancel", job])
        say("sorted vs crossing (busbw ratio per size)")
        ccb("compare", os.path.join(results, "ring-crossing.nc"),
            os.path.join(results, "ring-sorted.nc"), "--stat", "median", check=False)

    # -- 5. what came out ----------------------------------------------------------
    import ccbench_kit as ccbk
    from ccbench_kit.dataset import open_parts
    ring = ccbk.load(os.path.join(results, "ring-sorted.nc"))
    parts = open_parts(os.path.join(results, "cluster-demo.nc"))
    widest = max(parts.values(), key=lambda ds: len(set(ds.host.values)))
    print()
    print(f"results: {os.path.join(results, 'cluster-demo.nc')} ({len(parts)} combinations; "
          f"hosts {sorted(map(str, set(widest.host.values)))}, Slurm job "
          f"{widest.attrs['slurm_job_id']})")
    print(f"         {os.path.join(results, 'ring-sorted.nc')} / ring-crossing.nc (hosts "
          f"{[str(h) for h in ring.host.values]}, Slurm job {ring.attrs['slurm_job_id']}, launcher "
          f"{ring.attrs['launcher']})")
    print(f"csv:     {csv_dir}/ ({', '.join(sorted(os.listdir(csv_dir)))})")
    print(f"report:  {os.path.join(reports, 'cluster-demo.html')}")
    if len(set(widest.host.values)) < 3 or not widest.attrs.get("slurm_job_id"):
        sys.exit("the results lack 3 hosts or a Slurm job id")
    if not os.path.exists(os.path.join(reports, "cluster-demo.html")):
        sys.exit("no report")


if __name__ == "__main__":
    main()
