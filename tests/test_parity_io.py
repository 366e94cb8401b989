"""nccom-test's launch and output flags (docs/parity.md): --mpi-log-dir keeps
each rank's output in files of its own, --debug shows what the launch does.
Real Open MPI runs (3 ranks) through the CLI, as users start them."""
import json
import os

import pytest

from conftest import run_cli

# more than ~20 s in all: the module starts first under `make test` (conftest)
pytestmark = pytest.mark.slow

MARKER = "@@ccbench "


def _events(text):
    return [json.loads(line.split(MARKER, 1)[1]) for line in text.splitlines()
            if MARKER in line]


def test_mpi_log_dir_keeps_each_ranks_output(tmp_path):
    logs = tmp_path / "logs"
    out = tmp_path / "r.nc"
    proc = run_cli("run", "all_reduce", "-r", 3, "-b", 8, "-e", 64, "-f", 8, "-n", 2, "-w", 1,
                   "--non-interactive", "--mpi-log-dir", logs, "--out", out, timeout=240)
    assert proc.returncode == 0, proc.stderr
    # the table still comes back to the terminal
    assert [ln.split()[0] for ln in proc.stdout.splitlines()
            if ln.split() and ln.split()[0].isdigit()] == ["8", "64"]
    # Open MPI's layout: one folder per rank, its stdout and stderr
    assert sorted(str(p.relative_to(logs)) for p in logs.rglob("*") if p.is_file()) == [
        f"1/rank.{r}/{s}" for r in range(3) for s in ("stderr", "stdout")]
    for rank in range(3):
        evs = _events((logs / "1" / f"rank.{rank}" / "stdout").read_text())
        beats = [e for e in evs if e["event"] == "beat"]
        # each file holds that rank's own output: its heartbeats name it
        assert beats and {e["rank"] for e in beats} == {rank}
        sizes = [e["size"] for e in evs if e["event"] == "size"]
        # rank 0 alone reports sizes and the end of the run
        assert sizes == ([8, 64] if rank == 0 else [])
        assert any(e["event"] == "done" for e in evs) == (rank == 0)


def test_mpi_log_dir_refuses_links_and_devices(tmp_path):
    out = tmp_path / "r.nc"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    inner = tmp_path / "inner"
    (inner / "1").mkdir(parents=True)
    (inner / "1" / "rank.0").symlink_to(elsewhere)
    fifo = tmp_path / "fifo"
    (fifo).mkdir()
    os.mkfifo(fifo / "stdout")
    afile = tmp_path / "afile"
    afile.write_text("x")
    cases = {
        tmp_path / "link": f"{tmp_path}/link is a symbolic link; name the folder itself",
        inner: f"{inner}/1/rank.0 is a symbolic link; rank logs are not written through one",
        fifo: f"{fifo}/stdout is not a regular file; rank logs would be written into it",
        afile: f"{afile} exists and is not a folder",
    }
    for folder, message in cases.items():
        proc = run_cli("run", "all_reduce", "-r", 2, "-b", 8, "--mpi-log-dir", folder,
                       "--out", out, timeout=60)
        assert (proc.returncode, proc.stderr) == (2, f"ccbench: error: --mpi-log-dir: {message}\n")
    assert not out.exists() and list(elsewhere.iterdir()) == []


def test_debug_shows_the_launch_and_the_ranks_stderr(tmp_path):
    out = tmp_path / "r.nc"
    # variables the user set (the kit lists only its own); the second makes
    # every rank's Open MPI say on stderr which transport reaches each peer
    env = {**os.environ, "OMPI_MCA_coll_tuned_priority": "31", "OMPI_MCA_btl_base_verbose": "1"}
    proc = run_cli("run", "all_reduce", "-r", 3, "-b", 8, "-e", 8, "-n", 2, "-w", 1, "--debug",
                   "--mpi-log-dir", tmp_path / "logs", "--out", out, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.splitlines()
    launch = [ln for ln in err if ln.startswith("# debug: launch: ")]
    assert len(launch) == 1
    words = launch[0].split()
    assert "-np" in words and words[words.index("-np") + 1] == "3"
    assert words[words.index("--output-filename") + 1] == str(tmp_path / "logs")
    assert "ccbench_kit.launch.worker" in words
    envs = [ln[len("# debug: rank environment: "):] for ln in err
            if ln.startswith("# debug: rank environment: ")]
    assert "OMPI_MCA_rmaps_base_oversubscribe=1" in envs
    assert any(e.startswith("CCB_RUN_ID=") for e in envs)
    # set by the user, not by the kit: not listed
    assert not any(e.startswith("OMPI_MCA_coll_tuned_priority") for e in envs)
    # --debug implies --non-interactive: no progress lines
    assert not any(ln.lstrip().startswith("[all_reduce ") for ln in err)
    # the ranks' stderr (Open MPI's "[host:pid] mca: bml: Using vader btl for
    # send to ..." lines), relayed as it came, where it is otherwise kept for
    # the error message only
    rank2 = (tmp_path / "logs" / "1" / "rank.2" / "stderr").read_text().splitlines()
    assert any("mca: bml: Using " in line for line in rank2), rank2
    assert all(line in err for line in rank2)
    quiet = run_cli("run", "all_reduce", "-r", 3, "-b", 8, "-e", 8, "-n", 2, "-w", 1,
                    "--non-interactive", "--out", tmp_path / "q.nc", env=env, timeout=240)
    assert quiet.returncode == 0 and "mca: bml: Using " not in quiet.stderr, quiet.stderr


def test_debug_turns_on_nccl_logging_unless_set():
    from ccbench_kit.launch.debug import rank_env, launch_lines
    assert rank_env("nccl", {"A": "1"}, environ={}) == {"A": "1", "NCCL_DEBUG": "INFO"}
    assert rank_env("nccl", {}, environ={"NCCL_DEBUG": "WARN"}) == {}
    assert rank_env("nccl", {"NCCL_DEBUG": "TRACE"}, environ={}) == {"NCCL_DEBUG": "TRACE"}
    assert rank_env("mpi", None, environ={}) == {}
    assert launch_lines(["mpirun", "-np", "2", "a b"], {"X": "1", "Y": "same y"},
                        environ={"Y": "same y"}) == [
        "# debug: launch: mpirun -np 2 'a b'", "# debug: rank environment: X=1"]


def test_setup_script_default_is_the_kits_node_check(tmp_path):
    """nccom-test's `--slurm-setup-script default` prepares every node (it
    installs Neuron); the kit's checks each node can run the ranks."""
    import subprocess
    import sys
    from ccbench_kit import __version__
    from ccbench_kit.cli import build_parser
    from ccbench_kit.cli.cluster import launch_options
    from ccbench_kit.launch import slurm as S
    args = build_parser().parse_args(["run", "all_reduce", "-S", "--slurm-setup-script",
                                      "default"])
    opts = launch_options(args)["slurm"]
    assert opts["setup_script"] == "default"
    step = [sys.executable, "-m", "ccbench_kit.launch.node_setup", __version__]
    cmd = S.srun_command(4, ["rank"], opts, nnodes=2, environ={"SLURM_JOB_ID": "7"})
    assert cmd == ["sh", "-c", "srun --jobid 7 --nodes 2 --ntasks 2 --ntasks-per-node 1 "
                   + " ".join(step) + " && exec srun --jobid 7 --nodes 2 --ntasks 4 "
                   "--ntasks-per-node 2 --kill-on-bad-exit=1 rank"]
    assert " ".join(step) in S.sbatch_script(["rank"], opts, 2, 2)
    # the step itself, run here as srun runs it on a node
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    ok = subprocess.run(step, capture_output=True, text=True, timeout=60, env=env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.endswith(f"ccbench_kit {__version__}, {sys.executable}, engine for "
                              "Open MPI v4.1.4: ready\n")
    bad = subprocess.run(step[:-1] + ["0.0.1"], capture_output=True, text=True, timeout=60,
                         env=env)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.endswith(f"not ready: ccbench_kit {__version__} here "
                               f"({os.path.dirname(S.__file__)[:-len('/launch')]}), 0.0.1 on "
                               "the launching host\n")
    # a file called default is ./default
    (tmp_path / "default").write_text("#!/bin/sh\n")
    assert S.as_options({"setup_script": str(tmp_path / "default")}).setup_script == \
        str(tmp_path / "default")


def _ran_column(stdout):
    """{(size, algorithm): the row's last word} of a --show-algorithm table."""
    return {(int(w[0]), w[5]): w[-1] for w in map(str.split, stdout.splitlines())
            if w and w[0].isdigit()}


def test_show_algorithm_says_what_ran_at_each_size(tmp_path):
    """--show-algorithm ends each row with what ran: the algorithm the
    environment forced Open MPI's coll/tuned to run (named as this Open MPI's
    ompi_info names it), or '-' with a line saying a release build does not
    report coll/tuned's choice; the kit's own algorithms are its own."""
    from ccbench_kit import load
    args = ["run", "all_reduce", "-r", 3, "-b", 8, "-e", 64, "-f", 8, "-n", 2, "-w", 1,
            "--algorithms", "mpi,ring", "--show-algorithm", "--non-interactive"]
    forced = {**os.environ, "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
              "OMPI_MCA_coll_tuned_allreduce_algorithm": "3"}
    proc = run_cli(*args, "--out", tmp_path / "f.nc", env=forced, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert _ran_column(proc.stdout) == {
        (8, "mpi"): "recursive_doubling", (8, "ring"): "ccbench:ring",
        (64, "mpi"): "recursive_doubling", (64, "ring"): "ccbench:ring"}
    assert load(tmp_path / "f.nc").attrs["library_ran"] == "recursive_doubling"
    plain = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_MCA_coll_tuned")}
    proc = run_cli(*args, "--out", tmp_path / "p.nc", env=plain, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert _ran_column(proc.stdout) == {
        (8, "mpi"): "-", (8, "ring"): "ccbench:ring", (64, "mpi"): "-",
        (64, "ring"): "ccbench:ring"}
    assert any(ln.startswith("# ran: ") and "- = not reported: a release build of Open MPI "
               "does not report coll/tuned's choice" in ln for ln in proc.stdout.splitlines())
    assert load(tmp_path / "p.nc").attrs["library_ran"] == ""
    # without the flag: no column, no note
    proc = run_cli(*args[:-2], "--non-interactive", "--out", tmp_path / "n.nc", timeout=240)
    assert proc.returncode == 0 and "# ran:" not in proc.stdout
    assert set(_ran_column(proc.stdout).values()) == {"N/A"}


def test_show_algorithm_prints_what_nccl_ran_per_size():
    """The nccl backend records NCCL's choice per algorithm and size (attr
    nccl_ran, from NCCL's TUNING log); the table prints it at each row."""
    import numpy as np
    from ccbench_kit.dataset.schema import make_dataset
    from ccbench_kit.formats.nccl_tests.write_table import format_table
    lat = np.full((2, 1, 2, 2, 3), 10.0)
    ds = make_dataset(algorithms=["nccl", "nccl:ring/ll"], placements=["out_of_place"],
                      sizes=[1024, 1 << 20], counts=[256, 1 << 18], in_bytes=[1024, 1 << 20],
                      out_bytes=[1024, 1 << 20], latency=lat, wrong=np.full((2, 1, 2), -1),
                      ranks=[0, 1], hosts=["a", "a"], devices=["gpu0", "gpu1"],
                      attrs={"collective": "all_reduce", "dtype": "fp32", "nranks": 2,
                             "nccl_ran": json.dumps({
                                 "nccl": {"1024": "RING/LL x2ch", "1048576": "TREE/SIMPLE x8ch"},
                                 "nccl:ring/ll": {"1024": "RING/LL x2ch"}})})
    lines = format_table(ds, show_ran=True)
    rows = [ln for ln in lines if ln.split() and ln.split()[0].isdigit()]
    assert [(r.split()[0], r.split()[5], r.split("  ")[-1]) for r in rows] == [
        ("1024", "nccl", "RING/LL x2ch"), ("1024", "nccl:ring/ll", "RING/LL x2ch"),
        ("1048576", "nccl", "TREE/SIMPLE x8ch"), ("1048576", "nccl:ring/ll", "-")]


def test_rank_output_flags_inside_the_users_own_mpirun(tmp_path):
    """Ranks the user's mpirun started: their output is that launcher's to
    keep; --mpi-log-dir and --debug say so in one line."""
    import subprocess
    import sys
    from ccbench_kit.launch.mpirun import mpirun_command, mpirun_env
    ccbench = os.path.join(os.path.dirname(sys.executable), "ccbench")
    cmd = mpirun_command(2, [ccbench, "run", "all_reduce", "-b", "8", "--mpi-log-dir",
                             str(tmp_path / "logs"), "--out", str(tmp_path / "r.nc")])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=mpirun_env())
    assert proc.returncode != 0
    assert ("ccbench: error: --mpi-log-dir: applies when ccbench starts the ranks; this "
            "process is already a rank of an MPI job (give its launcher the option instead)"
            in proc.stderr)
    # Not .splitlines(): mpirun forwards each rank's stderr in its own chunks
    # and may print its abort banner inside a rank's line (CI saw it).
    assert not (tmp_path / "r.nc").exists() and not (tmp_path / "logs").exists()


def test_mpi_log_dir_under_mpich_is_refused():
    """Hydra's -outfile-pattern would take the ranks' output from the
    launcher (the kit reads its progress there): one line, exit 2."""
    import pytest
    from ccbench_kit.errors import ConfigError
    from ccbench_kit.launch import mpi_impl
    with pytest.raises(ConfigError) as e:
        mpi_impl.hydra_command("mpiexec", 2, ["p"], log_dir="/tmp/x")
    assert (str(e.value), e.value.exit_code) == (
        "--mpi-log-dir: MPICH's mpiexec cannot copy each rank's output into files (its "
        "-outfile-pattern takes it from the launcher); use Open MPI or -S/--slurm-mode", 2)
