"""Faults a testbed node can be given, and taken back.

Each kind has an `apply` that returns what its removal needs (a JSON-able
dict, kept in the instance's state file so that another process, e.g.
``python -m testbed fault --clear``, can remove it) and a `remove`.

=============== ================================================ =============
kind            what it does                                     VALUE
=============== ================================================ =============
slow-link       the node's link (both directions) cut to a       fraction of
                fraction of its rate                             the rate (0.5)
congested-link  bulk TCP flows both ways between the node and a  flows each
                sink on the node's leaf, sharing the node link;  way (2)
                in force (every flow moving data) when applied
cpu-contended   busy loops in the node's CPU cgroup, which is    busy loops (2)
                capped at one core
stopped         SIGSTOP of the node's processes other than       -
                slurmd/slurmstepd, now and as they start
lossy-link      random drops on the node's link, both            percent (2)
                directions (nftables numgen)
crash-at-start  the first rank on the node of each of the next   jobs (1)
                VALUE jobs gets SIGSEGV as soon as it starts (a
                rank that dies in MPI start-up), by PID
=============== ================================================ =============
"""
import json
import os
import select
import signal
import subprocess
import sys
import time

from . import fabric
from .fabric import FabricError, in_netns, sh

KINDS = ("slow-link", "congested-link", "cpu-contended", "stopped", "lossy-link",
         "crash-at-start")
HERE = os.path.dirname(os.path.abspath(__file__))
SINK_PORT = 5201
FLOW_START_S = 20.0   # for every competing flow to move its first MiB


class FaultUnavailable(RuntimeError):
    """This kernel or machine cannot make the fault; the message says why."""


def apply(cluster, kind, node, value=None):
    from .cluster import TestbedError
    if kind not in KINDS:
        raise TestbedError(f"unknown fault {kind!r}; one of: {', '.join(KINDS)}")
    return _APPLY[kind](cluster, node, value)


def remove(cluster, kind, node, info):
    _REMOVE[kind](cluster, node, info)


def _number(value, default, kind, lo, hi, integer=False):
    from .cluster import TestbedError
    if value is None:
        return default
    try:
        v = int(value) if integer else float(value)
    except ValueError:
        v = None
    if v is None or not lo <= v <= hi:
        raise TestbedError(f"{kind}: value {value!r} must be a number in [{lo}, {hi}]")
    return v


def link_ends(cluster, node):
    """(namespace, device) of both shaped ends of `node`'s link: the node's
    own (its egress is the traffic from the node), then the fabric's port
    (its egress is the traffic to the node)."""
    c = cluster.config
    return [(c.netns(node), "eth0"), (c.netns("fab"), f"p{node[4:]}")]


# -- slow-link ----------------------------------------------------------------

def _slow_apply(cluster, node, value):
    fraction = _number(value, 0.5, "slow-link", 0.001, 1.0)
    rate = max(1, int(cluster.config.rate_mbit * fraction))
    for ns, dev in link_ends(cluster, node):
        fabric.tbf(ns, dev, rate)
    return {"rate_mbit": rate}


def _slow_remove(cluster, node, info):
    for ns, dev in link_ends(cluster, node):
        fabric.tbf(ns, dev, cluster.config.rate_mbit)


# -- congested-link -------------------------------------------------------------

def _sink_ns(cluster, node):
    return cluster.config.netns(f"sink{node[4:]}")


def _congest_apply(cluster, node, value):
    flows = _number(value, 2, "congested-link", 1, 8, integer=True)
    c = cluster.config
    sink = _sink_ns(cluster, node)
    k = c.node_names.index(node) + 1
    addr = f"{c.subnet}.{200 + k}"
    # the sink has an unshaped port on the node's own leaf: the flows share
    # only the node's link, not the spine
    cluster._attach(sink, f"s{k}", c.leaf_of(node), addr, None)
    # static neighbour entries both ways: an ARP exchange with a namespace
    # made a moment ago was seen to fail on this kernel, leaving the flow's
    # SYN unanswered
    for ns, peer, peer_ns in ((c.netns(node), addr, sink), (sink, c.address(node), c.netns(node))):
        mac = sh(["ip", "-n", peer_ns, "-j", "link", "show", "eth0"]).stdout
        mac = json.loads(mac)[0]["address"]
        sh(["ip", "-n", ns, "neigh", "replace", peer, "lladdr", mac, "dev", "eth0",
            "nud", "permanent"])
    flow = os.path.join(HERE, "_flow.py")
    server = subprocess.Popen(in_netns(sink, [sys.executable, flow, "serve", SINK_PORT]),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(0.3)
    client = subprocess.Popen(in_netns(c.netns(node), [sys.executable, flow, "connect", addr,
                                                       SINK_PORT, flows]),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, start_new_session=True)
    # the fault is applied once every flow moves data, not once it is launched
    ready, _, _ = select.select([client.stdout], [], [], FLOW_START_S)
    if not ready or client.stdout.readline().strip() != b"flowing":
        ended = client.poll() is not None
        _kill([client.pid, server.pid])
        err = (client.stderr.read().decode().strip() if ended
               else f"no data moved within {FLOW_START_S:g} s")
        _del_sink(cluster, sink, f"s{k}")
        raise FabricError(f"congested-link: the competing flow did not start: {err}")
    return {"pids": [server.pid, client.pid], "sink": sink, "flows": flows, "address": addr,
            "port": f"s{k}"}


def _del_sink(cluster, sink, port):
    # the sink's port in the fabric goes first: deleting the namespace frees
    # the pair later, and applying the fault again at once found it there
    sh(["ip", "-n", cluster.config.netns("fab"), "link", "del", port], check=False)
    fabric.del_netns(sink)


def _congest_remove(cluster, node, info):
    _kill(info.get("pids", []))
    _del_sink(cluster, info["sink"], info["port"])
    sh(["ip", "-n", cluster.config.netns(node), "neigh", "del", info["address"], "dev", "eth0"],
       check=False)


# -- cpu-contended ----------------------------------------------------------------

def _cpu_apply(cluster, node, value):
    from .cluster import _cpu_cgroup
    hogs = _number(value, 2, "cpu-contended", 1, 16, integer=True)
    cg = _cpu_cgroup(cluster.config, node)
    if cg is None:
        raise FaultUnavailable("cpu-contended: no writable CPU cgroup (cgroup v1 cpu or v2 "
                               "cpu controller) to confine the node to one core")
    _set_quota(cg, 1.0)
    pids = []
    for _ in range(hogs):
        p = subprocess.Popen(in_netns(cluster.config.netns(node), [
            "sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$0" -c "while True: pass"',
            sys.executable]), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        pids.append(p.pid)
    return {"pids": pids, "cgroup": cg}


def _cpu_remove(cluster, node, info):
    _kill(info.get("pids", []))
    _set_quota(info["cgroup"], None)


def _set_quota(cg, cores):
    """Cap cgroup `cg` at `cores` CPUs (None: no cap)."""
    period = 100000
    if os.path.exists(os.path.join(cg, "cpu.cfs_quota_us")):
        with open(os.path.join(cg, "cpu.cfs_period_us"), "w") as f:
            f.write(str(period))
        with open(os.path.join(cg, "cpu.cfs_quota_us"), "w") as f:
            f.write("-1" if cores is None else str(int(period * cores)))
    else:
        with open(os.path.join(cg, "cpu.max"), "w") as f:
            f.write(f"{'max' if cores is None else int(period * cores)} {period}")


# -- stopped ---------------------------------------------------------------------

def _stopped_apply(cluster, node, value):
    ns = cluster.config.netns(node)
    # the watcher lives in the node's namespace (so teardown finds it) and
    # stops every new process there too; it never stops slurmd/slurmstepd
    watcher = subprocess.Popen(in_netns(ns, [sys.executable, os.path.join(HERE, "_stopper.py"),
                                             ns]),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    # wait for its first sweep, so that on return the processes are stopped
    line = watcher.stdout.readline()
    if not line.startswith(b"ready"):
        _kill([watcher.pid])
        raise FabricError("stopped: the process watcher did not start")
    return {"pids": [watcher.pid]}


def _stopped_remove(cluster, node, info):
    _kill(info.get("pids", []))
    time.sleep(0.05)
    for pid in fabric.netns_pids(cluster.config.netns(node)):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


# -- crash-at-start ----------------------------------------------------------------

def _crash_apply(cluster, node, value):
    count = _number(value, 1, "crash-at-start", 1, 1000, integer=True)
    ns = cluster.config.netns(node)
    # in the node's namespace, like the stopper, so that teardown finds it
    watcher = subprocess.Popen(in_netns(ns, [sys.executable, os.path.join(HERE, "_crasher.py"),
                                             ns, str(count)]),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    if not watcher.stdout.readline().startswith(b"ready"):
        _kill([watcher.pid])
        raise FabricError("crash-at-start: the process watcher did not start")
    return {"pids": [watcher.pid], "count": count}


def _crash_remove(cluster, node, info):
    _kill(info.get("pids", []))


# -- lossy-link --------------------------------------------------------------------

def _nft_rules(table, dev, percent):
    per_10k = int(round(percent * 100))
    return (f"table netdev {table} {{\n  chain drop_in {{\n"
            f"    type filter hook ingress device {dev} priority 0;\n"
            f"    numgen random mod 10000 < {per_10k} drop\n  }}\n}}\n")


def lossy_unavailable():
    """None when random drops can be made here, else the reason."""
    import shutil
    if shutil.which("nft") is None:
        return "lossy-link: nft (nftables) is not installed"
    ns = f"ccbtb-nftprobe{os.getpid()}"
    try:
        fabric.add_netns(ns)
        sh(["ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb"])
        proc = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"],
                              input=_nft_rules("probe", "pa", 1), text=True,
                              capture_output=True, timeout=30)
        if proc.returncode != 0:
            return f"lossy-link: the kernel refuses nftables numgen drops: {proc.stderr.strip()}"
        return None
    finally:
        fabric.del_netns(ns)


def _lossy_apply(cluster, node, value):
    percent = _number(value, 2.0, "lossy-link", 0.01, 50)
    reason = lossy_unavailable()
    if reason:
        raise FaultUnavailable(reason)
    # drops at both ends' ingress: node -> fabric on the fabric's port,
    # fabric -> node on the node's eth0, i.e. on the wire each way
    table = f"ccbloss_{node}"
    for ns, dev in link_ends(cluster, node):
        proc = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"],
                              input=_nft_rules(table, dev, percent), text=True,
                              capture_output=True, timeout=30)
        if proc.returncode != 0:
            raise FabricError(f"lossy-link: nft failed: {proc.stderr.strip()}")
    return {"table": table, "percent": percent}


def _lossy_remove(cluster, node, info):
    for ns, _dev in link_ends(cluster, node):
        sh(["ip", "netns", "exec", ns, "nft", "delete", "table", "netdev", info["table"]],
           check=False)


def _kill(pids):
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


_APPLY = {"slow-link": _slow_apply, "congested-link": _congest_apply,
          "cpu-contended": _cpu_apply, "stopped": _stopped_apply, "lossy-link": _lossy_apply,
          "crash-at-start": _crash_apply}
_REMOVE = {"slow-link": _slow_remove, "congested-link": _congest_remove,
           "cpu-contended": _cpu_remove, "stopped": _stopped_remove,
           "lossy-link": _lossy_remove, "crash-at-start": _crash_remove}
