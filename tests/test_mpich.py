"""MPICH as a second MPI: Hydra's mpiexec spoken where it differs from Open
MPI's mpirun, the engine paired with the MPI mpi4py loaded, and a run on
MPICH recording its library.

The command-line tests run under either MPI.  The runs need the kit built
against MPICH (`make setup MPI=mpich`, then `make test MPI=mpich`, which runs
this file with the spine and collectives tests in .venv-mpich).
"""
import os
import subprocess
import sys

import pytest

from ccbench_kit.errors import RunError
from ccbench_kit.launch import mpi_impl


def _family():
    return mpi_impl.family()


needs_mpich = pytest.mark.skipif(
    "_family() != 'mpich'", reason="the kit here is built against Open MPI; these run in "
    "`make test MPI=mpich` (.venv-mpich)")


def test_hydra_command_line(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node1 slots=3\nnode2 slots=3\n# spare\n\n")
    cmd = mpi_impl.hydra_command("/usr/bin/mpiexec.mpich", 6, ["prog", "arg"],
                                 hostfile=str(hostfile), ranks_per_node=3,
                                 export=["NCCL_ALGO", "UCX_TLS"])
    assert cmd == ["/usr/bin/mpiexec.mpich", "-n", "6", "-hosts", "node1,node2", "-ppn", "3",
                   "-genvlist", "NCCL_ALGO,UCX_TLS", "prog", "arg"]
    # Hydra oversubscribes as is and runs as root without a flag
    cmd = mpi_impl.hydra_command("mpiexec", 5, ["p"])
    assert cmd == ["mpiexec", "-n", "5", "p"]
    assert mpi_impl.hydra_command("mpiexec", 2, ["p"], hosts=["a", "b"])[3:5] == ["-hosts", "a,b"]
    with pytest.raises(RunError, match="MCA parameters are Open MPI's; with MPICH set "
                                       "MPIR_CVAR_\\* variables instead: btl"):
        mpi_impl.hydra_command("mpiexec", 2, ["p"], mca={"btl": "self,tcp"})


def test_one_place_decides_the_family():
    from ccbench_kit.backends.mpi import engine
    assert mpi_impl.family_of("Open MPI v4.1.4") == "openmpi"
    assert mpi_impl.family_of("MPICH Version:\t4.0.2") == "mpich"
    assert _family() == mpi_impl.family_of(engine().BUILD_MPI)
    from ccbench_kit.launch.mpirun import mpirun_command
    cmd = mpirun_command(5, ["x"])
    if _family() == "mpich":
        assert os.path.basename(cmd[0]).startswith("mpiexec") and cmd[1:3] == ["-n", "5"]
        assert "--allow-run-as-root" not in cmd and "--oversubscribe" not in cmd
    else:
        assert os.path.basename(cmd[0]).startswith("mpirun") and cmd[1:3] == ["-np", "5"]


@needs_mpich
def test_run_on_mpich_records_its_library(cli, tmp_path):
    from ccbench_kit import load
    out = tmp_path / "ar.nc"
    proc = cli("run", "all_reduce", "-r", 3, "-b", 8, "-e", "1K", "-f", 32, "-n", 3, "-w", 1,
               "--check", "--out", out, timeout=300, check=True)
    assert "backend mpi (MPICH Version:" in proc.stdout
    ds = load(out)
    assert ds.attrs["library"].startswith("MPICH Version:")
    assert int(ds["wrong"].max()) == 0 and ds.sizes["rank"] == 3


@needs_mpich
def test_engine_refuses_an_mpi4py_on_another_mpi():
    """mpi4py's wheel made to load Open MPI while our engine is MPICH's: the
    import says so in one message instead of crashing in a call."""
    code = ("from mpi4py import MPI\n"
            "import ccbench_kit._engine_mpich\n")
    env = {**os.environ, "MPI4PY_MPIABI": "openmpi"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, cwd="/")
    assert proc.returncode != 0
    assert ("ccbench_kit was built against 'MPICH Version:\\t4.0.2' but mpi4py loaded "
            "'Open MPI v") in proc.stderr
