"""Slurm mode: the srun/salloc/sbatch commands we build, and the errors we
give when Slurm isn't there (it isn't on this machine: nothing here pretends
to run ranks)."""

import pytest

from ccbench_kit.errors import ConfigError, RunError
from ccbench_kit.launch import slurm as S
from ccbench_kit.launch.command import launcher

ARGV = ["/venv/bin/python", "-m", "ccbench_kit.launch.worker", "json64:abc"]


def test_srun_in_an_existing_job():
    cmd = S.srun_command(8, ARGV, {"job_id": "12345", "mpi": "pmix"}, nnodes=2, environ={})
    assert cmd == ["srun", "--jobid", "12345", "--nodes", "2", "--ntasks", "8",
                   "--ntasks-per-node", "4", "--kill-on-bad-exit=1", "--mpi=pmix", *ARGV]


def test_srun_in_the_current_allocation():
    cmd = S.srun_command(2, ARGV, True, nnodes=1, environ={"SLURM_JOB_ID": "77"})
    assert cmd[:3] == ["srun", "--jobid", "77"]
    # an explicit job id wins over the environment's
    cmd = S.srun_command(2, ARGV, {"job_id": "5"}, environ={"SLURM_JOB_ID": "77"})
    assert cmd[:3] == ["srun", "--jobid", "5"]


def test_salloc_for_a_new_allocation_with_setup_script(tmp_path):
    setup = tmp_path / "setup node.sh"
    setup.write_text("#!/bin/sh\necho ready\n")
    opts = {"setup_script": str(setup), "partition": "p5", "time_limit": "00:10:00"}
    # hosts in rank order, n2 first: Slurm would sort a plain --nodelist
    cmd = S.srun_command(4, ARGV, opts, nnodes=2, hosts=["n2", "n1"], environ={})
    assert cmd[:14] == ["salloc", "--nodes", "2", "--nodelist", "n2,n1", "--partition", "p5",
                        "--time", "00:10:00", "--ntasks-per-node", "2", "--job-name", "ccbench",
                        "sh"]
    assert cmd[14] == "-c"
    assert cmd[15] == (
        f"srun --nodes 2 --ntasks 2 --ntasks-per-node 1 --nodelist n2,n1 '{setup}' && "
        "exec srun --nodes 2 --ntasks 4 --distribution=arbitrary --nodelist n2,n2,n1,n1 "
        "--kill-on-bad-exit=1 /venv/bin/python -m ccbench_kit.launch.worker json64:abc")
    assert len(cmd) == 16
    assert S.tools_needed(opts, environ={}) == ("salloc", "srun")
    assert S.tools_needed({"job_id": "3"}, environ={}) == ("srun",)


@pytest.mark.parametrize("opts, nranks, nnodes, message", [
    ({"job_id": "12a"}, 4, 1, "--slurm-job-id: '12a' is not a Slurm job id (digits, or "
                              "ARRAYJOB_TASK)"),
    ({"setup_script": "/no/such/setup.sh"}, 4, 1, "--slurm-setup-script: /no/such/setup.sh: "
                                                  "no such file"),
    ({}, 5, 2, "-r/--nworkers: 5 ranks don't divide evenly among 2 nodes; use a multiple "
               "of the node count"),
    ({"nodes": 3}, 4, 1, "slurm: unknown Slurm option(s) nodes; use job_id, setup_script, "
                         "partition, time_limit, account, mpi, srun_args"),
])
def test_srun_bad_options(opts, nranks, nnodes, message):
    with pytest.raises(ConfigError) as e:
        S.srun_command(nranks, ARGV, opts, nnodes=nnodes, environ={})
    assert str(e.value) == message


def test_sbatch_script_text(tmp_path):
    text = S.sbatch_script(ARGV, {"partition": "gpu", "mpi": "pmix"}, nranks=16, nnodes=2,
                           job_name="ccb-all_reduce-env1", output="/fsx/logs/%j.out",
                           env={"NCCL_ALGO": "Ring", "NCCL_TESTS_SPLIT_MASK": "0x7",
                                "OMPI_MCA_btl": "self,vader tcp"})
    assert text == (
        "#!/bin/bash\n"
        "#SBATCH --job-name=ccb-all_reduce-env1\n"
        "#SBATCH --nodes=2\n"
        "#SBATCH --ntasks-per-node=8\n"
        "#SBATCH --exclusive\n"
        "#SBATCH --no-requeue\n"
        "#SBATCH --partition=gpu\n"
        "#SBATCH --output=/fsx/logs/%j.out\n"
        "set -euo pipefail\n"
        'export SLURM_PMIX_FENCE="${SLURM_PMIX_FENCE:-ring}"\n'
        "export NCCL_ALGO=Ring\n"
        "export NCCL_TESTS_SPLIT_MASK=0x7\n"
        "export OMPI_MCA_btl='self,vader tcp'\n"
        "srun --nodes 2 --ntasks 16 --ntasks-per-node 8 --kill-on-bad-exit=1 --mpi=pmix "
        "/venv/bin/python -m ccbench_kit.launch.worker json64:abc\n")
    with pytest.raises(ConfigError, match=r"^env: 'BAD-NAME' is not an environment variable"):
        S.sbatch_script(ARGV, True, nranks=2, env={"BAD-NAME": "1"})


def test_missing_slurm_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))      # a machine without Slurm
    with pytest.raises(RunError) as e:
        launcher(4, slurm={"job_id": "9"})
    assert str(e.value) == ("-S/--slurm-mode: srun not found on PATH; run on a Slurm login "
                            "node (or inside an allocation), or drop -S to launch with mpirun")
    with pytest.raises(RunError, match="^-S/--slurm-mode: sbatch not found on PATH"):
        S.submit(tmp_path / "job.sh")
    with pytest.raises(RunError, match="^-S/--slurm-mode: squeue not found on PATH"):
        S.job_states(["1"])


def test_cli_slurm_errors(cli, tmp_path):
    import os
    import sys
    # a machine without Slurm: only the venv's own commands on PATH
    no_slurm = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    r = cli("run", "all_reduce", "-r", "4", "-S", "-N", "2", timeout=60, env=no_slurm)
    assert (r.returncode, r.stderr.strip()) == (3, (
        "ccbench: error: -S/--slurm-mode: salloc not found on PATH; run on a Slurm login node "
        "(or inside an allocation), or drop -S to launch with mpirun"))
    r = cli("run", "all_reduce", "-r", "4", "-S", "-N", "3", timeout=60)
    assert (r.returncode, r.stderr.strip()) == (2, (
        "ccbench: error: -r/--nworkers: 4 ranks don't divide evenly among 3 nodes; use a "
        "multiple of the node count"))
    r = cli("run", "all_reduce", "--slurm-setup-script", "x.sh", timeout=60)
    assert (r.returncode, r.stderr.strip()) == (
        2, "ccbench: error: --slurm-setup-script: only applies with -S/--slurm-mode")
