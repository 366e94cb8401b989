"""The launcher's single-copy (CMA) probe: Open MPI's vader transport reads
large messages straight from the sender with process_vm_readv where the
system allows it; where it does not, the launcher must ask for copy-in/out."""
import ctypes
import os
import shutil
import subprocess
import sys

import pytest

from ccbench_kit.launch import mpirun


def test_probe_matches_what_the_system_allows():
    # root on this VM may read another process's memory: the probe says so,
    # and the launcher leaves Open MPI's default (cma) alone
    assert mpirun.single_copy_works()
    env = mpirun.mpirun_env()
    assert "OMPI_MCA_btl_vader_single_copy_mechanism" not in env or \
        os.environ.get("OMPI_MCA_btl_vader_single_copy_mechanism")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv to drop to another user")
def test_probe_fails_where_reading_is_forbidden():
    """Another user may not read this process: the probe's child says no."""
    buf = ctypes.create_string_buffer(b"ccbench-cma-probe", 17)
    args = [sys.executable, "-I", "-S", "-c", mpirun._CMA_PROBE, str(os.getpid()),
            str(ctypes.addressof(buf)), "17"]
    assert subprocess.run(args, timeout=20).returncode == 0
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    assert subprocess.run(nobody + args, timeout=20).returncode == 1


def test_launcher_falls_back_to_copy_in_out(monkeypatch):
    monkeypatch.delenv("OMPI_MCA_btl_vader_single_copy_mechanism", raising=False)
    monkeypatch.setattr(mpirun, "single_copy_works", lambda: False)
    assert mpirun.mpirun_env()["OMPI_MCA_btl_vader_single_copy_mechanism"] == "none"
