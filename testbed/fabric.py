"""The emulated network: one namespace per node, two leaf bridges joined by
one spine link, every link shaped with tbf.

Everything lives in network namespaces named after the instance, so two
testbeds (or a test and a demo) never meet, and the root namespace's
interfaces are never touched.  ``nsenter --net`` is used instead of
``ip netns exec`` because the latter remounts /sys, which slurmd refuses.
"""
import os
import subprocess

# MTU 9000 (jumbo frames, as on HPC fabrics): TCP's goodput is then 99.3% of
# the shaped line rate (1448/1514 = 95.6% at MTU 1500), so the rate a
# benchmark measures is the rate the link was given.
MTU = 9000


class FabricError(RuntimeError):
    """A command that builds the fabric failed."""


def sh(argv, check=True, timeout=30, **kw):
    """Run `argv`; raise FabricError with its stderr when it fails."""
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise FabricError(f"{' '.join(map(str, argv))}: "
                          f"{(proc.stderr or proc.stdout).strip()}")
    return proc


def in_netns(ns, argv, hostname=None):
    """`argv` run inside namespace `ns`, under its own host name when given."""
    cmd = ["nsenter", f"--net=/run/netns/{ns}"]
    if hostname:
        cmd += ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname]
    return cmd + [str(a) for a in argv]


def netns_list():
    out = sh(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(ns):
    out = sh(["ip", "netns", "pids", ns], check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def tbf(ns, dev, rate_mbit):
    """Shape `dev`'s egress in `ns` to `rate_mbit` Mbit/s.

    The bucket holds two jumbo frames: a deep bucket lets a burst through at
    memory speed, which shows up as a negative latency in an α-β fit.
    """
    burst = 2 * (MTU + 14)
    sh(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf",
        "rate", f"{rate_mbit}mbit", "burst", burst, "latency", "50ms"])


def node_sysctls(ns):
    """TCP socket buffers of 4 MiB by default in a node's namespace (these
    sysctls are per namespace; the root namespace keeps its own).

    The nodes share this machine's cores with whatever else runs: an MPI
    rank may wait milliseconds for a core, and with the default 16 KiB send
    buffer the link then idles.  Measured at 200 Mbit/s, 8 MiB sendrecv
    between two nodes on a loaded machine: 12.3 MB/s before, 24.8 after.
    """
    sh(["nsenter", f"--net=/run/netns/{ns}", "sysctl", "-qw",
        "net.ipv4.tcp_rmem=4096 4194304 16777216",
        "net.ipv4.tcp_wmem=4096 4194304 16777216"])


def veth(ns_a, name_a, ns_b, name_b):
    sh(["ip", "link", "add", name_a, "netns", ns_a, "type", "veth", "peer", "name", name_b,
        "netns", ns_b])
    for ns, name in ((ns_a, name_a), (ns_b, name_b)):
        sh(["ip", "-n", ns, "link", "set", name, "mtu", MTU])


def add_netns(ns):
    sh(["ip", "netns", "add", ns])
    sh(["ip", "-n", ns, "link", "set", "lo", "up"])


def del_netns(ns):
    """Kill what still runs in `ns` (by pid), then delete it."""
    import signal
    for pid in netns_pids(ns):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    sh(["ip", "netns", "del", ns], check=False)
