"""Emulated nodes of one GPU host, joined by a network: NCCL between them goes
through its network transport (NET/Socket), as between real hosts.

    python -m testbed.gpunodes --nodes 4 --gpus 0,1,0,1 --rate 1000 --slow node3 \\
        -- --backend nccl --repeats 5 --bisect
    python -m testbed.gpunodes --nodes 4 --rate 200 -- --backend mpi   # CPU only

brings up, for one instance name:

- a switch namespace (``ccbgn-NAME-sw``) holding one bridge, ``br0``;
- one namespace per node (``ccbgn-NAME-nodeK``, host name ``nodeK``), its
  ``eth0`` a veth into the bridge at ``SUBNET.K``, MTU 9000, shaped with tbf
  to `rate_mbit` both ways (the node's egress and the bridge port's);
- an Open MPI launch agent (``OMPI_MCA_plm_rsh_agent``, no ssh) that runs a
  command on ``nodeK`` inside its namespace, under its host name, with the
  node's own ``CUDA_VISIBLE_DEVICES`` (its GPU) and ``NCCL_HOSTID``;

then runs ``ccbench doctor --hosts node1 .. nodeN --ranks-per-node 1`` plus
the given arguments on node1 and tears everything down.  ``--slow nodeK``
halves (``nodeK:0.25``: quarters) that node's link, both ways.

Why NCCL takes the network: it treats two ranks as one host when their host
hashes match (``NCCL_HOSTID``, else host name and boot id), and only then
considers P2P (NVLink, PCIe) or shared memory.  Each node has its own
host name and ``NCCL_HOSTID``, so every connection between nodes goes
through the net transport, over ``NCCL_SOCKET_IFNAME=eth0`` (the veth:
the only interface besides ``lo`` in a node) with ``NCCL_IB_DISABLE=1``.
Two nodes may share one GPU (``--gpus 0,1,0,1`` on two GPUs): NCCL refuses a
duplicate GPU only within one host hash.

Test and benchmark code, outside the product: the product sees ordinary
hosts.  Nothing is added to the root namespace; `down` (also on SIGTERM and
at exit) kills what runs in the instance's namespaces, by PID, and deletes
them.
"""
import argparse
import atexit
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib

from . import fabric
from .fabric import in_netns, sh

PREFIX = "ccbgn"


class NodesError(RuntimeError):
    """The emulated nodes cannot be brought up or used as asked."""


class GpuNodes:
    """`nodes` emulated hosts on this machine, one bridge between them.

    Parameters
    ----------
    name : str
        Instance name (namespaces ``ccbgn-NAME-*``); 1-10 of a-z, 0-9, -.
    nodes : int
        Number of nodes, 2..16.
    rate_mbit : int
        Every node link's rate, both ways (Mbit/s).
    gpus : list of str, optional
        ``CUDA_VISIBLE_DEVICES`` of each node, in node order (None: leave it
        as it is, for CPU backends).
    """

    def __init__(self, name="gn", nodes=4, rate_mbit=1000, gpus=None, hosts_file=False):
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,9}", str(name)):
            raise NodesError(f"--name {name!r}: 1-10 lower-case letters, digits, -")
        if not isinstance(nodes, int) or not 2 <= nodes <= 16:
            raise NodesError(f"--nodes {nodes!r}: between 2 and 16")
        if gpus is not None and len(gpus) != nodes:
            raise NodesError(f"--gpus: {len(gpus)} GPUs for {nodes} nodes; give one per node")
        self.name, self.rate_mbit, self.gpus = name, rate_mbit, gpus
        self.hosts = [f"node{k}" for k in range(1, nodes + 1)]
        h = zlib.crc32(name.encode())
        self.subnet = f"10.{228 + h % 20}.{(h >> 8) % 250}"
        self.workdir = tempfile.mkdtemp(prefix=f"{PREFIX}-{name}-")
        self.agent = os.path.join(self.workdir, "agent.sh")
        self.hosts_file = hosts_file
        self.made = []

    def netns(self, role):
        return f"{PREFIX}-{self.name}-{role}"

    def node_env(self, host):
        """What a process on `host` gets besides the caller's environment."""
        k = self.hosts.index(host)
        env = {"NCCL_HOSTID": f"{PREFIX}-{self.name}-{host}"}
        if self.gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpus[k]
        return env

    # -- bring-up, teardown -------------------------------------------------
    def up(self):
        """Build the bridge and the nodes, shape every link, write the agent."""
        if os.geteuid() != 0:
            raise NodesError("needs root (network namespaces, tc)")
        sw = self.netns("sw")
        if sw in fabric.netns_list():
            raise NodesError(f"{sw} exists: another instance named {self.name!r} runs, or a "
                             f"crashed one was left (ip netns del {PREFIX}-{self.name}-...)")
        atexit.register(self.down)
        fabric.add_netns(sw)
        self.made.append(sw)
        sh(["ip", "-n", sw, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", sw, "link", "set", "br0", "mtu", fabric.MTU, "up"])
        for k, host in enumerate(self.hosts, 1):
            ns = self.netns(host)
            fabric.add_netns(ns)
            self.made.append(ns)
            fabric.veth(ns, "eth0", sw, f"p{k}")
            sh(["ip", "-n", ns, "addr", "add", f"{self.subnet}.{k}/24", "dev", "eth0"])
            sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
            sh(["ip", "-n", sw, "link", "set", f"p{k}", "master", "br0", "up"])
            fabric.node_sysctls(ns)
            self.shape(host, self.rate_mbit)
        self._write_agent()
        if self.hosts_file:
            self._resolve_names()
        return self

    def _resolve_names(self):
        """The node names resolve to their addresses, as on a cluster: an
        /etc/hosts of our own bind-mounted over the machine's, in the
        private mount namespace `main` runs in (the machine's file is never
        written), so that a rank or a tool that looks a node up finds it."""
        path = os.path.join(self.workdir, "hosts")
        with open("/etc/hosts") as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.rstrip("\n") + "\n" + "".join(
                f"{self.subnet}.{k} {host}\n" for k, host in enumerate(self.hosts, 1)))
        sh(["mount", "--bind", path, "/etc/hosts"])

    def down(self):
        """Kill what runs in our namespaces (by PID), delete them; twice is safe."""
        for ns in reversed(self.made):
            fabric.del_netns(ns)
        self.made = []
        if self.hosts_file:
            sh(["umount", "/etc/hosts"], check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()

    def shape(self, host, rate_mbit):
        """`host`'s link at `rate_mbit` both ways: its eth0's egress (from the
        node) and its bridge port's egress (to the node)."""
        k = self.hosts.index(host) + 1
        fabric.tbf(self.netns(host), "eth0", rate_mbit)
        fabric.tbf(self.netns("sw"), f"p{k}", rate_mbit)

    def _write_agent(self):
        # Open MPI calls the agent as ssh: `agent [options] HOST COMMAND...`;
        # the command line is one string for a remote shell
        cases = "".join(
            f"  {host}) ns={self.netns(host)}; "
            + " ".join(f"export {k}={shlex.quote(v)};" for k, v in self.node_env(host).items())
            + " ;;\n" for host in self.hosts)
        with open(self.agent, "w") as f:
            f.write("#!/bin/sh\n"
                    "while [ \"${1#-}\" != \"$1\" ]; do shift; done\n"
                    "host=$1; shift\n"
                    f"case $host in\n{cases}"
                    "  *) echo \"agent: no node $host\" >&2; exit 255 ;;\nesac\n"
                    'exec nsenter --net=/run/netns/$ns unshare --uts sh -c '
                    '\'hostname "$1"; shift; eval "$*"\' sh "$host" "$@"\n')
        os.chmod(self.agent, 0o755)

    # -- using them ---------------------------------------------------------
    def env(self):
        """The environment of a command run on a node: Open MPI over the
        nodes' subnet through the agent, NCCL's sockets on eth0."""
        # a resource manager's or the image's own Open MPI settings are not
        # these nodes': the device's image sets OMPI_MCA_plm=isolated (no
        # remote launch), and mpirun then mapped all 4 nodes onto this one
        # ("more processes than the ppr for this topology can support")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OMPI_MCA_", "PMIX_", "SLURM_", "PBS_", "PE_HOSTFILE",
                                    "LSB_"))}
        env.update({
            "OMPI_MCA_plm_rsh_agent": self.agent,
            "OMPI_MCA_btl": "self,vader,tcp",
            "OMPI_MCA_btl_tcp_if_include": f"{self.subnet}.0/24",
            "OMPI_MCA_oob_tcp_if_include": f"{self.subnet}.0/24",
            # every node believes it has all the cores: don't bind, do yield
            "OMPI_MCA_hwloc_base_binding_policy": "none",
            "OMPI_MCA_mpi_yield_when_idle": "1",
            "NCCL_SOCKET_IFNAME": "eth0",
            "NCCL_IB_DISABLE": "1",
            "NCCL_NVLS_ENABLE": "0",
            "PYTHONUNBUFFERED": "1",
        })
        return env

    def command(self, host, argv):
        """`argv` as run on `host` (its namespace, host name and node env)."""
        exports = [f"{k}={v}" for k, v in self.node_env(host).items()]
        return in_netns(self.netns(host), ["env", *exports, *argv], hostname=host)

    def run(self, host, argv, **kw):
        return subprocess.run(self.command(host, argv), env=self.env(), **kw)

    def launch_check(self, **kw):
        """Open MPI's allocation and map of one rank per node, each printing
        where it runs: the launch the doctor will use, shown in full."""
        hostfile = os.path.join(self.workdir, "hostfile")
        with open(hostfile, "w") as f:
            f.write("".join(f"{h} slots=1\n" for h in self.hosts))
        show = 'echo "$(hostname) NCCL_HOSTID=$NCCL_HOSTID CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"'
        return self.run(self.hosts[0], ["mpirun", "--allow-run-as-root", "--display-allocation",
                                        "-np", str(len(self.hosts)), "--hostfile", hostfile,
                                        "--map-by", "ppr:1:node", "sh", "-c", show], **kw)

    def doctor(self, args, **kw):
        """``ccbench doctor`` over every node, one rank each, run on node1."""
        argv = [sys.executable, "-m", "ccbench_kit", "doctor", "--hosts", *self.hosts,
                "--ranks-per-node", "1", *args]
        return self.run(self.hosts[0], argv, **kw)


def parse_slow(text, hosts):
    """"nodeK[:FRACTION]" -> (host, fraction); fraction 0.5 by default."""
    host, _, frac = str(text).partition(":")
    if host not in hosts:
        raise NodesError(f"--slow {text!r}: no node {host!r}; the nodes are "
                         + ", ".join(hosts))
    try:
        fraction = float(frac) if frac else 0.5
    except ValueError:
        fraction = -1
    if not 0 < fraction <= 1:
        raise NodesError(f"--slow {text!r}: the fraction must be in (0, 1], e.g. node3:0.5")
    return host, fraction


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m testbed.gpunodes",
                                description=__doc__.split("\n")[0])
    p.add_argument("--name", default="gn", help="instance name (default gn)")
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--rate", type=int, default=1000, help="every node link, Mbit/s")
    p.add_argument("--gpus", default=None,
                   help="each node's CUDA_VISIBLE_DEVICES, comma-separated (e.g. 0,1,0,1)")
    p.add_argument("--slow", default=None, metavar="NODE[:FRACTION]",
                   help="that node's link at FRACTION (0.5) of --rate, both ways")
    p.add_argument("--check-launch", action="store_true",
                   help="first run one rank per node through Open MPI, printing its "
                        "allocation and where each rank runs")
    p.add_argument("--no-hosts-file", dest="hosts_file", action="store_false",
                   help="leave name resolution to the machine (default: the node names "
                        "resolve to their addresses in a private mount namespace)")
    p.add_argument("doctor_args", nargs=argparse.REMAINDER,
                   help="-- then the arguments of ccbench doctor")
    args = p.parse_args(argv)
    rest = args.doctor_args[1:] if args.doctor_args[:1] == ["--"] else args.doctor_args
    if args.hosts_file and os.environ.get("CCBGN_MOUNTNS") != "1":
        # our own mount namespace, for our own /etc/hosts (GpuNodes._resolve_names)
        cmd = ["unshare", "--mount", "--propagation", "private", "env", "CCBGN_MOUNTNS=1",
               sys.executable, "-m", "testbed.gpunodes", *(argv if argv is not None
                                                            else sys.argv[1:])]
        os.execvp(cmd[0], cmd)   # the same process: a signal to it reaches main below
    try:
        nodes = GpuNodes(args.name, args.nodes, args.rate,
                         args.gpus.split(",") if args.gpus else None, hosts_file=args.hosts_file)
        slow = parse_slow(args.slow, nodes.hosts) if args.slow else None
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        with nodes:
            if slow:
                nodes.shape(slow[0], max(1, int(args.rate * slow[1])))
            if args.check_launch:
                r = nodes.launch_check(capture_output=True, text=True, timeout=120)
                print(f"gpunodes: launch check exit {r.returncode}:\n{r.stdout}{r.stderr}",
                      file=sys.stderr)
            t0 = time.monotonic()
            rc = nodes.doctor(rest).returncode
            print(f"gpunodes: {args.nodes} nodes, rate {args.rate} Mbit/s, shaped: "
                  f"{'%s at %g' % slow if slow else 'none'}; doctor exit {rc} in "
                  f"{time.monotonic() - t0:.1f} s", file=sys.stderr)
            return rc
    except (NodesError, fabric.FabricError) as e:
        print(f"gpunodes: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
