"""python -m testbed up|down|status|fault|kill|revive|run

    python -m testbed up [--name tb] [--nodes 4] [--rate 200] [--fault slow-link:node3]
    python -m testbed run [--name tb] -- sbatch -N 2 job.sh    # on the head node
    python -m testbed fault [--name tb] cpu-contended:node2     # now; --clear to remove
    python -m testbed status [--name tb]
    python -m testbed down [--name tb]
"""
import argparse
import contextlib
import json
import signal
import subprocess
import sys

from .cluster import Cluster, Config, TestbedError, parse_fault
from .faults import FaultUnavailable


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m testbed", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    def named(sp):
        sp.add_argument("--name", default="tb", help="instance name (default tb)")
        sp.add_argument("--base", default="/tmp", help="where the state directory is")
        return sp

    up = named(sub.add_parser("up", help="bring a testbed up (and leave it running)"))
    up.add_argument("--nodes", type=int, default=4)
    up.add_argument("--rate", type=int, default=200, help="node link rate, Mbit/s")
    up.add_argument("--spine-rate", type=int, default=None, help="spine rate, Mbit/s")
    up.add_argument("--cpus-per-node", type=int, default=4)
    up.add_argument("--partition", default="compute")
    up.add_argument("--fault", action="append", default=[], metavar="KIND:NODE[:VALUE]")
    named(sub.add_parser("down", help="tear a testbed down (also a crashed one)"))
    named(sub.add_parser("status", help="print the instance as JSON"))
    f = named(sub.add_parser("fault", help="apply (or --clear) a fault now"))
    f.add_argument("spec", nargs="?", metavar="KIND:NODE[:VALUE]")
    f.add_argument("--clear", action="store_true", help="remove it (all faults without SPEC)")
    for name, text in (("kill", "kill a node: its slurmd and every process on it"),
                       ("revive", "restart a killed node's slurmd")):
        k = named(sub.add_parser(name, help=text))
        k.add_argument("node")
    r = named(sub.add_parser("run", help="run a command on the head (login) node"))
    r.add_argument("argv", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    try:
        return _dispatch(args)
    except (TestbedError, FaultUnavailable) as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 2


def _dispatch(args):
    if args.cmd == "up":
        c = Cluster(Config(name=args.name, base=args.base, nodes=args.nodes, rate_mbit=args.rate,
                           spine_rate_mbit=args.spine_rate, cpus_per_node=args.cpus_per_node,
                           partition=args.partition))
        c.up(faults=args.fault, cleanup_on_exit=False)
        print(json.dumps(c.status(), indent=1))
        return 0
    if args.cmd == "down":
        try:
            c = Cluster.attach(args.name, args.base)
        except TestbedError:
            c = Cluster(Config(name=args.name, base=args.base))   # namespaces only
        c.down()
        return 0
    c = Cluster.attach(args.name, args.base)
    if args.cmd == "status":
        print(json.dumps(c.status(), indent=1))
    elif args.cmd == "fault":
        if args.clear:
            c.clear(None if args.spec is None else ":".join(parse_fault(args.spec)[:2]))
        else:
            if args.spec is None:
                raise TestbedError("fault: give KIND:NODE[:VALUE], or --clear")
            print(c.fault(*parse_fault(args.spec)))
    elif args.cmd == "kill":
        c.kill_node(args.node)
    elif args.cmd == "revive":
        c.revive_node(args.node)
    elif args.cmd == "run":
        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        if not argv:
            raise TestbedError("run: give a command, e.g. python -m testbed run -- sinfo")
        return _forwarding_signals(c.login_command(argv), c.env)
    return 0


def _forwarding_signals(cmd, env):
    """Run `cmd` and wait for it; SIGINT and SIGTERM given to this wrapper
    go to the command (a `ccbench` run or doctor then stops, keeps its
    partial results and exits 130/143), and its exit code is returned."""
    proc = subprocess.Popen(cmd, env=env)

    def forward(sig, _frame):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main())
