"""testbed.gpunodes: emulated nodes of one GPU host (real namespaces, a
bridge, tbf, Open MPI through the launch agent).  On a CPU machine: every
node's rank runs in its own namespace under its host name with its own
NCCL_HOSTID and CUDA_VISIBLE_DEVICES (what makes NCCL take its net
transport between them), links are shaped as asked, and nothing is left."""
import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from testbed.gpunodes import GpuNodes, NodesError, parse_slow  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip")
                                or not shutil.which("mpirun"),
                                reason="needs root, iproute2 and Open MPI")


def _netns():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_each_rank_runs_on_its_node_with_its_host_id_and_gpu(tmp_path):
    name = f"t{uuid.uuid4().hex[:6]}"
    nodes = GpuNodes(name, nodes=3, rate_mbit=300, gpus=["1", "0", "1"])
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node1 slots=1\nnode2 slots=1\nnode3 slots=1\n")
    show = ('echo "$(hostname) $NCCL_HOSTID $CUDA_VISIBLE_DEVICES '
            '$(ip -o -4 addr show eth0 | awk \'{print $4}\')"')
    try:
        nodes.up()
        nodes.shape("node2", 150)
        r = nodes.run("node1", ["mpirun", "--allow-run-as-root", "-np", "3", "--hostfile",
                                str(hostfile), "--map-by", "ppr:1:node", "sh", "-c", show],
                      capture_output=True, text=True, timeout=60)
        qdisc = subprocess.run(["tc", "-n", nodes.netns("node2"), "qdisc", "show", "dev",
                                "eth0"], capture_output=True, text=True).stdout
        port = subprocess.run(["tc", "-n", nodes.netns("sw"), "qdisc", "show", "dev", "p2"],
                              capture_output=True, text=True).stdout
        others = subprocess.run(["tc", "-n", nodes.netns("node3"), "qdisc", "show", "dev",
                                 "eth0"], capture_output=True, text=True).stdout
    finally:
        nodes.down()
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(r.stdout.split("\n")[:3]) == [
        f"node{k} ccbgn-{name}-node{k} {gpu} {nodes.subnet}.{k}/24"
        for k, gpu in ((1, 1), (2, 0), (3, 1))]
    assert "rate 150Mbit" in qdisc and "rate 150Mbit" in port and "rate 300Mbit" in others
    assert f"ccbgn-{name}-" not in _netns()
    assert not os.path.exists(nodes.workdir)


def test_bad_input_is_one_line():
    with pytest.raises(NodesError, match=r"^--gpus: 2 GPUs for 3 nodes; give one per node$"):
        GpuNodes("x", nodes=3, gpus=["0", "1"])
    hosts = ["node1", "node2"]
    assert parse_slow("node2", hosts) == ("node2", 0.5)
    assert parse_slow("node1:0.25", hosts) == ("node1", 0.25)
    with pytest.raises(NodesError, match=re.escape("--slow 'node3': no node 'node3'")):
        parse_slow("node3", hosts)
    with pytest.raises(NodesError, match=r"the fraction must be in \(0, 1\]"):
        parse_slow("node1:2", hosts)
    r = subprocess.run([sys.executable, "-m", "testbed.gpunodes", "--nodes", "1", "--", "x"],
                       capture_output=True, text=True, timeout=60,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert (r.returncode, r.stderr) == (2, "gpunodes: --nodes 1: between 2 and 16\n")
