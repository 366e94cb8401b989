"""Several real "hosts" on this machine: network namespaces joined by a
bridge, each with its own address and host name, and Open MPI over TCP
between them, started through a plm_rsh_agent that maps a host name to its
namespace (docs/testing.md).  Traffic stays inside our own namespaces; the root
namespace is never touched.  Everything is torn down by the fixture."""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
SUBNET = "10.213.47"  # a private /24 that lives only inside our namespaces


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30,
                          check=check)


def _netns_usable():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare"):
        return "needs root, ip (iproute2) and unshare"
    name = f"ccbprobe{os.getpid()}"
    r = _ip("netns", "add", name, check=False)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


# slow: more than ~20 s in all, so the module starts first under `make test` (conftest)
pytestmark = [pytest.mark.skipif(_netns_usable() is not None, reason=str(_netns_usable())),
              pytest.mark.slow]


class NetHosts:
    """`n` hosts named PREFIXh0.. (namespace = host name), a bridge in
    PREFIXsw, addresses SUBNET.10+i/24 on each host's veth0."""

    def __init__(self, n, workdir):
        self.prefix = f"ccb{os.getpid() % 100000}"
        self.switch = f"{self.prefix}sw"
        self.names = [f"{self.prefix}h{i}" for i in range(n)]
        self.made = []
        self.agent = Path(workdir) / "netns-agent.sh"
        # Open MPI calls the agent as `agent HOST COMMAND...`, like ssh: run the
        # command line in HOST's namespace, under HOST's own host name.
        self.agent.write_text(textwrap.dedent("""\
            #!/bin/sh
            host=$1; shift
            exec ip netns exec "$host" unshare --uts sh -c 'hostname "$1"; shift; eval "$*"' sh "$host" "$@"
            """))
        self.agent.chmod(0o755)

    def up(self):
        sw = self.switch
        _ip("netns", "add", sw)
        self.made.append(sw)
        _ip("-n", sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", sw, "link", "set", "br0", "up")
        for i, ns in enumerate(self.names):
            _ip("netns", "add", ns)
            self.made.append(ns)
            _ip("link", "add", "veth0", "netns", ns, "type", "veth", "peer", "name", f"{ns}p",
                "netns", sw)
            _ip("-n", ns, "addr", "add", f"{SUBNET}.{10 + i}/24", "dev", "veth0")
            _ip("-n", ns, "link", "set", "veth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", sw, "link", "set", f"{ns}p", "master", "br0", "up")
        return self

    @property
    def env(self):
        env = dict(os.environ)
        env.update({
            "OMPI_MCA_plm_rsh_agent": str(self.agent),
            "OMPI_MCA_btl": "self,vader,tcp",
            "OMPI_MCA_btl_tcp_if_include": f"{SUBNET}.0/24",
            "OMPI_MCA_oob_tcp_if_include": f"{SUBNET}.0/24",
            # every "host" believes it has all the cores: don't bind, do yield
            "OMPI_MCA_hwloc_base_binding_policy": "none",
            "OMPI_MCA_mpi_yield_when_idle": "1",
            "PYTHONUNBUFFERED": "1",
        })
        return env

    def run(self, host, argv, timeout=180):
        """`argv` on `host`, as a user logged in there would run it."""
        cmd = ["ip", "netns", "exec", host, "unshare", "--uts", "sh", "-c",
               'hostname "$1"; shift; exec "$@"', "sh", host, *map(str, argv)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=self.env)

    def pids(self):
        out = {}
        for ns in self.made:
            r = _ip("netns", "pids", ns, check=False)
            out[ns] = [int(p) for p in r.stdout.split()]
        return out

    def down(self):
        for ns, pids in self.pids().items():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.2)
        for ns in reversed(self.made):
            _ip("netns", "del", ns, check=False)
        self.made = []


@contextlib.contextmanager
def named_hosts(n, workdir, prefix):
    """`n` NetHosts named PREFIX<pid>h0.. (a module of its own beside
    another's at once), up for the block; skips where netns cannot be made."""
    why = _netns_usable()
    if why:
        pytest.skip(why)
    hosts = NetHosts(n, workdir)
    hosts.prefix = f"{prefix}{os.getpid() % 10000}"
    hosts.switch, hosts.names = f"{hosts.prefix}sw", [f"{hosts.prefix}h{i}" for i in range(n)]
    try:
        yield hosts.up()
    finally:
        hosts.down()


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    hosts = NetHosts(3, tmp_path_factory.mktemp("netns"))
    try:
        yield hosts.up()
    finally:
        hosts.down()
    left = _ip("netns", "list").stdout
    assert not any(ns in left for ns in [hosts.switch, *hosts.names])


def _load(path):
    import ccbench_kit as ccb
    return ccb.load(path).load()


def test_sweep_across_three_hosts(net, tmp_path):
    h0, h1, h2 = net.names
    out = tmp_path / "r.nc"
    r = net.run(h0, [BIN / "ccbench", "run", "all_reduce", "-r", "3", "--hosts", h0, h1, h2,
                     "-b", "8", "-e", "64K", "-f", "32", "--algorithms", "ring,mpi", "--check",
                     "-n", "5", "-w", "1", "--out", out, "--non-interactive"])
    assert r.returncode == 0, r.stdout + r.stderr
    ds = _load(out)
    # one rank per host, in host order (all traffic over TCP between namespaces);
    # each rank reports its own host name
    assert list(ds["host"].values) == [h0, h1, h2]
    assert json.loads(ds.attrs["hosts"]) == [h0, h1, h2]
    assert list(ds["size"].values) == [8, 256, 8192]
    assert (ds["wrong"].values == 0).all()
    assert (ds["latency"].values > 0).all()
    assert all(net.pids()[ns] == [] for ns in net.names)  # every rank and daemon exited


def test_topology_sorted_hostfile_places_ranks(net, tmp_path, cli):
    h0, h1, h2 = net.names
    # h0 and h2 under one leaf switch, h1 under another
    topo = {"Instances": [{"InstanceId": h, "NetworkNodes": ["top", "spine", leaf]}
                          for h, leaf in ((h0, "leafA"), (h1, "leafB"), (h2, "leafA"))]}
    (tmp_path / "topo.json").write_text(json.dumps(topo))
    (tmp_path / "hosts.txt").write_text(f"{h0}\n{h1}\n{h2}\n")
    r = cli("cluster", "hostfile", "-i", tmp_path / "hosts.txt", "--topology",
            tmp_path / "topo.json", "-o", tmp_path / "sorted.txt", timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "sorted.txt").read_text() == f"{h0}\n{h2}\n{h1}\n"
    out = tmp_path / "r.nc"
    r = net.run(h0, [BIN / "ccbench", "run", "all_gather", "-r", "4", "--hosts-file",
                     tmp_path / "sorted.txt", "-N", "2", "-b", "1000", "--check", "-n", "3",
                     "-w", "1", "--out", out, "--non-interactive"])
    assert r.returncode == 0, r.stdout + r.stderr
    ds = _load(out)
    assert list(ds["host"].values) == [h0, h0, h2, h2]
    assert (ds["wrong"].values == 0).all()


def test_dask_cluster_across_hosts(net, tmp_path):
    h0, h1, _ = net.names
    script = tmp_path / "cluster_run.py"
    script.write_text(textwrap.dedent(f"""\
        import json
        import ccbench_kit as ccb
        from ccbench_kit.launch import cluster

        c = cluster.start(4, scheduler_file={str(tmp_path / 's.json')!r},
                          hosts=[{h0!r}, {h1!r}], interface="veth0", timeout=90)
        try:
            client = c.client()
            a = ccb.run("all_reduce", client=client, sizes=[8, 1000], check=True, iters=3,
                        warmup=1, algorithms="ring,mpi")
            b = ccb.run("all_gather", 2, client=client, sizes=[64], check=True, iters=3,
                        warmup=1)
            print(json.dumps({{"address": c.address, "hosts": list(a["host"].values),
                               "wrong": int(abs(a["wrong"]).sum() + abs(b["wrong"]).sum()),
                               "hosts_b": list(b["host"].values)}}))
        finally:
            print("STOP", c.stop())
        """))
    r = net.run(h0, [sys.executable, script])
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.splitlines()[-2])
    assert result["address"].startswith(f"tcp://{SUBNET}.10:")  # the scheduler, on h0's veth0
    # ranks 0 (scheduler) and 1 on h0, 2 and 3 on h1: workers are ranks 1-3
    assert result["hosts"] == [h0, h1, h1] and result["hosts_b"] == [h0, h1]
    assert result["wrong"] == 0
    assert r.stdout.splitlines()[-1] == "STOP shut down"
    assert all(net.pids()[ns] == [] for ns in net.names)
