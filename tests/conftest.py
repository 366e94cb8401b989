"""Shared fixtures: run the CLI or an mpirun'd script in a subprocess with a
timeout, as users do."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


def run_cli(*args, timeout=180, cwd=None, env=None, check=False):
    """`ccbench ARGS`; returns the CompletedProcess (text)."""
    proc = subprocess.run([str(BIN / "ccbench"), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"ccbench {' '.join(map(str, args))} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def mpirun_python(nranks, code, timeout=180, cwd=None, args=()):
    """Run `code` under `mpirun -np nranks python -c` (`args` in its
    sys.argv[1:]); returns CompletedProcess."""
    from ccbench_kit.launch.mpirun import mpirun_command, mpirun_env
    cmd = mpirun_command(nranks, [sys.executable, "-c", code, *map(str, args)])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=mpirun_env())


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def mpirun():
    return mpirun_python
