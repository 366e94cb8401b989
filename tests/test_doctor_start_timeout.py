"""The doctor's --timeout holds from its start (issue 37): a job whose first
message never arrives (Open MPI's TCP transport given an eager limit it
cannot send, as --bw-size 4G once set it) ends, names the start-up as what
was stuck, and exits 3; before, every rank spun in Comm_dup while the
watchdog took "starting" for local work, past any --timeout.  Real hosts
(network namespaces), one check."""
import subprocess

import pytest

from conftest import BIN
from test_multihost_netns import named_hosts


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    with named_hosts(2, tmp_path_factory.mktemp("start-netns"), "ccbst") as hosts:
        yield hosts


def test_a_start_up_that_hangs_ends_at_the_timeout_and_is_named(net, tmp_path):
    stuck = str(3 << 30)   # past what the transport sends whole: the first message never arrives
    env = {**net.env, "OMPI_MCA_btl_tcp_eager_limit": stuck,
           "OMPI_MCA_btl_tcp_max_send_size": stuck}
    h0 = net.names[0]
    r = subprocess.run(["ip", "netns", "exec", h0, "unshare", "--uts", "sh", "-c",
                        'hostname "$1"; shift; exec "$@"', "sh", h0, str(BIN / "ccbench"),
                        "doctor", "--hosts", *net.names, "--backend", "mpi", "--bw-size", "64K",
                        "--ranks-per-node", "1", "--repeats", "1", "--timeout", "3",
                        "--out", str(tmp_path / "d.nc")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "verdict: unknown"
    named = ("is alive but stuck in doctor start-up (MPI's first messages, the pair "
             "connections, the backend), starting: no progress for ")
    assert named in r.stderr.splitlines()[-1], r.stderr
    assert "attempt 1 stopped before its first measurement and was started again" in r.stdout
    assert not (tmp_path / "d.nc").exists()   # nothing was measured
    assert not [p for ps in net.pids().values() for p in ps]   # every process of it is gone
