"""``ccbench doctor --per-gpu`` (this host's GPUs as nodes) on a CPU host:
its bad input, its node names, the host all_reduce's busbw and note from
hand-made records, the verdict of ``--local --per-gpu``, and the probe's
one-node-a-rank layout and host step run for real over MPI (the nccl run
itself is on the device: bench/RESULTS.md, issue 24)."""
import json
import tempfile

import numpy as np
import pytest

from ccbench_kit.backends.nccl import visible_gpus
from ccbench_kit.errors import ConfigError
from ccbench_kit.health import api, results, verdict
from ccbench_kit.health.api import Diagnosis, joint_verdict, per_gpu_nodes, per_gpu_refuse
from ccbench_kit.launch.job import RANK_MODULE, Job
from ccbench_kit.launch.mpirun import run_ranks


@pytest.mark.parametrize("given, flag", [
    ({"hosts": "a,b"}, "--hosts"), ({"hosts_file": "h.txt"}, "--hosts-file"),
    ({"nnodes": 2}, "-N/--nnodes"), ({"slurm": True}, "-S/--slurm-mode"),
    ({"ranks_per_node": 2}, "--ranks-per-node"), ({"topology": "t.json"}, "--topology")])
def test_per_gpu_refuses_the_settings_it_fixes_itself(given, flag):
    with pytest.raises(ConfigError) as e:
        per_gpu_refuse(**given)
    assert e.value.flag == flag
    assert str(e.value).endswith(f"--per-gpu checks this host's GPUs, one rank each; {flag} "
                                 "does not apply")
    with pytest.raises(ConfigError, match=r"--per-gpu measures the GPUs through nccl, not "
                                          r"mpi$") as e:
        per_gpu_refuse(backend="mpi")
    assert e.value.flag == "--backend"
    per_gpu_refuse(backend="nccl")
    per_gpu_refuse(backend=None)


def test_per_gpu_nodes_are_the_gpus_labelled_as_the_gpu_checks_label_them():
    assert per_gpu_nodes(3, host="vm") == ["vm gpu0", "vm gpu1", "vm gpu2"]
    with pytest.raises(ConfigError, match=r"compares this host's GPUs with each other: it "
                                          r"needs at least 2, this host has 0 \(no libnccl\)$"):
        per_gpu_nodes(0, "no libnccl; searched /x")
    with pytest.raises(ConfigError, match=r"it needs at least 2, this host has 1$") as e:
        per_gpu_nodes(1, host="vm")
    assert e.value.flag == "--per-gpu"


def test_cli_refuses_per_gpu_without_two_gpus_before_measuring(cli, tmp_path):
    if visible_gpus()[0] >= 2:
        pytest.skip("this host has 2 GPUs: --per-gpu would run")
    for args in (["--per-gpu"], ["--local", "--per-gpu"]):
        p = cli("doctor", *args, "--out", tmp_path / "d.nc", cwd=tmp_path)
        assert p.returncode == 2, p.stderr
        assert p.stderr.startswith("ccbench: error: --per-gpu: compares this host's GPUs with "
                                   "each other: it needs at least 2, this host has ")
        assert len(p.stderr.strip().splitlines()) == 1 and not p.stdout
        assert list(tmp_path.iterdir()) == []  # nothing measured, nothing written
    p = cli("doctor", "--per-gpu", "--hosts", "a,b", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip() == ("ccbench: error: --hosts: --per-gpu checks this host's GPUs, "
                                "one rank each; --hosts does not apply")


def per_gpu_raw(times, nb=1 << 20, gpus=3):
    """A --per-gpu run's records: every rank its own node, the host step's
    per-iteration seconds `times` (one list a repeat)."""
    plan = api.make_plan(gpus, ranks_per_node=1, repeats=len(times), backend="nccl")
    plan["hosts"], plan["per_gpu"] = per_gpu_nodes(gpus, host="vm"), True
    raw = results.Raw(plan["hosts"], list(range(gpus)), list(range(gpus)), plan)
    for rep, t in enumerate(times):
        for k in range(gpus):
            raw.add("local", rep, {"node": k, "ranks": 1, "lat_s": [6e-6] * 5,
                                   "bw_s": [7e-6] * 3, "cpu_s": [1e-3] * 3, "bw_bytes": 1024})
        raw.add("host", rep, {"gpus": gpus, "bw_bytes": nb, "bw_s": t})
    return raw


def test_host_allreduce_busbw_is_the_bus_factor_over_the_median_time(tmp_path):
    nb = 1 << 20
    raw = per_gpu_raw([[4e-6, 5e-6, 9e-6], [8e-6, 10e-6, 10e-6]], nb)
    want = [round(4 / 3 * nb / 5e-6 / 1e9, 3), round(4 / 3 * nb / 10e-6 / 1e9, 3)]
    assert results.host_allreduce(raw) == {"gpus": 3, "bytes": nb, "busbw_gbps": want}
    assert want == [279.62, 139.81]
    v = verdict.judge(raw)
    assert v.line() == "verdict: none"
    assert f"host all_reduce of 3 GPUs, {nb} B: busbw 209.7 GB/s (median of 2 repeats, " \
           f"139.8-279.6)" in v.notes
    raw.write(str(tmp_path / "raw.json"))  # the records survive the file
    assert results.Raw.read(str(tmp_path / "raw.json")).host == raw.host
    raw.host = []  # a run without --per-gpu has no host step
    assert results.host_allreduce(raw) is None


def test_a_slow_hosts_busbw_is_small_not_zero():
    # 4 KiB in 20 and 30 ms (TCP on a crowded node): 0.00027 GB/s, which a
    # fixed 3 decimals made 0.0, as if nothing had moved
    raw = per_gpu_raw([[0.02, 0.02, 0.03], [0.03, 0.03, 0.03]], 4096)
    assert results.host_allreduce(raw)["busbw_gbps"] == [0.00027307, 0.00018204]
    assert "busbw 0.00023 GB/s (median of 2 repeats, 0.00018-0.00027)" in \
        verdict.judge(raw).notes[-1]


def finding(node):
    return verdict.Finding(node, "node", "local", 20.0, 1e-4, 5e-6, "5/5", (15.0, 25.0))


def test_joint_verdict_names_every_gpu_once_and_keeps_the_worst_exit():
    gpu_named = Diagnosis(verdict.Verdict(findings=[finding("vm gpu1")]), api.OUTLIER)
    healthy = Diagnosis(verdict.Verdict(), api.HEALTHY)
    assert joint_verdict([gpu_named, healthy]) == ("verdict: vm gpu1", 1)
    both = Diagnosis(verdict.Verdict(findings=[finding("vm gpu1"), finding("vm gpu0")]),
                     api.OUTLIER)
    assert joint_verdict([gpu_named, both]) == ("verdict: vm gpu1, vm gpu0", 1)
    assert joint_verdict([healthy, healthy]) == ("verdict: none", 0)
    failed = Diagnosis(verdict.Verdict(failed=True), api.RUN_FAILED)
    assert joint_verdict([healthy, failed]) == ("verdict: unknown", 3)
    crashed = Diagnosis(verdict.Verdict(failed=True, failed_at="vm: rank 1 died of SIGSEGV in "
                                                               "start-up"), api.RUN_FAILED)
    assert joint_verdict([healthy, crashed]) == (
        "verdict: unknown (vm: rank 1 died of SIGSEGV in start-up)", 3)


def test_probe_runs_one_node_a_rank_and_the_host_step_over_mpi(tmp_path):
    """The probe's --per-gpu plan, for real over 3 MPI ranks (mpi stands in
    for nccl, which needs GPUs): 3 nodes of one rank, the host all_reduce
    of all 3 once a repeat, summed right (`Timer` checks it)."""
    plan = api.make_plan(3, ranks_per_node=1, repeats=2, bw_bytes="64K", lat_iters=5,
                         bw_iters=2, backend="mpi")
    plan["hosts"], plan["per_gpu"] = per_gpu_nodes(3, host="vm"), True
    plan["out"] = str(tmp_path / "raw.json")
    with tempfile.TemporaryDirectory() as run_dir:
        failure, _, _, _ = run_ranks(RANK_MODULE, [Job.doctor(plan).word()], 3,
                                     run_dir, describe=str, call_timeout=60)
    assert failure is None
    raw = results.Raw.read(plan["out"])
    assert raw.nodes == ["vm gpu0", "vm gpu1", "vm gpu2"] and raw.node_of == [0, 1, 2]
    assert sorted((r["rep"], r["node"], r["ranks"]) for r in raw.local) == \
        [(rep, k, 1) for rep in (0, 1) for k in range(3)]
    assert len(raw.pair) == 2 * 3  # 3 pairs of GPUs, 2 repeats
    host = results.host_allreduce(raw)
    assert host["gpus"] == 3 and host["bytes"] == 64 << 10 and len(host["busbw_gbps"]) == 2
    assert all(np.isfinite(host["busbw_gbps"])) and min(host["busbw_gbps"]) > 0
    json.dumps(host)


def test_every_backend_of_a_rank_keeps_its_job_placement(mpirun):
    """The device a rank drives is its local rank on the job's world, decided
    once (`collective.job_placement`) and handed to each pair's backend: on
    5 ranks of one host, every pair of every wave (10 pairs, 5 waves of 2,
    a rank out each wave) keeps ranks 0-4 on devices 0-4, where the pair's
    own split would have put each pair on devices 0 and 1 (issue 33's
    ``invalid resource handle``).  mpi stands in for nccl: the placement
    is the base class's, the same object the nccl backend reads."""
    p = mpirun(5, """
import json
from mpi4py import MPI
from ccbench_kit.backends.base import host_placement
from ccbench_kit.health import api, probe
from ccbench_kit.health.collective import job_placement
comm = MPI.COMM_WORLD
plan = api.make_plan(5, ranks_per_node=1, backend="mpi", bisect=False)
waves = [[tuple(p) for p in w] for w in plan["waves"]]
placement = job_placement(comm)
links = probe.pair_links(comm, waves, list(range(5)), "mpi", placement)
rows = [(comm.Get_rank(), link[2], link[1].backend.placement.local_rank,
         link[1].backend.placement.local_size, host_placement(link[0]).local_rank)
        for link in links if link]
probe.close_links(links)
rows = comm.gather(rows, root=0)
if comm.Get_rank() == 0:
    print("ROWS", json.dumps([r for rank in rows for r in rank]), len(waves))
""", timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("ROWS"))
    body, nwaves = line[len("ROWS "):].rsplit(" ", 1)
    rows, nwaves = json.loads(body), int(nwaves)
    assert nwaves == 5 and len(rows) == 2 * 10  # both ends of the 10 pairs of 5 GPUs
    assert sorted(tuple(sorted(r[1])) for r in rows) == sorted(
        [(a, b) for a in range(5) for b in range(a + 1, 5)] * 2)
    assert all(r[2] == r[0] and r[3] == 5 for r in rows)   # the job's placement, every pair
    assert sorted({r[4] for r in rows}) == [0, 1]          # what the pair's split gives
    assert any(r[4] != r[0] for r in rows)


