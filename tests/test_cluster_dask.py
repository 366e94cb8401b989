"""A real Dask-MPI cluster (mpirun + dask-mpi) on this machine: sweeps
through a Client match the mpirun path, several sweeps share one cluster,
the workers keep answering while a sweep runs, and stop leaves nothing."""
import json
import socket
import time

import numpy as np
import pytest

psutil = pytest.importorskip("psutil")
pytest.importorskip("dask_mpi")

import ccbench_kit as ccb  # noqa: E402
from ccbench_kit.errors import ConfigError  # noqa: E402
from ccbench_kit.launch import cluster  # noqa: E402

# more than ~20 s in all: the module starts first under `make test` (conftest)
pytestmark = pytest.mark.slow

SIZES = [8, 1000, 65536]  # 1000 B = 250 floats: not a multiple of 4 ranks
RUN = dict(sizes=SIZES, algorithms="ring,mpi", check="random", seed=7, iters=4, warmup=1)


def _gone(pids):
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.fixture(scope="module")
def five_ranks(tmp_path_factory):
    """A scheduler and 4 workers; stopped (and checked empty) at the end."""
    sched = tmp_path_factory.mktemp("cluster") / "scheduler.json"
    c = cluster.start(5, scheduler_file=str(sched), timeout=90)
    pids = c.processes()
    yield c
    c.stop()
    assert _gone(pids) == []


def test_cluster_sweep_matches_mpirun(five_ranks):
    client = five_ranks.client()
    events = []
    ds = ccb.run("all_reduce", client=client, progress=events.append, **RUN)
    ref = ccb.run("all_reduce", 4, **RUN)
    assert dict(ds.sizes) == dict(ref.sizes) == {"algorithm": 2, "placement": 2, "size": 3,
                                                 "rank": 4, "iteration": 4}
    for name in ("algorithm", "placement", "size", "count", "in_bytes", "out_bytes", "rank",
                 "iteration", "host", "device"):
        assert list(ds[name].values) == list(ref[name].values), name
    assert list(ds["count"].values) == [2, 250, 16384]
    assert list(ds["host"].values) == [socket.gethostname()] * 4
    # --check: every output equals numpy's golden result on both paths
    assert (ds["wrong"].values == 0).all() and (ref["wrong"].values == 0).all()
    lat = ds["latency"].values
    assert np.isfinite(lat).all() and (lat > 0).all()
    for key in ("collective", "dtype", "op", "nranks", "backend", "iters", "warmup", "check",
                "seed"):
        assert ds.attrs[key] == ref.attrs[key], key
    assert ds.attrs["launcher"] == "dask-mpi"
    assert [(e["index"], e["total"], e["size"]) for e in events if e["event"] == "size"] == \
        [(0, 3, 8), (1, 3, 1000), (2, 3, 65536)]


def test_many_sweeps_in_one_cluster(five_ranks, tmp_path):
    client = five_ranks.client()
    before = five_ranks.processes()
    out = tmp_path / "ag.nc"
    # a subset of the workers: a second communicator, made once and cached
    ag = ccb.run("all_gather", 3, sizes=[48, 3004], iters=3, warmup=1, check="all_ones",
                 client=client, out=str(out))
    assert ag.sizes["rank"] == 3 and list(ag["size"].values) == [48, 3000]  # 751 floats round down to 3 x 250
    assert (ag["wrong"].values == 0).all()
    assert ccb.load(out)["latency"].shape == ag["latency"].shape  # rank 0 saved it
    ar = ccb.run("all_reduce", client=client, sizes=[4096], iters=3, warmup=1, check=True)
    assert ar.sizes["rank"] == 4 and (ar["wrong"].values == 0).all()

    def cached(dask_worker):
        return sorted(dask_worker.plugins["ccbench-mpi-communicators"].comms)
    members = client.run(cached)
    assert sorted(len(m) for m in members.values()) == [1, 2, 2, 2]
    assert five_ranks.processes() == before  # no worker was restarted
    with pytest.raises(ConfigError, match=r"^-r/--nworkers: 9 ranks asked for but the "
                                          r"cluster has 4 workers$"):
        ccb.run("all_reduce", 9, sizes=[8], client=client)
    with pytest.raises(ConfigError) as e:
        ccb.run("all_reduce", sizes=[8], client=client, env={"NCCL_ALGO": "Ring"})
    assert str(e.value) == ("client: env applies when ccbench starts the ranks; a cluster's "
                            "ranks already run (choose them at `ccbench cluster start`)")


def test_doctor_needs_workers_on_two_nodes(five_ranks, tmp_path, cli):
    # a cluster on loopback: all its workers on this one host
    with pytest.raises(ConfigError) as e:
        ccb.doctor(client=five_ranks.client(), out=str(tmp_path / "d.nc"))
    assert str(e.value) == (f"--scheduler-file: the cluster's 4 workers run on 1 node "
                            f"({socket.gethostname()}): a health check compares nodes, it "
                            "needs workers on at least 2")
    r = cli("doctor", "--scheduler-file", tmp_path / "none.json", timeout=60)
    assert r.returncode == 2 and r.stderr == (
        f"ccbench: error: --scheduler-file: {tmp_path / 'none.json'} does not exist: no cluster "
        "wrote it; start one with `ccbench cluster start`\n")
    assert not (tmp_path / "d.nc").exists()


def test_workers_answer_while_a_sweep_runs(five_ranks):
    """The sweep runs in a task, not in the event loop: the workers still answer
    the scheduler (client.run runs in their event loops) in the middle of it."""
    from ccbench_kit.api import make_config
    from ccbench_kit.launch.dask import ClusterRun, worker_ranks

    client = five_ranks.client()
    workers = worker_ranks(client)
    cfg = make_config("all_reduce", 4, sizes=[1 << 20, 1 << 21], algorithms=["ring"],
                      iters=100, warmup=2, placement="out_of_place")
    run = ClusterRun(client, workers, cfg)
    answered = []
    while not run.done():
        t0 = time.monotonic()
        client.run(time.time)
        if not run.done():
            answered.append(time.monotonic() - t0)
        time.sleep(0.2)
    ds = run.result()
    assert ds.sizes["iteration"] == 100
    # each answer came back while the sweep was still running: a sweep in the
    # event loop would have held it until the end (how long an answer takes
    # on a crowded machine says nothing)
    assert answered, "the sweep ended before the workers could be asked anything"


def test_notebook_client_shows_progress(five_ranks, tmp_path):
    """A notebook connects with Client(scheduler_file=...), runs a sweep, and
    a progress bar (an ipywidgets IntProgress) shows it, filled to the end."""
    nbformat = pytest.importorskip("nbformat")
    pm = pytest.importorskip("papermill")
    pytest.importorskip("ipywidgets")
    from ccbench_kit.report.driver import kernel_name

    nb = nbformat.v4.new_notebook(metadata={
        "kernelspec": {"name": kernel_name(), "language": "python", "display_name": "Python"},
        "language_info": {"name": "python"}})
    nb.cells = [
        nbformat.v4.new_code_cell("scheduler_file = ''", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "from distributed import Client\n"
            "import ccbench_kit\n"
            "client = Client(scheduler_file=scheduler_file)\n"
            "ds = ccbench_kit.run('all_reduce', sizes=[8, 4096, 65536], check=True, iters=3,\n"
            "                     warmup=1, client=client)\n"
            "print(dict(ds.sizes), int(abs(ds['wrong']).sum()))\n"
            "client.close()"),
    ]
    src, out = tmp_path / "cluster.ipynb", tmp_path / "cluster.out.ipynb"
    nbformat.write(nb, str(src))
    pm.execute_notebook(str(src), str(out), kernel_name=kernel_name(), progress_bar=False,
                        parameters={"scheduler_file": five_ranks.scheduler_file},
                        cwd=str(tmp_path), execution_timeout=300)
    cell = nbformat.read(str(out), as_version=4).cells[-1]
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    assert "{'algorithm': 1, 'placement': 2, 'size': 3, 'rank': 4, 'iteration': 3} 0" in text
    views = [o for o in cell.outputs if o.output_type == "display_data"
             and "application/vnd.jupyter.widget-view+json" in o.data]
    assert views, "no progress widget was displayed"
    state = nbformat.read(str(out), as_version=4).metadata.get("widgets", {}).get(
        "application/vnd.jupyter.widget-state+json", {}).get("state", {})
    bars = [m["state"] for m in state.values() if m.get("model_name") == "IntProgressModel"]
    assert bars and bars[0]["value"] == bars[0]["max"] == 3


def test_cli_start_status_stop_leaves_no_process(cli, tmp_path):
    sched = tmp_path / "s.json"
    r = cli("cluster", "start", "-np", "3", "--scheduler-file", sched, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"client = Client(scheduler_file='{sched}')" in r.stdout
    state = json.loads((tmp_path / "s.launcher.json").read_text())
    info = cluster.ClusterInfo(**state)
    pids = cluster.cluster_processes(info)
    assert len(pids) >= 4  # mpirun + 3 ranks, running on after the CLI exited
    r = cli("cluster", "status", "--scheduler-file", sched, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("worker rank") == 2 and "127.0.0.1" in r.stdout
    r = cli("cluster", "start", "-np", "3", "--scheduler-file", sched, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith(
        f"ccbench: error: --scheduler-file: a cluster is already running with {sched}")
    r = cli("cluster", "stop", "--scheduler-file", sched, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "cluster stopped (shut down)"
    assert _gone(pids) == []
    assert cluster.cluster_processes(info) == []
    assert not sched.exists() and not (tmp_path / "s.launcher.json").exists()
    r = cli("cluster", "stop", "--scheduler-file", sched, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"ccbench: error: --scheduler-file: no cluster started with {sched} "
        f"({tmp_path / 's.launcher.json'} is missing); start one with `ccbench cluster start`")


def test_cluster_command_line(tmp_path):
    """What `ccbench cluster start` launches: dask-mpi with plain workers, one
    thread each, on loopback, no dashboard; across hosts, blocks per host."""
    import sys

    sched = str(tmp_path / "s.json")
    cmd, keep = cluster.cluster_command(4, sched)
    i = cmd.index(sys.executable)
    assert cmd[cmd.index("-np") + 1] == "4" and keep is None
    assert cmd[i:] == [sys.executable, "-m", "dask_mpi.cli", "--scheduler-file", sched,
                       "--scheduler-port", "0", "--worker-class", "distributed.Worker",
                       "--nthreads", "1", "--memory-limit", "0", "--interface", "lo",
                       "--no-dashboard"]
    cmd, keep = cluster.cluster_command(6, sched, interface="ib0", dashboard="127.0.0.1:8787",
                                        hosts=["a", "b"])
    assert cmd[cmd.index("--map-by") + 1] == "ppr:3:node"
    assert open(cmd[cmd.index("--hostfile") + 1]).read() == "a\nb\n"
    assert cmd[-4:] == ["--interface", "ib0", "--dashboard-address", "127.0.0.1:8787"]


def test_cluster_in_slurm_mode_without_slurm(tmp_path, monkeypatch):
    from ccbench_kit.errors import RunError
    monkeypatch.setenv("PATH", str(tmp_path))      # a machine without Slurm
    with pytest.raises(RunError, match=r"^-S/--slurm-mode: srun not found on PATH"):
        cluster.start(4, slurm={"job_id": "42"}, interface="ib0",
                      scheduler_file=str(tmp_path / "s.json"))
    assert not (tmp_path / "s.launcher.json").exists()


@pytest.mark.parametrize("kw, message", [
    (dict(nranks=1), "-np: a cluster needs at least 2 ranks (a scheduler and a worker), got 1"),
    (dict(nranks=3, hosts=["a", "b"]), "--interface: several hosts need a network interface "
                                       "they share (eth0, ib0...); the default, lo, reaches "
                                       "this host only"),
])
def test_start_bad_input(kw, message, tmp_path):
    with pytest.raises(ConfigError) as e:
        cluster.start(scheduler_file=str(tmp_path / "s.json"), **kw)
    assert str(e.value) == message
