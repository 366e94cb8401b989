"""Host lists, host files, rank placement and topology-aware ordering."""
import json

import pytest

from ccbench_kit.errors import ConfigError
from ccbench_kit.launch import hosts as H
from ccbench_kit.launch.command import launcher
from ccbench_kit.launch.mpirun import mpirun_command


def test_parse_hosts_forms():
    assert H.parse_hosts("a,b c:4") == [H.Host("a"), H.Host("b"), H.Host("c", 4)]
    assert H.parse_hosts(["10.0.0.1", "10.0.0.2:2"]) == [H.Host("10.0.0.1"),
                                                         H.Host("10.0.0.2", 2)]
    assert H.parse_hosts(["fe80::1"]) == [H.Host("fe80::1")]


@pytest.mark.parametrize("spec, message", [
    ("a,a", "--hosts: host 'a' is listed twice"),
    ("a b:0", "--hosts: host 'b' has 0 slots; need at least 1"),
    ("a/b", "--hosts: 'a/b' is not a host name"),
    (" , ", "--hosts: no hosts given"),
])
def test_parse_hosts_errors(spec, message):
    with pytest.raises(ConfigError) as e:
        H.parse_hosts(spec)
    assert str(e.value) == message


def test_read_hostfile(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("# head\nnode1 slots=8\n\nnode2   # spare\nnode3 max_slots=4 slots=2\n")
    assert H.read_hostfile(f) == [H.Host("node1", 8), H.Host("node2"), H.Host("node3", 2)]


@pytest.mark.parametrize("text, message", [
    ("", "--hosts-file: host file {f} lists no hosts"),
    ("# nothing\n\n", "--hosts-file: host file {f} lists no hosts"),
    ("a\nb cpus=3\n", "--hosts-file: {f} line 2: cannot read 'cpus=3' (expected one host "
                      "per line, optionally `slots=N`)"),
    ("a\nb\na\n", "--hosts-file {f}: host 'a' is listed twice"),
])
def test_read_hostfile_errors(tmp_path, text, message):
    f = tmp_path / "hosts"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        H.read_hostfile(f)
    assert str(e.value) == message.format(f=f)


def test_read_hostfile_missing(tmp_path):
    with pytest.raises(ConfigError, match=r"^--hosts-file: cannot read host file .*/nope: "
                                          r"No such file or directory$"):
        H.read_hostfile(tmp_path / "nope")


def test_place_blocks_in_host_order(tmp_path):
    p = H.place(6, hosts=["b", "a", "c"])
    assert p.names == ["b", "a", "c"] and p.ranks_per_node == 2
    assert [p.host_of_rank(r) for r in range(6)] == ["b", "b", "a", "a", "c", "c"]
    p = H.place(6, hosts="b,a,c", nnodes=2)
    assert p.names == ["b", "a"] and p.ranks_per_node == 3 and p.nranks == 6
    p = H.place(8, hosts=["x", "y", "z"], ranks_per_node=4)
    assert p.names == ["x", "y"]
    f = tmp_path / "hf"
    f.write_text("n1 slots=4\nn2 slots=4\n")
    assert H.place(8, hosts_file=f).ranks_per_node == 4
    assert H.place(5) is None and H.place(5, nnodes=1, ranks_per_node=5) is None


@pytest.mark.parametrize("kw, message", [
    (dict(nranks=4, nnodes=2), "-N/--nnodes: 2 nodes need --hosts or --hosts-file (or "
                               "-S/--slurm-mode to let Slurm choose them)"),
    (dict(nranks=5, hosts="a,b"), "-r/--nworkers: 5 ranks don't divide evenly among 2 "
                                  "nodes; use a multiple of the node count"),
    (dict(nranks=6, hosts="a,b", nnodes=3), "-N/--nnodes: 3 nodes asked for but only 2 "
                                            "hosts given (a, b)"),
    (dict(nranks=6, hosts="a,b", ranks_per_node=2), "--ranks-per-node: -r 6 at 2 ranks per "
                                                    "node needs 3 nodes, but only 2 hosts are "
                                                    "given"),
    (dict(nranks=6, hosts="a,b,c", nnodes=3, ranks_per_node=3), "--ranks-per-node: 3 ranks "
                                                                "per node x 3 nodes is not -r 6"),
    (dict(nranks=6, hosts="a:2,b:2"), "--hosts: host a has 2 slots but 3 ranks per node "
                                      "are needed"),
    (dict(nranks=4, nnodes=0, hosts="a"), "-N/--nnodes: must be a positive integer, got 0"),
    (dict(nranks=4, ranks_per_node=3), "--ranks-per-node: 3 ranks per node on one node, "
                                       "but -r is 4"),
    (dict(nranks=4, hosts="a", hosts_file="f"), "--hosts: give --hosts or --hosts-file, "
                                                "not both"),
])
def test_place_errors(kw, message):
    with pytest.raises(ConfigError) as e:
        H.place(**kw)
    assert str(e.value) == message


def test_mpirun_command_places_blocks_per_host():
    cmd = mpirun_command(6, ["prog", "arg"], hostfile="/tmp/hf", ranks_per_node=3,
                         export=["NCCL_ALGO", "OMPI_MCA_btl"])
    i = cmd.index("-np")
    assert cmd[i:i + 2] == ["-np", "6"]
    j = cmd.index("--hostfile")
    assert cmd[j:j + 4] == ["--hostfile", "/tmp/hf", "--map-by", "ppr:3:node"]
    assert "--oversubscribe" not in cmd  # Open MPI decides from each host's cores
    assert cmd[-6:] == ["-x", "NCCL_ALGO", "-x", "OMPI_MCA_btl", "prog", "arg"]


def test_launcher_writes_hostfile_and_removes_it(tmp_path):
    import gc
    import os

    cmd_of = launcher(4, hosts=["h1:8", "h2"], env={"NCCL_PROTO": "simple"})
    cmd = cmd_of(["prog"])
    hf = cmd[cmd.index("--hostfile") + 1]
    assert open(hf).read() == "h1 slots=8\nh2\n"
    assert cmd[cmd.index("--map-by") + 1] == "ppr:2:node"
    assert cmd[-3:] == ["-x", "NCCL_PROTO", "prog"]
    assert launcher(3) is None  # plain mpirun here
    del cmd_of
    gc.collect()
    assert not os.path.exists(hf)


# -- topology -------------------------------------------------------------

def _topology(levels):
    return {"Instances": [{"InstanceId": iid, "InstanceType": "p5en.48xlarge",
                           "NetworkNodes": list(nodes), "AvailabilityZone": "us-east-1a",
                           "ZoneId": "use1-az1"} for iid, nodes in levels.items()]}


def test_topology_order_like_the_aws_recipe():
    # 4 instances: one top node, alternating spines, a leaf each
    topo = _topology({f"i-{k}example": ["nn-1example", f"nn-{2 + (k + 1) % 2}example",
                                        f"nn-{3 + k}example"] for k in range(1, 5)})
    ordered, unplaced = H.topology_order([f"i-{k}example" for k in range(1, 5)], topo)
    assert ordered == ["i-1example", "i-3example", "i-2example", "i-4example"]
    assert unplaced == []


def test_topology_order_shared_leaves_contiguous_and_names_mapped(tmp_path):
    leaf = {"h1": ("t", "s1", "L1"), "h2": ("t", "s2", "L2"), "h3": ("t", "s1", "L3"),
            "h4": ("t", "s1", "L1"), "h5": ("t", "s2", "L2"), "h6": ("t", "s1", "L1")}
    topo = _topology({f"i-{h}": nodes for h, nodes in leaf.items()})
    # DescribeInstances output: hosts are EC2 names, IPs or Slurm names
    ips = {h: f"10.0.1.{k}" for k, h in enumerate(leaf, 1)}
    described = {"Reservations": [{"Instances": [
        {"InstanceId": f"i-{h}", "PrivateDnsName": f"ip-10-0-1-{k}.ec2.internal",
         "PrivateIpAddress": ips[h],
         "NetworkInterfaces": [{"PrivateIpAddress": ips[h],
                                "PrivateIpAddresses": [{"PrivateIpAddress": ips[h]}]}]}
        for k, h in enumerate(leaf, 1)]}]}
    (tmp_path / "topo.json").write_text(json.dumps([topo, {"Instances": []}]))
    (tmp_path / "inst.json").write_text(json.dumps(described))
    names = ["ip-10-0-1-1", "10.0.1.2", "ip-10-0-1-3.ec2.internal", "ip-10-0-1-4",
             "unknown-node", "10.0.1.5", "ip-10-0-1-6"]
    ordered, unplaced = H.topology_order(names, str(tmp_path / "topo.json"),
                                         str(tmp_path / "inst.json"))
    # s1 first (its first host comes first): L1 = h1, h4, h6, then L3 = h3; then s2 = h2, h5
    assert ordered == ["ip-10-0-1-1", "ip-10-0-1-4", "ip-10-0-1-6", "ip-10-0-1-3.ec2.internal",
                       "10.0.1.2", "10.0.1.5", "unknown-node"]
    assert unplaced == ["unknown-node"]


def test_topology_many_instances_in_pages(tmp_path):
    # 70 instances over two pages (the API returns at most 64 at a time)
    insts = {f"i-{k}": ["nn-top", f"nn-spine{k % 2}", f"nn-leaf{k % 5}"] for k in range(70)}
    items = list(_topology(insts)["Instances"])
    pages = [{"Instances": items[:64], "NextToken": "x"}, {"Instances": items[64:]}]
    ordered, _ = H.topology_order(list(insts), pages)
    assert sorted(ordered) == sorted(insts)
    key = [tuple(insts[i]) for i in ordered]
    # every (spine, leaf) group is one contiguous block, and so is every spine
    for level in (2, 3):
        runs = [k[:level] for n, k in enumerate(key) if n == 0 or key[n - 1][:level] != k[:level]]
        assert len(runs) == len(set(runs))


@pytest.mark.parametrize("data, message", [
    ({"Reservations": []}, "--topology: expected DescribeInstanceTopology output: an object "
                           "with an \"Instances\" list"),
    ({"Instances": [{"InstanceId": "i-1"}]}, "--topology: instance 0: needs \"InstanceId\" "
                                             "and a non-empty \"NetworkNodes\" list of strings"),
    ({"Instances": [{"InstanceId": "i-1", "NetworkNodes": ["a", "b"]},
                    {"InstanceId": "i-2", "NetworkNodes": ["a", "b", "c"]}]},
     "--topology: instances have different numbers of network node levels ([2, 3]); "
     "expected one depth"),
])
def test_topology_bad_input(data, message):
    with pytest.raises(ConfigError) as e:
        H.load_topology(data)
    assert str(e.value) == message


def test_cluster_hostfile_cli(cli, tmp_path):
    topo = _topology({"i-a": ["t", "s1", "l1"], "i-b": ["t", "s2", "l2"],
                      "i-c": ["t", "s1", "l1"]})
    (tmp_path / "topo.json").write_text(json.dumps(topo))
    (tmp_path / "hosts.txt").write_text("i-a slots=8\ni-b slots=8\ni-c slots=8\nspare\n")
    r = cli("cluster", "hostfile", "-i", tmp_path / "hosts.txt", "--topology",
            tmp_path / "topo.json", "-o", tmp_path / "sorted.txt", timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "sorted.txt").read_text() == \
        "i-a slots=8\ni-c slots=8\ni-b slots=8\nspare\n"
    assert r.stderr.strip() == "warning: 1 host(s) not in the topology, put last: spare"
    (tmp_path / "bad.json").write_text("{not json")
    r = cli("cluster", "hostfile", "-i", tmp_path / "hosts.txt", "--topology",
            tmp_path / "bad.json", timeout=60)
    assert r.returncode == 2 and r.stderr.startswith(
        f"ccbench: error: --topology: {tmp_path / 'bad.json'} is not valid JSON (")
    assert "Traceback" not in r.stderr


def test_run_on_hosts_of_this_machine(cli, tmp_path):
    """--hosts with this machine's own name: mpirun's host-file path end to end."""
    import socket
    host = socket.gethostname()
    out = tmp_path / "r.nc"
    r = cli("run", "all_reduce", "-r", "3", "--hosts", host, "-b", "8", "-e", "1K", "-f", "32",
            "--check", "-n", "3", "-w", "1", "--out", out, "--non-interactive", timeout=120)
    assert r.returncode == 0, r.stderr
    import ccbench_kit as ccb
    ds = ccb.load(out)
    assert list(ds["host"].values) == [host] * 3
    assert (ds["wrong"].values == 0).all()
