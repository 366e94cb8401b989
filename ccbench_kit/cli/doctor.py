"""``ccbench doctor``: find the slow node, the bad link, the rank that hangs.

Exit codes: 0 healthy, 1 an outlier found (or a node that hangs or never
starts), 2 bad input, 3 the run failed without naming a node.  The last line
printed is the verdict: ``verdict: node3``, ``verdict: node3 link`` or
``verdict: none``.
"""
import argparse
import shlex
import sys

from .. import health
from . import argtypes as T
from .cluster import add_launch_arguments, launch_options


def add_parser(sub):
    p = sub.add_parser("doctor", help="health check: name the slow node, the bad link, the "
                                      "rank that hangs",
                       description="Measure every node's own all_reduce and every pair of "
                                   "nodes (bandwidth and latency, O(N) rounds of disjoint "
                                   "pairs); name the node or link that stands out. Exit 0 "
                                   "healthy, 1 outlier, 2 bad input, 3 run failed.")
    add_launch_arguments(p)
    p.add_argument("--scheduler-file", default=None,
                   help="check the hosts of a Dask-MPI cluster (ccbench cluster start)")
    g = p.add_argument_group("measurement")
    g.add_argument("--repeats", type=int, default=5, help="repeats of every test (default 5)")
    g.add_argument("--bw-size", default="2M", help="pair bandwidth message (default 2M)")
    g.add_argument("--local-size", default="1M", help="local all_reduce size (default 1M)")
    g.add_argument("--lat-iters", type=int, default=50, help="ping-pongs per test (default 50)")
    g.add_argument("--bw-iters", type=int, default=3, help="exchanges per test (default 3)")
    g.add_argument("--topology", default=None, metavar="FILE",
                   help="DescribeInstanceTopology JSON: pairs sharing a leaf uplink don't "
                        "run at once")
    g.add_argument("--bisect", action=argparse.BooleanOptionalAction, default=None,
                   help="bisection of a slow all_reduce (O(log N) rounds) instead of the pair "
                        f"matrix; default: from {health.api.BISECT_FROM} nodes on")
    g.add_argument("--timeout", type=T.float_in(0, 7 * 24 * 3600, low_open=True), default=None,
                   help="seconds without progress before the hang is attributed")
    g.add_argument("--out", default=None, help="results file (default results/doctor-STAMP.nc)")
    g.add_argument("--report", default=None, metavar="HTML", help="also write the report page")
    p.set_defaults(func=main)


def _check_outputs(args):
    """The results file and the report can be written: checked before the
    check runs, so that a bad path costs nothing measured."""
    from pathlib import Path

    from ..errors import ConfigError
    from ..output_path import check_output
    if args.out is not None:
        check_output(args.out, "--out")
    if args.report is not None:
        report = Path(args.report)
        if report.suffix != ".html":
            raise ConfigError(f"{report}: the report is HTML; name it NAME.html", "--report")
        check_output(report, "--report")
        check_output(report.with_suffix(".ipynb"), "--report")


def main(args):
    _check_outputs(args)
    launch = launch_options(args)
    if launch["hosts"] and len(launch["hosts"]) > 16:
        print(f"ccbench: resolving {len(launch['hosts'])} host names ...", file=sys.stderr,
              flush=True)
    argv = ["ccbench", *sys.argv[1:]] if sys.argv and sys.argv[0].endswith("ccbench") else []
    client = None
    if args.scheduler_file:
        from ..launch.cluster import connect
        client = connect(args.scheduler_file)
    try:
        diag = health.doctor(
            launch["hosts"], hosts_file=launch["hosts_file"], nnodes=launch["nnodes"],
            slurm=launch["slurm"], client=client, out=args.out,
            ranks_per_node=launch["ranks_per_node"], repeats=args.repeats,
            bw_bytes=args.bw_size, local_bytes=args.local_size, lat_iters=args.lat_iters,
            bw_iters=args.bw_iters, topology=args.topology, bisect=args.bisect,
            timeout=args.timeout, command=shlex.join(argv) if argv else "")
    finally:
        if client is not None:
            client.close()
    if diag.message:
        print(f"ccbench: {diag.message}", file=sys.stderr)
    for note in diag.verdict.notes:
        if note != diag.message:
            print(f"note: {note}")
    print(health.report.text(diag))
    if args.report and diag.out:
        path = health.report.html(diag.out, args.report)
        print(f"report: {path}")
    print(diag.line)
    return diag.exit_code
