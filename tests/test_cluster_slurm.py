"""The kit on a real Slurm cluster: the repository's testbed (real slurmctld,
slurmd and munge, one network namespace per node, two leaves and a spine
shaped with tc).  One testbed for the whole module; everything it made is
removed at the end, also when a test fails.  Skipped only where this
machine cannot run it (no root, no namespaces, no Slurm), saying why."""
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testbed import Cluster, Config, check_host, lossy_unavailable  # noqa: E402
from testbed import TestbedError as _TestbedError  # noqa: E402  (not a test class)
from testbed.faults import link_ends  # noqa: E402

BIN = Path(sys.executable).parent
CCBENCH = str(BIN / "ccbench")


def _unusable():
    try:
        check_host()
    except _TestbedError as e:
        return str(e)
    return None


# slow: more than ~20 s in all, so the module starts first under `make test` (conftest)
pytestmark = [pytest.mark.skipif(_unusable() is not None, reason=f"testbed: {_unusable()}"),
              pytest.mark.slow]


@pytest.fixture(scope="module")
def tb():
    c = Cluster(Config(name=f"pt{os.getpid() % 100000}", nodes=4, rate_mbit=200))
    c.up()
    try:
        yield c
    finally:
        c.down()
    assert not [ns for ns in _netns() if ns.startswith(c.config.prefix + "-")]
    assert not os.path.exists(c.config.statedir)


def _netns():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _ccbench(tb, *args, timeout=300):
    return tb.login([CCBENCH, *map(str, args)], timeout=timeout)


def _ccbench_under_fault(tb, fault, *args):
    """`ccbench ARGS` with the testbed fault (KIND, NODE[, VALUE]) on, and
    cleared afterwards whatever happened."""
    key = tb.fault(*fault)
    try:
        return _ccbench(tb, *args)
    finally:
        tb.clear(key)


def _wait_jobs_done(tb, jobs=None, timeout=240):
    """Wait until `jobs` (ids; None: every job) have left the queue.  A
    test waits for its own jobs: a job another test left queued (one held
    for --begin, an allocation) would otherwise hold it until that job ran."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queued = set(tb.login(["squeue", "-h", "-o", "%i"]).stdout.split())
        if not (queued if jobs is None else queued & {str(j) for j in jobs}):
            return
        time.sleep(1)
    raise AssertionError("jobs still queued: " + tb.login(["squeue"]).stdout)


def _scancel(tb, *jobs):
    """Cancel `jobs` and wait until they have left the queue; a cancel that
    slurmctld did not take (a message timeout on a crowded machine) is tried
    again, and one it refuses fails the test, not a later test that waits."""
    for _ in range(3):
        r = tb.login(["scancel", *map(str, jobs)], timeout=60)
        if r.returncode == 0:
            break
        time.sleep(1)
    assert r.returncode == 0, r.stderr
    _wait_jobs_done(tb, jobs, timeout=60)


# -- the testbed itself ------------------------------------------------------

_RATE_PY = textwrap.dedent("""\
    import socket, sys, time
    seconds = float(sys.argv[2])
    if sys.argv[1] == "recv":  # bytes received in `seconds` from the first one
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", 5999)); s.listen(1); print("ready", flush=True)
        c, _ = s.accept(); n = len(c.recv(1 << 20)); t0 = time.time()
        while time.time() - t0 < seconds:
            b = c.recv(1 << 20)
            if not b: break
            n += len(b)
        print(n * 8 / (time.time() - t0) / 1e6, flush=True)
    else:  # until the receiver has its window and closes
        c = socket.create_connection((sys.argv[3], 5999)); buf = b"x" * (1 << 20)
        try:
            while True: c.sendall(buf)
        except OSError:
            pass
""")


def _mbit(tb, src, dst, tmp_path, seconds=1.5):
    """Mbit/s from node `src` to node `dst`: what one TCP stream delivers in
    `seconds` (counted at the receiver, so that a starved stream's queued
    bytes cannot stretch the measurement)."""
    script = tmp_path / "rate.py"
    script.write_text(_RATE_PY)
    ns = tb.config.netns
    rx = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns(dst)}", sys.executable, script,
                           "recv", str(seconds)], stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    subprocess.run(["nsenter", f"--net=/run/netns/{ns(src)}", sys.executable, script, "send",
                    str(seconds), tb.config.address(dst)], check=True, timeout=30 + seconds)
    return float(rx.communicate(timeout=30)[0])


def _link_mbit(tb, node, seconds=2.0):
    """(from `node`, to `node`) Mbit/s that its link's two shaped ends sent
    over `seconds`, from their tbf qdiscs' byte counters."""
    def sent():
        return [json.loads(subprocess.run(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev",
                                           dev], capture_output=True, text=True,
                                          check=True).stdout)[0]["bytes"]
                for ns, dev in link_ends(tb, node)]
    before, t0 = sent(), time.monotonic()
    time.sleep(seconds)
    after = sent()
    return [(b - a) * 8 / (time.monotonic() - t0) / 1e6 for a, b in zip(before, after)]


def test_fabric_topology_and_faults(tb, tmp_path):
    # every node idle in a real Slurm, under its own host name
    assert tb.node_states() == {f"node{k}": "idle" for k in range(1, 5)}
    out = tb.login(["srun", "-N", "4", "-n", "4", "hostname"], timeout=60)
    assert sorted(out.stdout.split()) == ["node1", "node2", "node3", "node4"], out.stderr
    # the topology file is EC2's, and the kit sorts by it: leaves together
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("node3\nnode1\nnode4\nnode2\n")
    r = subprocess.run([CCBENCH, "cluster", "hostfile", "-i", hosts, "--topology",
                        tb.topology_file, "-o", tmp_path / "sorted.txt"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "sorted.txt").read_text().split() == ["node3", "node4", "node1", "node2"]
    # the link is shaped to 200 Mbit/s; slow-link halves it, and only there
    assert 150 < _mbit(tb, "node1", "node2", tmp_path) < 210
    key = tb.fault("slow-link", "node2")
    assert 70 < _mbit(tb, "node1", "node2", tmp_path) < 105
    assert 150 < _mbit(tb, "node3", "node4", tmp_path) < 210
    tb.clear(key)
    assert 150 < _mbit(tb, "node1", "node2", tmp_path) < 210
    # congested-link: competing flows keep node2's link busy both ways, and
    # stop when cleared.  What one more TCP stream then gets is not the
    # fault's to promise: through tbf's tail-drop queue it got 6-152 Mbit/s
    # of the 200 in ten runs (a fair share: 22), so the link's own counters
    # are what is checked.  Towards the node the flows fill the link (197-198
    # Mbit/s in three runs); from it they reach 97-117, their ACKs queued and
    # dropped behind the full other direction
    tb.fault("congested-link", "node2")
    from_node, to_node = _link_mbit(tb, "node2")
    assert to_node > 0.9 * 200 and from_node > 0.25 * 200, (to_node, from_node)
    tb.clear("congested-link:node2")
    assert max(_link_mbit(tb, "node2")) < 1
    assert not [ns for ns in _netns() if ns.endswith("-sink2")]
    # cpu-contended: busy loops in node3's cgroup, capped at one core
    tb.fault("cpu-contended", "node3")
    cg = tb.faults["cpu-contended:node3"]["cgroup"]
    quota = Path(cg, "cpu.cfs_quota_us")
    assert (quota.read_text().strip() if quota.exists()
            else Path(cg, "cpu.max").read_text().split()[0]) == "100000"
    hogs = tb.faults["cpu-contended:node3"]["pids"]
    assert all(os.path.exists(f"/proc/{p}") for p in hogs)
    tb.clear()
    assert not any(os.path.exists(f"/proc/{p}") and
                   open(f"/proc/{p}/stat").read().split()[2] != "Z" for p in hogs)
    # stopped: a job step's processes stop, and run on once cleared
    step = subprocess.Popen(tb.login_command(["srun", "-w", "node4", "-N", "1", "-n", "1",
                                              "sleep", "30"]), env=tb.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _comm_pids(tb, "node4", "sleep"):
            assert time.monotonic() < deadline, "the job step did not start"
            time.sleep(0.2)
        tb.fault("stopped", "node4")
        assert {_state(p) for p in _comm_pids(tb, "node4", "sleep")} == {"T"}
        assert {_state(p) for p in _comm_pids(tb, "node4", "slurmd")} != {"T"}
        tb.clear("stopped:node4")
        assert "T" not in {_state(p) for p in _comm_pids(tb, "node4", "sleep")}
    finally:
        tb.clear()  # a fault left on would stop node4's processes in the tests after
        step.kill()
        tb.login(["scancel", "-u", "root"])
    # lossy-link where the kernel makes random drops; else skip, saying why
    reason = lossy_unavailable()
    if reason is None:
        tb.fault("lossy-link", "node1", 5)
        tables = subprocess.run(["ip", "netns", "exec", tb.config.netns("node1"), "nft", "list",
                                 "ruleset"], capture_output=True, text=True).stdout
        assert "numgen random mod 10000 < 500 drop" in tables
        tb.clear()
    with pytest.raises(_TestbedError, match="^unknown fault 'melted'"):
        tb.fault("melted", "node1")
    with pytest.raises(_TestbedError, match="^no node 'node9'"):
        tb.fault("slow-link", "node9")
    if reason:
        pytest.skip(reason)


def _comm_pids(tb, node, comm):
    out = []
    for pid in tb.node_pids(node):
        try:
            if open(f"/proc/{pid}/comm").read().strip() == comm:
                out.append(pid)
        except OSError:
            pass
    return out


def _state(pid):
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


# -- ccbench run -S ----------------------------------------------------------

def test_run_in_an_allocation_and_from_outside(tb, tmp_path):
    import ccbench_kit as ccb

    alloc = tb.login(["salloc", "--no-shell", "-N", "3", "--ntasks-per-node", "1"], timeout=120)
    job = re.search(r"Granted job allocation (\d+)", alloc.stderr).group(1)
    try:
        out = tmp_path / "in_job.nc"
        # ranks in the order given (a topology-sorted host file), not Slurm's
        r = _ccbench(tb, "run", "all_reduce", "-r", "3", "-S", "--slurm-job-id", job, "--hosts",
                     "node3", "node1", "node2", "-b", "8", "-e", "4K", "-f", "8", "-n", "3",
                     "-w", "1", "--check", "--out", out)
        assert r.returncode == 0, r.stderr
        ds = ccb.load(out)
        assert list(ds.host.values) == ["node3", "node1", "node2"]
        assert (ds.attrs["slurm_job_id"], ds.attrs["launcher"]) == (job, "srun")
        assert int(ds.wrong.sum()) == 0
    finally:
        _scancel(tb, job)
    # outside any allocation: salloc makes one
    out = tmp_path / "salloc.nc"
    r = _ccbench(tb, "run", "sendrecv", "-r", "4", "-N", "4", "-S", "-b", "8", "-e", "64",
                 "-n", "3", "-w", "1", "--out", out)
    assert r.returncode == 0, r.stderr
    ds = ccb.load(out)
    assert sorted(ds.host.values) == ["node1", "node2", "node3", "node4"]
    assert ds.attrs["launcher"] == "srun" and int(ds.attrs["slurm_job_id"]) > int(job)


@pytest.mark.parametrize("args, message", [
    (["-N", "2", "--slurm-partition", "gpu"],
     "--slurm-partition: no partition 'gpu'; this cluster has compute"),
    (["-N", "5"], "-N/--nnodes: 5 nodes asked for but partition compute has 4"),
    (["-N", "2", "--slurm-job-id", "987654"],
     "--slurm-job-id: no job 987654 in this cluster (squeue does not know it)"),
])
def test_bad_slurm_input(tb, tmp_path, args, message):
    out = tmp_path / "x.nc"
    nranks = args[args.index("-N") + 1]
    r = _ccbench(tb, "run", "all_reduce", "-r", nranks, "-S", *args, "-b", "8", "-e", "8",
                 "--out", out, timeout=120)
    assert (r.returncode, r.stderr.strip()) == (2, f"ccbench: error: {message}")
    assert list(tmp_path.iterdir()) == []


def test_bad_slurm_setup(tb, tmp_path):
    args = ["run", "all_reduce", "-r", "2", "-N", "2", "-S", "-b", "8", "-e", "8", "--out",
            tmp_path / "x.nc"]
    r = tb.login([CCBENCH, *map(str, args)], env={"SLURM_CONF": "/nonexistent/slurm.conf"},
                 timeout=60)
    assert (r.returncode, r.stderr.strip()) == (2, (
        "ccbench: error: -S/--slurm-mode: SLURM_CONF=/nonexistent/slurm.conf: no such file; "
        "point it at the cluster's slurm.conf"))
    # no munge: a slurm.conf whose munge socket is not there
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(r"AuthInfo=socket=\S+", f"AuthInfo=socket={tmp_path}/none.sock",
                           Path(tb.slurm_conf).read_text()))
    r = tb.login([CCBENCH, *map(str, args)], env={"SLURM_CONF": str(conf)}, timeout=60)
    assert r.returncode == 3
    assert r.stderr.strip() == (
        "ccbench: error: -S/--slurm-mode: cannot authenticate to Slurm (is munged running?): "
        f"Munge encode failed: Failed to access \"{tmp_path}/none.sock\": No such file or "
        "directory (Did you start munged?)")
    # a job that is not ours
    sub = tb.login(["runuser", "-u", "nobody", "--", "sbatch", "--parsable", "--begin=now+300",
                    "-N", "1", "--chdir", "/tmp", "--output", "/dev/null", "--wrap", "true"])
    job = sub.stdout.strip()
    assert sub.returncode == 0 and job.isdigit(), sub.stderr
    try:
        r = tb.login([CCBENCH, *map(str, args[:-2]), "--slurm-job-id", job, "--out",
                      str(tmp_path / "x.nc")], timeout=60)
        assert r.returncode == 2
        assert r.stderr.strip() == (f"ccbench: error: --slurm-job-id: job {job} belongs to "
                                    "nobody, not to root")
    finally:
        _scancel(tb, job)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slurm.conf"]


# -- suites as sbatch jobs -----------------------------------------------------

def _suite(tmp_path, name, maxbytes, collectives=("all_reduce", "all_gather", "sendrecv")):
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: {name}
        launcher: slurm
        ranks_per_node: 1
        run: {{minbytes: 8, maxbytes: {maxbytes}, stepfactor: 4, iters: 4, warmup: 1}}
        matrix:
          collectives: [{", ".join(collectives)}]
          nnodes: [2]
        """))
    return path


def _status(tb, suite):
    r = _ccbench(tb, "suite", "status", suite, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [line.split(None, 3) for line in r.stdout.splitlines()[1:]]
    return {row[0]: row[1:] for row in rows}


def test_suite_of_sbatch_jobs_status_and_collect(tb, tmp_path):
    import ccbench_kit as ccb
    from ccbench_kit.dataset import open_parts

    suite = _suite(tmp_path, "three", "4K")
    r = _ccbench(tb, "suite", suite, "--no-report")
    assert r.returncode == 0, r.stderr
    ids = re.findall(r"submitted as job (\d+)", r.stderr)
    assert len(ids) == 3
    states = _status(tb, suite)
    assert {s[0] for s in states.values()} <= {"PENDING", "RUNNING", "COMPLETING", "COMPLETED"}
    _wait_jobs_done(tb, ids)
    states = _status(tb, suite)
    assert {k: v[:2] for k, v in states.items()} == {
        k: ["COMPLETED", "done"] for k in ("all_reduce", "all_gather", "sendrecv")}
    r = _ccbench(tb, "suite", "collect", suite, "--no-report")
    assert r.returncode == 0, r.stderr
    parts = open_parts(tmp_path / "results" / "three.nc")
    assert sorted(parts) == ["all_gather", "all_reduce", "sendrecv"]
    jobs = {k: ds.attrs["slurm_job_id"] for k, ds in parts.items()}
    assert sorted(jobs.values()) == sorted(ids)
    assert all(len(set(ds.host.values)) == 2 for ds in parts.values())
    del ccb


def test_a_node_dies_mid_suite(tb, tmp_path):
    from ccbench_kit.dataset import open_parts

    suite = _suite(tmp_path, "die", "8M")
    r = _ccbench(tb, "suite", suite, "--no-report")
    assert r.returncode == 0, r.stderr
    ids = re.findall(r"submitted as job (\d+)", r.stderr)
    # the two 2-node jobs run side by side; kill a node of the second
    deadline = time.monotonic() + 120
    while True:
        running = tb.login(["squeue", "-h", "-t", "running", "-o", "%i %N"]).stdout
        victim = next((line.split()[0] for line in running.splitlines()
                       if line.split()[1:] == ["node[3-4]"]), None)
        if victim:
            break
        assert time.monotonic() < deadline, running
        time.sleep(0.5)
    time.sleep(2)
    tb.kill_node("node4")
    try:
        _wait_jobs_done(tb, ids)
        states = _status(tb, suite)
        failed = [k for k, v in states.items() if v[0] != "COMPLETED"]
        assert len(failed) == 1, states
        state, result, detail = states[failed[0]]
        assert state == "NODE_FAIL" and result in ("missing", "partial")
        assert f"job {victim} NODE_FAIL on node[3-4]: node4 down*" in detail
        for k, v in states.items():
            if k != failed[0]:
                assert v[:2] == ["COMPLETED", "done"]
        r = _ccbench(tb, "suite", "collect", suite, "--no-report")
        assert r.returncode == 3
        assert f"ccbench: failed: {failed[0]}: " in r.stderr and "node4 down*" in r.stderr
        parts = open_parts(tmp_path / "results" / "die.nc")
        done = sorted(k for k in states if k != failed[0])
        assert sorted(k for k in parts if parts[k].attrs.get("complete") == "true") == done
        assert all("node4" not in parts[k].host.values for k in done)
    finally:
        tb.revive_node("node4")


# -- Dask-MPI across the Slurm nodes -------------------------------------------

def test_dask_cluster_over_slurm_matches_srun(tb, tmp_path):
    import ccbench_kit as ccb

    sched = tmp_path / "sched.json"
    r = _ccbench(tb, "cluster", "start", "-np", "4", "-N", "4", "-S", "--interface", "eth0",
                 "--scheduler-file", sched, "--timeout", "180", timeout=240)
    assert r.returncode == 0, r.stderr
    try:
        client_py = tmp_path / "client.py"
        client_py.write_text(textwrap.dedent(f"""\
            import ccbench_kit as ccb
            from distributed import Client
            with Client(scheduler_file={str(sched)!r}) as client:
                ccb.run("all_reduce", sizes=["8", "4K"], algorithms=["ring", "mpi"], iters=3,
                        warmup=1, check="random", client=client, out={str(tmp_path / 'dask.nc')!r})
            """))
        r = tb.login([sys.executable, str(client_py)], timeout=300)
        assert r.returncode == 0, r.stderr
    finally:
        stop = _ccbench(tb, "cluster", "stop", "--scheduler-file", sched, timeout=120)
    assert stop.returncode == 0, stop.stderr
    r = _ccbench(tb, "run", "all_reduce", "-r", "3", "-N", "3", "-S", "--hosts", "node2",
                 "node3", "node4", "-b", "8", "-e", "4K", "-f", "512", "--algorithms",
                 "ring,mpi", "-n", "3", "-w", "1", "--check", "random", "--out",
                 tmp_path / "srun.nc")
    assert r.returncode == 0, r.stderr
    dask, srun = ccb.load(tmp_path / "dask.nc"), ccb.load(tmp_path / "srun.nc")
    # the same Dataset: dims, coordinates (the workers are node2..node4), checks
    assert dict(dask.sizes) == dict(srun.sizes)
    for coord in ("algorithm", "placement", "size", "rank", "host"):
        assert list(dask[coord].values) == list(srun[coord].values), coord
    assert list(dask.host.values) == ["node2", "node3", "node4"]
    assert int(dask.wrong.sum()) == int(srun.wrong.sum()) == 0
    assert dask.attrs["slurm_job_id"] != srun.attrs["slurm_job_id"]
    assert set(srun.attrs) - set(dask.attrs) <= {"slurm_step_id"}


def test_doctor_bisection_finds_a_slow_link(tb, tmp_path):
    """`ccbench doctor --bisect`: the ring all_reduce of node1..4, its halves
    side by side, then node1 and node2 each paired with a node of the faster
    half: node2's link, cut to half its rate, is named."""
    import json

    import xarray as xr
    out = tmp_path / "d.nc"
    r = _ccbench_under_fault(tb, ("slow-link", "node2"), "doctor", "-S", "--srun-mpi", "pmix",
                             "--hosts", "node1", "node2", "node3", "node4", "--topology",
                             tb.topology_file, "--bisect", "--ranks-per-node", "1", "--repeats",
                             "3", "--lat-iters", "10", "--bw-size", "1M", "--bw-iters", "2",
                             "--out", out)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "verdict: node2 link", r.stdout
    path = json.loads(xr.open_dataset(out).attrs["doctor_bisect"])["path"]
    assert [(e["kind"], e["groups"]) for e in path] == [
        ("whole", [[0, 1, 2, 3]]), ("halves", [[0, 1], [2, 3]]),
        ("pairs", [[0, 2], [1, 3], [2, 3]])]
    assert path[1]["slower"] == [0, 1] and path[2]["decision"] == "culprit: node2"
    whole, halves = path[0]["median_busbw"][0], path[1]["median_busbw"]
    assert halves[0] < 0.75 * halves[1] and whole < 0.75 * halves[1]


# -- the doctor when a rank crashes, a node dies, the user stops it --------------

_SMALL_DOCTOR = ("doctor", "-S", "--srun-mpi", "pmix", "--hosts", "node1", "node2", "node3",
                 "node4", "--ranks-per-node", "1", "--lat-iters", "10", "--bw-size", "256K",
                 "--bw-iters", "2")


def test_doctor_starts_again_after_a_crash_in_start_up(tb, tmp_path):
    """A rank killed by SIGSEGV as it starts (the testbed's crash-at-start
    fault, by PID from outside the rank: a crash in MPI/PMIx start-up, seen
    a few times in a hundred runs) costs one more start, said in the notes;
    the same crash twice is `verdict: unknown` naming the node."""
    import json

    import xarray as xr
    out = tmp_path / "once.nc"
    r = _ccbench_under_fault(tb, ("crash-at-start", "node2", 1), *_SMALL_DOCTOR, "--repeats",
                             "2", "--backend", "tcp", "--out", out)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    note = ("note: attempt 1 crashed before its first measurement and was started again: "
            "rank 1 on host node2 died (signal 11) before the first measurement")
    assert note in r.stdout.splitlines(), r.stdout
    last = r.stdout.splitlines()[-1]
    assert last.startswith("verdict: ") and "unknown" not in last, r.stdout
    verdict = json.loads(xr.open_dataset(out).attrs["doctor_verdict"])
    assert verdict["notes"][0] == note[len("note: "):] and verdict["line"] == last
    out = tmp_path / "twice.nc"
    r = _ccbench_under_fault(tb, ("crash-at-start", "node3", 2), *_SMALL_DOCTOR, "--repeats",
                             "1", "--backend", "mpi", "--out", out)
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == ("verdict: unknown (node3: rank 2 died of SIGSEGV in "
                                         "start-up, in both starts)"), r.stdout
    assert "note: attempt 1 crashed before its first measurement" in r.stdout
    assert r.stderr.splitlines()[-1] == ("ccbench: rank 2 on host node3 died (signal 11) before "
                                         "the first measurement"), r.stderr
    assert not out.exists()   # nothing was measured


def _doctor_proc(tb, out, argv_prefix=None, repeats=5):
    """The doctor started on the head node: (Popen, its command), not waited for."""
    argv = [CCBENCH, *_SMALL_DOCTOR, "--repeats", str(repeats), "--backend", "tcp",
            "--out", str(out)]
    cmd = (argv_prefix + argv) if argv_prefix else tb.login_command(argv)
    return subprocess.Popen(cmd, env=tb.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)


def _wait_measured(proc, out, timeout=240):
    """Until rank 0 has written its first record (the raw file beside --out)."""
    raw = Path(str(out) + ".raw.json")
    deadline = time.monotonic() + timeout
    while not (raw.exists() and '"rep"' in raw.read_text()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no record written"
        time.sleep(0.05)


def _node_ranks(tb, node):
    """PIDs of the processes Slurm started on `node` (not slurmd/slurmstepd)."""
    pids = []
    for pid in tb.node_pids(node):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm not in ("slurmd", "slurmstepd"):
            pids.append(pid)
    return pids


def test_doctor_names_a_node_killed_during_the_check(tb, tmp_path):
    """node3's ranks killed (SIGKILL by PID) once the check measures: the
    verdict names node3, not the peer that lost its connection nor the ranks
    Slurm killed after it.  node3's node is busy as they die (cpu-contended):
    its slurmstepd then reported their end after srun had reported the
    others', which the rank that lost node3 had made Slurm cancel (a loaded
    machine did the same to the whole testbed)."""
    import json
    import signal

    import xarray as xr
    out = tmp_path / "d.nc"
    proc = _doctor_proc(tb, out)
    _wait_measured(proc, out)
    key = tb.fault("cpu-contended", "node3", 6)
    try:
        hogs = set(tb.faults[key]["pids"])
        victims = [p for p in _node_ranks(tb, "node3") if p not in hogs]
        assert victims
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        tb.clear(key)
    assert proc.returncode == 1, stdout + stderr
    assert stdout.splitlines()[-1] == "verdict: node3 (died during the check)", stdout
    assert stderr.startswith("ccbench: rank 2 on host node3 died (signal 9) during the check"), \
        stderr
    ds = xr.open_dataset(out)
    assert ds.attrs["complete"] == "false"
    assert ds.attrs["incomplete_reason"].startswith("rank 2 on host node3 died (signal 9)")
    assert json.loads(ds.attrs["doctor_verdict"])["findings"][0]["node"] == "node3"
    local = xr.open_dataset(out, group="local")   # what was measured before is kept
    assert int(local["latency"].count()) > 0
    _wait_jobs_done(tb)


@pytest.mark.parametrize("signame, code, through_wrapper", [
    ("SIGINT", 130, True), ("SIGTERM", 143, False)])
def test_doctor_stopped_by_a_signal_keeps_what_it_measured(tb, tmp_path, signame, code,
                                                           through_wrapper):
    """Ctrl-C or SIGTERM (by PID: to the testbed's `run` wrapper, which
    passes it on, or to ccbench itself) once the check measures: exit
    130/143, the --out file holds the steps measured, marked incomplete."""
    import signal

    import xarray as xr
    out = tmp_path / "d.nc"
    wrapper = [sys.executable, "-m", "testbed", "run", "--name", tb.config.name, "--base",
               tb.config.base, "--"] if through_wrapper else None
    # enough repeats that the signal lands mid-check: 20 ran out before it
    # on a quiet machine, and the check ended `verdict: none`, exit 0
    proc = _doctor_proc(tb, out, wrapper, repeats=400)
    _wait_measured(proc, out)
    proc.send_signal(getattr(signal, signame))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code, stdout + stderr
    assert f"ccbench: interrupted by {signame}" in stderr, stderr
    assert stdout.splitlines()[-1] == "verdict: unknown", stdout
    ds = xr.open_dataset(out)
    assert ds.attrs["complete"] == "false"
    assert ds.attrs["incomplete_reason"] == f"interrupted by {signame}"
    local = xr.open_dataset(out, group="local")["latency"]
    assert 0 < int(local.count()) < local.size   # some of the 400 repeats, not all
    assert not Path(str(out) + ".raw.json").exists()
    _wait_jobs_done(tb)


def test_srun_steps_run_pmix_fences_on_the_ring_unless_told(tb):
    """The kit's srun steps get SLURM_PMIX_FENCE=ring (`slurm.step_env`:
    Slurm's default tree for MPI_Init's closing barrier let a peer's first
    message reach a rank still in the modex, SIGSEGV), seen by the ranks of
    a real step; a value of the user's own is left alone."""
    script = textwrap.dedent("""\
        import os, subprocess, sys
        from ccbench_kit.launch.command import launcher
        cmd = launcher(2, hosts=["node1", "node2"], slurm=True, ranks_per_node=1)
        r = subprocess.run(cmd(["sh", "-c", "echo $SLURMD_NODENAME=$SLURM_PMIX_FENCE"]),
                           env={**os.environ, **cmd.env}, capture_output=True, text=True,
                           timeout=120)
        print(r.stdout, r.stderr, file=sys.stderr)
        print(" ".join(sorted(r.stdout.split())))
        """)
    r = tb.login([sys.executable, "-c", script], timeout=180, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "node1=ring node2=ring", r.stdout + r.stderr
    r = tb.login([sys.executable, "-c", script], timeout=180, cwd=ROOT,
                 env={"SLURM_PMIX_FENCE": "tree"})
    assert r.stdout.strip() == "node1=tree node2=tree", r.stdout + r.stderr


def test_a_suite_job_that_cannot_start_says_why_and_is_not_queued_twice(tb, tmp_path):
    """A combination asking for more nodes than the testbed has: Slurm either
    refuses it at submission (then the suite names it, exit non-zero) or
    holds it PENDING, and then `suite status` gives squeue's reason and says
    it will not start; submitting the suite again keeps the queued job
    instead of queueing a second one writing the same part file."""
    path = tmp_path / "big.yaml"
    path.write_text(textwrap.dedent("""\
        name: big
        launcher: slurm
        ranks_per_node: 1
        run: {minbytes: 8, maxbytes: 8, iters: 2, warmup: 1}
        matrix:
          collectives: [all_reduce]
          nnodes: [6]
        """))
    r = _ccbench(tb, "suite", path, "--no-report")
    ids = re.findall(r"submitted as job (\d+)", r.stderr)
    if not ids:  # sbatch refused it: one line naming the combination, no traceback
        assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
        assert "all_reduce" in r.stderr, r.stderr
        return
    try:
        (state, result, detail), = _status(tb, path).values()
        assert state == "PENDING", (state, detail)
        assert detail.startswith("pending: "), detail
        reason = detail.split()[1]
        if reason in ("PartitionNodeLimit", "ReqNodeNotAvail", "BadConstraints",
                      "PartitionConfig"):
            assert "will not start" in detail, detail
        again = _ccbench(tb, "suite", path, "--no-report")
        assert again.returncode == 0, again.stderr
        assert f"already queued as job {ids[0]}; not submitted again" in again.stderr
        assert not re.findall(r"submitted as job (\d+)", again.stderr)
        queued = tb.login(["squeue", "-h", "-o", "%i"]).stdout.split()
        assert queued.count(ids[0]) == 1 and len(queued) == 1, queued
    finally:
        _scancel(tb, *ids)
