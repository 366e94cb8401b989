"""A Slurm cluster of emulated nodes on this machine.

`Cluster` brings up, for one instance name:

- a head namespace (``ccbtb-NAME-head``, host name ``head``): a private
  munged (its own key and socket), slurmctld, and the login side where
  ``sbatch``/``srun``/``salloc``/``ccbench`` are run (`Cluster.login`);
- one namespace per node (host names ``node1``..``nodeN``), each running
  its own slurmd, with one link into a leaf bridge;
- a fabric namespace holding two leaf bridges (nodes of the first half,
  nodes of the second half) joined by ONE spine link (a veth pair); every
  node link and the spine link are shaped with tbf to `rate_mbit` in both
  directions, so a ring that crosses the spine twice per direction gets
  half the bandwidth.

Nothing is added to the root namespace: the instance is the namespaces
``ccbtb-NAME-*``, the state directory ``BASE/ccbtb-NAME`` (slurm.conf,
munge, spool, logs, the topology file) and, for CPU faults, the cgroup
``ccbtb-NAME``.  `down` removes all three from the state directory alone,
so a crashed run is cleaned by ``python -m testbed down --name NAME``.
"""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import zlib
from dataclasses import asdict, dataclass

from . import fabric
from .fabric import in_netns, sh

PREFIX = "ccbtb"
DEFAULT_BASE = "/tmp"
_SLURM_BINARIES = ("slurmctld", "slurmd", "sinfo", "sbatch", "srun", "squeue", "scontrol",
                   "munged")


class TestbedError(RuntimeError):
    """The testbed cannot be brought up, used or torn down as asked."""


@dataclass
class Config:
    """One testbed instance.

    Parameters
    ----------
    name : str
        Instance name: namespaces ``ccbtb-NAME-*``, state directory
        ``BASE/ccbtb-NAME``.  Letters, digits and ``-``; at most 12.
    nodes : int
        Number of emulated nodes (2..16), split in two leaves.
    rate_mbit : int
        Shaped rate of every node link, both directions (Mbit/s).
    spine_rate_mbit : int, optional
        Shaped rate of the spine link; default `rate_mbit`.
    cpus_per_node : int
        Slurm's CPUs per node (the machine's cores are shared by all).
    partition : str
        The one partition, holding every node.
    base : str
        Where the state directory goes; every namespace sees it.
    """

    name: str = "tb"
    nodes: int = 4
    rate_mbit: int = 200
    spine_rate_mbit: int = None
    cpus_per_node: int = 4
    partition: str = "compute"
    base: str = DEFAULT_BASE

    def __post_init__(self):
        import re
        if not re.match(r"^[a-z0-9][a-z0-9-]{0,11}$", str(self.name)):
            raise TestbedError(f"--name {self.name!r}: use 1-12 lower-case letters, digits, -")
        if not isinstance(self.nodes, int) or not 2 <= self.nodes <= 16:
            raise TestbedError(f"--nodes {self.nodes!r}: between 2 and 16")
        if self.spine_rate_mbit is None:
            self.spine_rate_mbit = self.rate_mbit
        for flag, v in (("--rate", self.rate_mbit), ("--spine-rate", self.spine_rate_mbit)):
            if not isinstance(v, int) or v < 1:
                raise TestbedError(f"{flag} {v!r}: a positive number of Mbit/s")

    # -- everything derived from the name, so that instances never collide --
    @property
    def prefix(self):
        return f"{PREFIX}-{self.name}"

    @property
    def statedir(self):
        return os.path.join(self.base, self.prefix)

    @property
    def subnet(self):
        """A private /24 of this instance: 10.(100..227).(0..249)."""
        h = zlib.crc32(self.name.encode())
        return f"10.{100 + h % 128}.{(h >> 8) % 250}"

    @property
    def ports(self):
        """(slurmctld, slurmd) ports of this instance."""
        h = zlib.crc32(self.name.encode())
        base = 20000 + (h % 10000) * 2
        return base, base + 1

    @property
    def node_names(self):
        return [f"node{k}" for k in range(1, self.nodes + 1)]

    def leaf_of(self, node):
        """1 or 2: nodes of the first half are under leaf 1."""
        k = self.node_names.index(node) + 1
        return 1 if k <= (self.nodes + 1) // 2 else 2

    def address(self, node):
        return f"{self.subnet}.{self.node_names.index(node) + 1}"

    def netns(self, role):
        return f"{self.prefix}-{role}"

    def owns_netns(self, ns):
        """Whether namespace `ns` is one of this instance's: its roles exactly
        (head, fab, nodeK), so that `down` of ``p2`` never touches ``p2-x``."""
        return re.fullmatch(re.escape(self.prefix) + rf"-(?:{HEAD}|{FABRIC}|node\d+|sink\d+)", ns) \
            is not None


HEAD = "head"
FABRIC = "fab"


class Cluster:
    """A running (or to-be-run) testbed.

    Use it as a context manager, or call `up` and `down`; `Cluster.attach`
    finds a running instance from its state directory.

    Examples
    --------
    >>> with Cluster(Config(name="demo")) as c:            # doctest: +SKIP
    ...     c.login(["sinfo"])
    ...     c.fault("slow-link", "node3")
    """

    def __init__(self, config=None, **kw):
        self.config = config if isinstance(config, Config) else Config(**kw)
        self.faults = {}            # "kind:node" -> what removing it needs
        self._lock = threading.Lock()
        self._cleanup_registered = False

    # -- paths --------------------------------------------------------------
    def path(self, *parts):
        return os.path.join(self.config.statedir, *parts)

    @property
    def slurm_conf(self):
        return self.path("etc", "slurm.conf")

    @property
    def topology_file(self):
        return self.path("topology.json")

    @property
    def hostfile(self):
        return self.path("hosts.txt")

    @property
    def nodes(self):
        return self.config.node_names

    @property
    def env(self):
        """Environment for Slurm clients run on the head (`login`)."""
        env = dict(os.environ)
        env["SLURM_CONF"] = self.slurm_conf
        for k in [k for k in env if k.startswith(("SLURM_", "SALLOC_", "SBATCH_", "SRUN_"))
                  and k != "SLURM_CONF"]:
            del env[k]          # the caller's own allocation is not ours
        return env

    # -- state --------------------------------------------------------------
    def _save_state(self):
        data = {"config": asdict(self.config), "faults": self.faults, "pid": os.getpid()}
        tmp = self.path("state.json.tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, self.path("state.json"))

    @classmethod
    def attach(cls, name="tb", base=DEFAULT_BASE):
        """The running instance `name`, from its state directory."""
        statedir = os.path.join(base, f"{PREFIX}-{name}")
        try:
            with open(os.path.join(statedir, "state.json")) as f:
                data = json.load(f)
        except FileNotFoundError:
            raise TestbedError(f"no testbed {name!r}: {statedir}/state.json is missing; "
                               f"start one with `python -m testbed up --name {name}`") from None
        except (OSError, ValueError) as e:
            raise TestbedError(f"{statedir}/state.json cannot be read ({e}); remove the "
                               f"instance's namespaces by hand (ip netns del {PREFIX}-{name}-...)"
                               ) from None
        try:
            self = cls(Config(**data["config"]))
        except (KeyError, TypeError) as e:
            raise TestbedError(f"{statedir}/state.json is not a testbed state (no usable "
                               f"'config': {e})") from None
        self.faults = data.get("faults", {})
        return self

    def is_up(self):
        return self.config.netns(HEAD) in fabric.netns_list()

    # -- bring-up -----------------------------------------------------------
    def up(self, faults=(), cleanup_on_exit=True, timeout=60):
        """Build the fabric, start munge, slurmctld and the slurmds, wait
        until every node is idle, then apply `faults` (("kind", "node"),
        or "kind:node[:value]" strings).

        With `cleanup_on_exit`, an atexit hook and SIGTERM/SIGHUP handlers
        (main thread only) tear the instance down if the caller forgets.
        """
        check_host()
        if self.is_up() or os.path.exists(self.path("state.json")):
            raise TestbedError(f"testbed {self.config.name!r} is already up (or was not torn "
                               f"down: {self.config.statedir}); run `python -m testbed down "
                               f"--name {self.config.name}` first")
        if cleanup_on_exit:
            self._register_cleanup()
        try:
            os.makedirs(self.config.statedir)
            self._save_state()
            self._build_fabric()
            self._write_files()
            self._start_munge()
            self._start_slurm(timeout)
            for f in faults:
                kind, node, value = parse_fault(f) if isinstance(f, str) else (*f, None)[:3]
                self.fault(kind, node, value)
        except BaseException:
            self.down()
            raise
        return self

    def __enter__(self):
        if not self.is_up():
            self.up()
        return self

    def __exit__(self, *exc):
        self.down()

    def _register_cleanup(self):
        if self._cleanup_registered:
            return
        self._cleanup_registered = True
        atexit.register(self.down)
        if threading.current_thread() is threading.main_thread():
            def on_signal(signum, frame, previous={}):
                self.down()
                raise SystemExit(128 + signum)
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, on_signal)

    def _build_fabric(self):
        c = self.config
        fab = c.netns(FABRIC)
        fabric.add_netns(fab)
        for leaf in (1, 2):
            sh(["ip", "-n", fab, "link", "add", f"leaf{leaf}", "type", "bridge"])
            sh(["ip", "-n", fab, "link", "set", f"leaf{leaf}", "mtu", fabric.MTU, "up"])
        # the spine: one veth pair, an end in each leaf; its egress qdiscs
        # shape leaf1 -> leaf2 (sp1) and leaf2 -> leaf1 (sp2)
        fabric.veth(fab, "sp1", fab, "sp2")
        for leaf in (1, 2):
            sh(["ip", "-n", fab, "link", "set", f"sp{leaf}", "master", f"leaf{leaf}", "up"])
            fabric.tbf(fab, f"sp{leaf}", c.spine_rate_mbit)
        for node in c.node_names:
            self._attach(c.netns(node), f"p{node[4:]}", c.leaf_of(node), c.address(node),
                         c.rate_mbit)
        # the head (slurmctld, login): an unshaped port on leaf 1
        self._attach(c.netns(HEAD), "head", 1, f"{c.subnet}.254", None)

    def _attach(self, ns, port, leaf, address, rate_mbit):
        fab = self.config.netns(FABRIC)
        fabric.add_netns(ns)
        fabric.veth(ns, "eth0", fab, port)
        sh(["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"])
        sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
        sh(["ip", "-n", fab, "link", "set", port, "master", f"leaf{leaf}", "up"])
        if rate_mbit:
            fabric.node_sysctls(ns)
            fabric.tbf(ns, "eth0", rate_mbit)        # node -> fabric
            fabric.tbf(fab, port, rate_mbit)         # fabric -> node

    def _write_files(self):
        c = self.config
        for d in ("etc", "munge", "ctld", "log", "run", "spool", "tmp", "jobs"):
            os.makedirs(self.path(d), exist_ok=True)
        for node in c.node_names:
            os.makedirs(self.path("spool", node), exist_ok=True)
            os.makedirs(self.path("tmp", node), exist_ok=True)
        with open(self.slurm_conf, "w") as f:
            f.write(slurm_conf_text(c, self.path))
        prolog = self.path("etc", "task_prolog.sh")
        with open(prolog, "w") as f:
            # every emulated node shares this machine's cores: an MPI rank
            # that busy-polls starves the others (65 ms for an 8 B
            # all_reduce on 4 nodes); yielding when idle keeps it ~50 us
            f.write("#!/bin/sh\necho export OMPI_MCA_mpi_yield_when_idle=1\n")
        os.chmod(prolog, 0o755)
        with open(self.topology_file, "w") as f:
            json.dump(topology(c), f, indent=1)
        with open(self.hostfile, "w") as f:
            f.write("".join(f"{n} slots={c.cpus_per_node}\n" for n in c.node_names))

    def _start_munge(self):
        key = self.path("munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        os.chmod(self.path("munge"), 0o755)
        sh(in_netns(self.config.netns(HEAD), [
            "munged", f"--socket={self.munge_socket}", f"--key-file={key}",
            f"--pid-file={self.path('munge', 'munged.pid')}",
            f"--seed-file={self.path('munge', 'munged.seed')}",
            f"--log-file={self.path('log', 'munged.log')}"]))

    @property
    def munge_socket(self):
        return self.path("munge", "munge.sock")

    def _start_slurm(self, timeout):
        c = self.config
        env = self.env
        sh(in_netns(c.netns(HEAD), ["slurmctld", "-c", "-f", self.slurm_conf], hostname=HEAD),
           env=env)
        for node in c.node_names:
            self.start_slurmd(node)
        deadline = time.monotonic() + timeout
        while True:
            states = self.node_states()
            if states and all(s == "idle" for s in states.values()):
                return
            if time.monotonic() > deadline:
                raise TestbedError(f"nodes not idle after {timeout} s: {states}; see "
                                   f"{self.path('log')}")
            time.sleep(0.1)

    def start_slurmd(self, node):
        """Start `node`'s slurmd (in its namespace, its own host name and its
        CPU cgroup, which every job step it forks inherits)."""
        cg = _cpu_cgroup(self.config, node, create=True)
        pre = f'echo $$ > {cg}/cgroup.procs && ' if cg else ""
        sh(in_netns(self.config.netns(node), [
            "sh", "-c", pre + 'exec slurmd -f "$0" -N "$1"', self.slurm_conf, node],
            hostname=node), env=self.env)

    # -- using it -----------------------------------------------------------
    def login(self, argv, **kw):
        """Run `argv` on the head (login) node with this cluster's SLURM_CONF;
        returns the CompletedProcess (text, output captured unless told)."""
        kw.setdefault("capture_output", "stdout" not in kw and "stderr" not in kw)
        kw.setdefault("text", True)
        env = self.env
        env.update(kw.pop("env", None) or {})
        return subprocess.run(self.login_command(argv), env=env, **kw)

    def login_command(self, argv):
        """The command line that runs `argv` on the head node."""
        return in_netns(self.config.netns(HEAD), argv, hostname=HEAD)

    def node_states(self):
        """{node: Slurm state} from sinfo ("idle", "alloc", "down*", ...)."""
        proc = self.login(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=30)
        if proc.returncode != 0:
            return {}
        return dict(line.split()[:2] for line in proc.stdout.splitlines() if line.strip())

    def status(self):
        """A dict describing the instance: nodes and their states, links, faults."""
        c = self.config
        up = self.is_up()
        return {"name": c.name, "up": up, "statedir": c.statedir, "subnet": f"{c.subnet}.0/24",
                "slurm_conf": self.slurm_conf, "topology": self.topology_file,
                "rate_mbit": c.rate_mbit, "spine_rate_mbit": c.spine_rate_mbit,
                "nodes": {n: {"address": c.address(n), "leaf": c.leaf_of(n)}
                          for n in c.node_names},
                "node_states": self.node_states() if up else {},
                "faults": sorted(self.faults)}

    def node_pids(self, node):
        """Pids of every process running in `node`'s namespace."""
        return fabric.netns_pids(self.config.netns(node))

    def kill_node(self, node):
        """The node dies: SIGKILL its slurmd and every process on it."""
        self._check_node(node)
        for pid in self.node_pids(node):
            _signal(pid, signal.SIGKILL)

    def revive_node(self, node, timeout=30):
        """Start `node`'s slurmd again and return it to service."""
        self._check_node(node)
        self.start_slurmd(node)
        deadline = time.monotonic() + timeout
        while self.node_states().get(node, "").rstrip("*") not in ("idle", "alloc", "mix"):
            self.login(["scontrol", "update", f"nodename={node}", "state=resume"])
            if time.monotonic() > deadline:
                raise TestbedError(f"{node} did not come back: {self.node_states()}")
            time.sleep(0.3)

    def _check_node(self, node):
        if node not in self.config.node_names:
            raise TestbedError(f"no node {node!r}; the nodes are "
                               + ", ".join(self.config.node_names))

    # -- faults -------------------------------------------------------------
    def fault(self, kind, node, value=None):
        """Apply fault `kind` to `node` now (see `testbed.faults.KINDS`).

        Returns the key ("kind:node") to pass to `clear`.
        """
        from . import faults
        self._check_node(node)
        key = f"{kind}:{node}"
        with self._lock:
            if key in self.faults:
                raise TestbedError(f"fault {key} is already applied")
            self.faults[key] = faults.apply(self, kind, node, value)
            self._save_state()
        return key

    def clear(self, kind_or_key=None, node=None):
        """Remove one fault ("kind:node", or kind and node), or all of them."""
        from . import faults
        with self._lock:
            keys = list(self.faults) if kind_or_key is None else \
                [kind_or_key if node is None else f"{kind_or_key}:{node}"]
            for key in keys:
                if key not in self.faults:
                    raise TestbedError(f"no fault {key} is applied; applied: "
                                       + (", ".join(self.faults) or "none"))
                kind, node_ = key.split(":")
                faults.remove(self, kind, node_, self.faults.pop(key))
            if os.path.isdir(self.config.statedir):
                self._save_state()

    # -- teardown -----------------------------------------------------------
    def down(self):
        """Remove everything of this instance; safe to call twice, and on a
        half-built or crashed instance."""
        c = self.config
        names = [ns for ns in fabric.netns_list() if c.owns_netns(ns)]
        # slurmctld first and gently, so it does not mark nodes down in its
        # state save (the state dir goes anyway); then everything by pid
        for ns in names:
            for pid in fabric.netns_pids(ns):
                _signal(pid, signal.SIGCONT)
        for ns in sorted(names, key=lambda n: n != c.netns(HEAD)):
            fabric.del_netns(ns)
        # processes outside our namespaces that we started (none by design,
        # but a fault helper may be mid-start): by the pids we recorded
        for info in self.faults.values():
            for pid in info.get("pids", []) if isinstance(info, dict) else []:
                _signal(pid, signal.SIGKILL)
        self.faults = {}
        _remove_cgroups(c)
        if os.path.isdir(c.statedir):
            shutil.rmtree(c.statedir, ignore_errors=True)


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# -- CPU cgroups (for cpu-contended) ---------------------------------------

def _cpu_cgroup_root():
    """The cgroup directory whose children can get a CPU quota, or None."""
    for root, marker in (("/sys/fs/cgroup/cpu", "cpu.cfs_quota_us"),
                         ("/sys/fs/cgroup", "cgroup.controllers")):
        if os.path.exists(os.path.join(root, marker)) and os.access(root, os.W_OK):
            if marker == "cgroup.controllers":
                with open(os.path.join(root, marker)) as f:
                    if "cpu" not in f.read().split():
                        continue
            return root
    return None


def _cpu_cgroup(config, node, create=False):
    root = _cpu_cgroup_root()
    if root is None:
        return None
    path = os.path.join(root, config.prefix, node)
    if create:
        os.makedirs(path, exist_ok=True)
        parent = os.path.dirname(path)
        ctl = os.path.join(parent, "cgroup.subtree_control")
        if os.path.exists(ctl):     # cgroup v2: the cpu controller for the children
            try:
                with open(ctl, "w") as f:
                    f.write("+cpu")
            except OSError:
                pass
    return path if os.path.isdir(path) else None


def _remove_cgroups(config):
    root = _cpu_cgroup_root()
    if root is None:
        return
    top = os.path.join(root, config.prefix)
    if not os.path.isdir(top):
        return
    for child in os.listdir(top):
        path = os.path.join(top, child)
        if os.path.isdir(path):
            for _ in range(50):
                try:
                    os.rmdir(path)
                    break
                except OSError:      # a killed process still leaving
                    time.sleep(0.05)
    try:
        os.rmdir(top)
    except OSError:
        pass


# -- files ------------------------------------------------------------------

def slurm_conf_text(c, path):
    ctld_port, slurmd_port = c.ports
    lines = [
        f"ClusterName={PREFIX}_{c.name.replace('-', '_')}",
        f"SlurmctldHost={HEAD}({c.subnet}.254)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        f"AuthInfo=socket={path('munge', 'munge.sock')}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={path('ctld')}",
        f"SlurmctldPidFile={path('run', 'slurmctld.pid')}",
        f"SlurmctldLogFile={path('log', 'slurmctld.log')}",
        f"SlurmdSpoolDir={path('spool', '%n')}",
        f"SlurmdPidFile={path('run', 'slurmd-%n.pid')}",
        f"SlurmdLogFile={path('log', 'slurmd-%n.log')}",
        # all nodes share /tmp: without a TmpFS each, PMIx's per-job
        # directory collides on the second node
        f"TmpFS={path('tmp', '%n')}",
        f"TaskProlog={path('etc', 'task_prolog.sh')}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SlurmdParameters=config_overrides",
        "MpiDefault=pmix",
        "SwitchType=switch/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={path('log', 'jobcomp.txt')}",
        "ReturnToService=2",
        # a dead node is noticed in seconds, not the default 5 minutes
        "SlurmdTimeout=10",
        "SlurmctldTimeout=10",
        "MessageTimeout=10",
        "InactiveLimit=0",
        "KillWait=2",
        "MinJobAge=3600",
        "SchedulerParameters=defer_batch=0",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
    ]
    for node in c.node_names:
        lines.append(f"NodeName={node} NodeAddr={c.address(node)} CPUs={c.cpus_per_node} "
                     f"RealMemory=1000 State=UNKNOWN")
    lines.append(f"PartitionName={c.partition} Nodes=ALL Default=YES MaxTime=INFINITE "
                 "State=UP OverSubscribe=YES")
    return "\n".join(lines) + "\n"


def topology(c):
    """The fabric as EC2 DescribeInstanceTopology output: each node is an
    instance (its id the node name) under its leaf, both under the spine."""
    return {"Instances": [
        {"InstanceId": node, "InstanceType": "testbed.node", "GroupName": c.prefix,
         "AvailabilityZone": "local", "ZoneId": "local-1",
         "NetworkNodes": [f"nn-{c.name}-spine", f"nn-{c.name}-leaf{c.leaf_of(node)}"]}
        for node in c.node_names]}


def parse_fault(text):
    """"kind:node[:value]" -> (kind, node, value or None)."""
    parts = str(text).split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise TestbedError(f"--fault {text!r}: expected KIND:NODE[:VALUE], e.g. "
                           "slow-link:node3 or slow-link:node3:0.25")
    return parts[0], parts[1], (parts[2] if len(parts) == 3 else None)


def check_host():
    """Raise TestbedError saying why this machine cannot run a testbed."""
    if os.geteuid() != 0:
        raise TestbedError("the testbed needs root (network namespaces, tc, Slurm daemons)")
    missing = [b for b in _SLURM_BINARIES + ("ip", "tc", "nsenter", "unshare")
               if shutil.which(b) is None and not os.path.exists(f"/usr/sbin/{b}")]
    if missing:
        raise TestbedError("missing on this machine: " + ", ".join(missing)
                           + " (apt-get install slurmctld slurmd slurm-client munge iproute2)")
    probe = f"{PREFIX}-probe{os.getpid()}"
    proc = sh(["ip", "netns", "add", probe], check=False)
    if proc.returncode != 0:
        raise TestbedError(f"the kernel refuses network namespaces: {proc.stderr.strip()}")
    sh(["ip", "netns", "del", probe], check=False)
