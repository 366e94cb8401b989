"""``ccbench cluster start|stop|status|hostfile``: a Dask-MPI cluster for
notebooks, and topology-sorted host files.

Also the launch flags ``ccbench run`` and ``ccbench suite`` share
(`add_launch_arguments`, `launch_options`): hosts, node counts, Slurm.
"""
import os
import sys

from .. import run_fields
from ..errors import ConfigError
from .. import argtypes as T
from ..launch import cluster
from ..launch.hosts import topology_sort_file
from ..output_path import check_output


def add_launch_arguments(p, nnodes_short=True, rank_output=True):
    """--hosts, --hosts-file, -N, --ranks-per-node and the Slurm flags; with
    `rank_output`, --mpi-log-dir and --debug (a run's, not a cluster's)."""
    g = p.add_argument_group(run_fields.HOSTS)
    for f in run_fields.in_group(run_fields.HOSTS):  # --hosts, --hosts-file, -N, --ranks-per-node
        flags = [x for x in f.flags if nnodes_short or x != "-N"]
        g.add_argument(*flags, **f.argparse_keywords())
    g.add_argument("-S", "--slurm-mode", action="store_true",
                   help="launch with srun: in --slurm-job-id, the current allocation, or a "
                        "new one (salloc)")
    g.add_argument("--slurm-job-id", default=None, help="existing Slurm allocation to run in")
    g.add_argument("--slurm-setup-script", default=None, metavar="SCRIPT",
                   help="run on every node before the ranks (Slurm mode); `default`: the "
                        "kit's check that each node has this Python, this ccbench_kit and "
                        "its MPI engine")
    g.add_argument("--slurm-partition", default=None, help="partition of a new allocation")
    g.add_argument("--slurm-time", default=None, help="time limit of a new allocation")
    g.add_argument("--srun-mpi", default=None, help="srun's --mpi plugin (e.g. pmix)")
    if rank_output:
        g.add_argument("--mpi-log-dir", default=None, type=T.path("a folder"), metavar="DIR",
                       help="also keep each rank's stdout and stderr in files in DIR (Open "
                            "MPI: DIR/1/rank.N/; srun: DIR/HOST.rank.N.*)")
        g.add_argument("--debug", action="store_true",
                       help="print the launch command and the ranks' environment, show the "
                            "ranks' stderr as it comes, NCCL_DEBUG=INFO (nccl); implies "
                            "--non-interactive")
    return g


def launch_options(args):
    """The launch keyword arguments of `ccbench_kit.run` from parsed flags."""
    slurm = None
    if args.slurm_mode:
        slurm = {"job_id": args.slurm_job_id, "setup_script": args.slurm_setup_script,
                 "partition": args.slurm_partition, "time_limit": args.slurm_time,
                 "mpi": args.srun_mpi}
    else:
        for flag, value in (("--slurm-job-id", args.slurm_job_id),
                            ("--slurm-setup-script", args.slurm_setup_script),
                            ("--slurm-partition", args.slurm_partition),
                            ("--slurm-time", args.slurm_time), ("--srun-mpi", args.srun_mpi)):
            if value is not None:
                raise ConfigError("only applies with -S/--slurm-mode", flag)
    hosts_file = args.hosts_file
    if hosts_file is None and not args.hosts and slurm is None and (args.nnodes or 1) > 1:
        hosts_file = home_hosts()
    options = {"hosts": args.hosts, "hosts_file": hosts_file, "nnodes": args.nnodes,
               "ranks_per_node": args.ranks_per_node, "slurm": slurm}
    if hasattr(args, "debug"):  # `add_launch_arguments(rank_output=True)`
        options.update(mpi_log_dir=args.mpi_log_dir, debug=args.debug)
    return options


def home_hosts():
    """``~/hosts``, nccom-test's host file when several nodes are asked for
    and no host is given; None where there is none."""
    path = os.path.expanduser("~/hosts")
    return path if os.path.isfile(path) else None


def add_parser(sub):
    p = sub.add_parser("cluster", help="start/stop a Dask-MPI cluster; sort host files",
                       description="A Dask-MPI cluster whose workers are MPI ranks, for "
                                   "notebooks: Client(scheduler_file=...), then "
                                   "ccbench_kit.run(..., client=client).")
    csub = p.add_subparsers(dest="action", required=True)

    s = csub.add_parser("start", help="start the cluster in the background")
    s.add_argument("-np", "-r", "--nranks", dest="nranks",
                   type=T.int_in(2, T.RANKS_MAX), required=True,
                   help="MPI ranks: one scheduler + N-1 workers")
    s.add_argument("--scheduler-file", default=None, type=T.path("a file"),
                   help="where the scheduler writes its address (default "
                        "~/.ccbench/scheduler.json)")
    s.add_argument("--interface", default=None,
                   help="network interface for the scheduler and workers (default lo: "
                        "loopback only, one host; give one for several hosts)")
    s.add_argument("--dashboard", default=None, metavar="ADDRESS",
                   help="serve the dashboard at ADDRESS (e.g. 127.0.0.1:8787); default none")
    s.add_argument("--timeout", type=T.seconds, default=120, help="seconds to wait for the workers")
    add_launch_arguments(s, rank_output=False)
    s.set_defaults(func=start, uses_dask=_always)

    t = csub.add_parser("stop", help="shut the cluster down and wait for every rank to exit")
    t.add_argument("--scheduler-file", default=None, type=T.path("a file"))
    t.add_argument("--timeout", type=T.seconds, default=30)
    t.set_defaults(func=stop, uses_dask=_always)

    q = csub.add_parser("status", help="the cluster's address and workers")
    q.add_argument("--scheduler-file", default=None, type=T.path("a file"))
    q.set_defaults(func=status, uses_dask=_always)

    h = csub.add_parser("hostfile", help="sort a host file by network topology (EC2 "
                                         "DescribeInstanceTopology JSON)")
    h.add_argument("-i", "--input", required=True, type=T.path("a host file"),
                   help="host file, one host per line")
    h.add_argument("--topology", required=True, type=T.path("a JSON file"),
                   help="DescribeInstanceTopology output (JSON; pages as a list allowed)")
    h.add_argument("--instances", default=None,
                   help="DescribeInstances output or {host: instance id} JSON, when the "
                        "host file doesn't list instance ids")
    h.add_argument("-o", "--output", default=None, type=T.path("a host file"),
                   help="sorted host file (default stdout)")
    h.set_defaults(func=hostfile)


def _always(args):
    return True


def start(args):


    path = cluster.scheduler_path(args.scheduler_file)
    stem = os.path.splitext(path)[0]
    for f in (path, stem + ".launcher.json", stem + ".log"):
        check_output(f, "--scheduler-file")
    handle = cluster.start(args.nranks, scheduler_file=args.scheduler_file,
                           interface=args.interface, dashboard=args.dashboard,
                           timeout=args.timeout, **launch_options(args))
    print(f"cluster: {handle.nworkers} workers at {handle.address} (launcher pid {handle.pid})")
    print(f"log: {handle.log}")
    print("in a notebook:\n"
          "  from distributed import Client\n"
          f"  client = Client(scheduler_file={handle.scheduler_file!r})\n"
          "  ds = ccbench_kit.run('all_reduce', sizes='8:1M:4', client=client)\n"
          f"stop it with: ccbench cluster stop --scheduler-file {handle.scheduler_file}")
    return 0


def stop(args):

    how = cluster.stop(scheduler_file=args.scheduler_file, timeout=args.timeout)
    print(f"cluster stopped ({how})", file=sys.stderr)
    return 0


def status(args):

    info = cluster.status(scheduler_file=args.scheduler_file)
    print(f"scheduler: {info['address']}")
    print(f"launcher pid: {info.get('pid')} ({'running' if info.get('running') else 'gone'})")
    for w in info["workers"]:
        print(f"  worker rank {w['rank']}: {w['address']} on {w['host']}")
    return 0


def hostfile(args):

    if args.output:
        check_output(args.output, "-o/--output")
    ordered, unplaced = topology_sort_file(args.input, args.topology, args.output,
                                           instance_map=args.instances)
    if not args.output:
        sys.stdout.write("".join(f"{h}\n" for h in ordered))
    if unplaced:
        print(f"warning: {len(unplaced)} host(s) not in the topology, put last: "
              + ", ".join(unplaced), file=sys.stderr)
    return 0
