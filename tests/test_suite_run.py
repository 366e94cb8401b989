"""Suites for real: a matrix run here with mpirun into one DataTree and one
report, a failing environment variant reported while the rest is kept; and
Slurm mode's batch scripts, status and collect (Slurm isn't installed here:
nothing pretends to be sbatch or srun)."""
import json
import os
import textwrap

import numpy as np
import pytest

import ccbench_kit as ccb
from ccbench_kit.launch.mpi_impl import launcher_path
from ccbench_kit.launch.job import Job

# more than ~20 s in all: the module starts first under `make test` (conftest)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_suite(tmp_path_factory):
    """all_reduce (two algorithms) x a good and a broken Open MPI variant x
    two split masks, on 4 ranks, with a report."""
    from conftest import run_cli

    d = tmp_path_factory.mktemp("suite")
    path = d / "local.yaml"
    path.write_text(textwrap.dedent("""\
        name: local
        report: local.html
        stats: [avg, p99]
        run: {minbytes: 8, maxbytes: 4100, stepfactor: 512, iters: 3, warmup: 1, check: random}
        matrix:
          collectives: [all_reduce]
          algorithms: {all_reduce: [ring, mpi]}
          env:
            shm: {OMPI_MCA_btl: "self,vader"}
            broken: {OMPI_MCA_btl: "tcp"}      # no `self`: MPI_Init fails on every rank
          split_mask: [0x0, 0x1]
          nranks: [4]
        """))
    r = run_cli("suite", path, timeout=600)
    return d, path, r


def test_local_suite_keeps_what_worked(local_suite):
    d, path, r = local_suite
    assert r.returncode == 3, r.stderr   # some combinations failed...
    failed = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench: failed: ")]
    assert [ln.split(": ")[2] for ln in failed] == [
        "all_reduce/broken/mask0x0", "all_reduce/broken/mask0x1"]
    launcher = os.path.basename(launcher_path())   # mpirun.openmpi where MPICH is installed too
    assert all(f": {launcher} exited with status 1: " in ln for ln in failed)
    tree = ccb.load(d / "results" / "local.nc")   # ...and the rest is in one DataTree
    leaves = sorted(n.path for n in tree.subtree if n.has_data)
    assert leaves == ["/all_reduce/shm/mask0x0", "/all_reduce/shm/mask0x1"]
    whole = tree["all_reduce/shm/mask0x0"].to_dataset()
    split = tree["all_reduce/shm/mask0x1"].to_dataset()
    assert list(whole["algorithm"].values) == ["ring", "mpi"]
    assert list(split["group"].values) == [0, 1, 0, 1]   # rank & 0x1: two groups of 2
    assert int(split.attrs["group_size"]) == 2 and whole.ccb.nranks == 4
    for node in (whole, split):
        assert (node["wrong"].values == 0).all()
        assert json.loads(node.attrs["env"])["OMPI_MCA_btl"] == "self,vader"  # reached the ranks
        assert node.attrs["suite"] == "local"
    assert json.loads(split.attrs["suite_axes"]) == {
        "collective": "all_reduce", "env": "shm", "nnodes": None, "nranks": 4,
        "split": "AND 0x1"}
    # the overview table on stdout: one row per combination, algorithm, placement
    assert r.stdout.count("all_reduce/shm/mask0x1") == 4
    html = (d / "local.html").read_text()
    assert html.count("<img") >= 8 and "all_reduce/shm/mask0x1" in html


def test_status_and_collect_again(local_suite, cli):
    d, path, _ = local_suite
    r = cli("suite", "status", path, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = {ln.split()[0]: ln.split()[1:3] for ln in r.stdout.splitlines()[1:]}
    assert rows["all_reduce/shm/mask0x1"] == ["done", "done"]
    assert rows["all_reduce/broken/mask0x0"] == ["failed", "missing"]
    manifest = json.loads((d / "results" / "local.suite" / "manifest.json").read_text())
    errors = {c["key"]: c["error"] for c in manifest["combinations"]}
    assert errors["all_reduce/shm/mask0x0"] == ""
    launcher = os.path.basename(launcher_path())
    assert errors["all_reduce/broken/mask0x1"].startswith(f"{launcher} exited with status 1: ")
    r = cli("suite", "collect", path, "--no-report", timeout=120)
    assert r.returncode == 3
    assert "results: " in r.stderr and "(2 of 4 combinations)" in r.stderr


def _slurm_suite(tmp_path):
    (tmp_path / "setup.sh").write_text("#!/bin/sh\necho node ready\n")
    path = tmp_path / "slurm.yaml"
    path.write_text(textwrap.dedent("""\
        name: p5
        launcher: slurm
        ranks_per_node: 2
        slurm: {partition: p5en, time_limit: "00:20:00", setup_script: setup.sh, mpi: pmix}
        run: {minbytes: 1K, iters: 3, warmup: 1, check: all_ones}
        matrix:
          collectives: [all_gather]
          env: {env1: {NCCL_ALGO: Ring}}
          nnodes: [1, 2]
        """))
    return path


def test_slurm_dry_run_scripts_status_collect(tmp_path, cli):
    path = _slurm_suite(tmp_path)
    r = cli("suite", path, "--dry-run", timeout=60)
    assert r.returncode == 0, r.stderr
    work = tmp_path / "results" / "p5.suite"
    manifest = json.loads((work / "manifest.json").read_text())
    assert [(c["key"], c["state"]) for c in manifest["combinations"]] == [
        ("all_gather/n1", "written"), ("all_gather/n2", "written")]
    script = (work / "jobs" / "all_gather--n2.sbatch").read_text().splitlines()
    assert script[:7] == ["#!/bin/bash", "#SBATCH --job-name=ccb-p5-all_gather--n2",
                          "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=2",
                          "#SBATCH --exclusive", "#SBATCH --no-requeue",
                          "#SBATCH --partition=p5en"]
    assert "#SBATCH --time=00:20:00" in script
    assert f"#SBATCH --output={work / 'logs'}/all_gather--n2.%j.out" in script
    assert "export NCCL_ALGO=Ring" in script
    assert script[-2] == f"srun --ntasks-per-node 1 {tmp_path / 'setup.sh'}"
    words = script[-1].split()
    assert words[:8] == ["srun", "--nodes", "2", "--ntasks", "4", "--ntasks-per-node", "2",
                         "--kill-on-bad-exit=1"]
    assert words[8] == "--mpi=pmix" and words[10:12] == ["-m", "ccbench_kit.launch.worker"]
    cfg, = Job.read(words[12]).configs    # what every rank of the job will run
    assert (cfg.collective, cfg.nranks, cfg.sweep.sizes, cfg.inputs.check) == (
        "all_gather", 4, (1024,), "all_ones")
    assert cfg.output.out == str(work / "parts" / "all_gather--n2.nc")

    # the n1 job "ran": its own command line, started by mpirun instead of srun
    from ccbench_kit.launch.mpirun import launch
    n1 = (work / "jobs" / "all_gather--n1.sbatch").read_text().splitlines()[-1].split()
    assert n1[-1] == "--table"            # rank 0 prints the table into the job's log
    launch(Job.read(n1[n1.index("ccbench_kit.launch.worker") + 1]))
    r = cli("suite", "collect", path, timeout=120)
    assert r.returncode == 3
    assert r.stderr.strip().splitlines()[-1] == (
        "ccbench: failed: all_gather/n2: missing: no results file")
    ds = ccb.load(tmp_path / "results" / "p5.nc")   # one combination: a Dataset
    assert int(ds.attrs["nranks"]) == 2 and (np.asarray(ds["wrong"]) == 0).all()
    assert json.loads(ds.attrs["suite_axes"])["nnodes"] == 1


def test_slurm_suite_without_slurm(tmp_path, cli):
    import os
    import sys
    path = _slurm_suite(tmp_path)
    # a machine without Slurm: only the venv's own commands on PATH
    no_slurm = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    r = cli("suite", path, timeout=60, env=no_slurm)
    assert r.returncode == 3 and r.stderr.strip() == (
        "ccbench: error: -S/--slurm-mode: sbatch not found on PATH; run on a Slurm login node "
        "(or inside an allocation), or drop -S to launch with mpirun")
    r = cli("suite", path, "--dry-run", timeout=60, env=no_slurm)
    assert r.returncode == 0
    # pretend nothing: the manifest has no job ids, so status reports the file states
    r = cli("suite", "status", path, timeout=60, env=no_slurm)
    assert r.returncode == 0
    assert [ln.split()[:3] for ln in r.stdout.splitlines()[1:]] == [
        ["all_gather/n1", "written", "missing"], ["all_gather/n2", "written", "missing"]]
