"""Shared fixtures: run the CLI or an mpirun'd script in a subprocess with a
timeout, as users do."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench_kit._optional import IRI_CHECKER, without
from ccbench_kit.blas_threads import one_blas_thread

ROOT = Path(__file__).resolve().parent.parent
# jsonschema's IRI format check builds a parser when imported: 2.4 s of CPU
# in each pytest process that collects a module importing nbformat.  No test
# uses that format; the `ccbench` command leaves it out the same way.
without(IRI_CHECKER)
BIN = Path(sys.executable).parent
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# the tests' own processes (mpirun'd scripts, Dask workers) load numpy with
# one BLAS thread, as the kit's entries give theirs (blas_threads.py)
one_blas_thread()


def run_cli(*args, timeout=180, cwd=None, env=None, check=False):
    """`ccbench ARGS`; returns the CompletedProcess (text).  The console
    script beside this Python, or ``python -m ccbench_kit`` where the kit
    runs from its source tree uninstalled (the GPU machines: PYTHONPATH)."""
    script = BIN / "ccbench"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "ccbench_kit"]
    proc = subprocess.run([*command, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"ccbench {' '.join(map(str, args))} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def wait_until_gone(tag, within=60):
    """Wait until no process carries ``CCB_TEST_TAG=tag`` in its environment.

    A launcher killed with SIGKILL takes mpirun and the ranks down through
    their lifeline, but not at once: until the last of them is gone, a rank
    can still save a size and mpirun still holds its session.  `within`
    seconds only bound a hang; the wait ends on the event."""
    import time
    from ccbench_kit.launch.watchdog import processes_with_env
    deadline = time.monotonic() + within
    while processes_with_env("CCB_TEST_TAG", tag):
        assert time.monotonic() < deadline, processes_with_env("CCB_TEST_TAG", tag)
        time.sleep(0.1)


def mpirun_python(nranks, code, timeout=180, cwd=None, args=(), env=None):
    """Run `code` under `mpirun -np nranks python -c` (`args` in its
    sys.argv[1:], `env` added to the ranks' environment); returns
    CompletedProcess."""
    from ccbench_kit.launch.mpirun import mpirun_command, mpirun_env
    cmd = mpirun_command(nranks, [sys.executable, "-c", code, *map(str, args)])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**mpirun_env(), **(env or {})})


# Open MPI's TCP transport for the tests that run thousands of collectives
# on more ranks than cores (the engine's matrices): ranks waiting on shared
# memory spin and yield, on TCP they mostly sleep in the kernel; alone on 2
# cores the 5-rank matrix took 30.5 s and 58.6 s of CPU over shared memory,
# 14.9 s and 27.4 s over TCP.  What the matrices check, the algorithms'
# results, does not depend on the transport; MPICH ignores the variable.
OVER_TCP = {"OMPI_MCA_btl": "self,tcp"}


def gpus_here():
    """This host's GPU count through the doctor's own inventory (NVML), or
    why there is none (a string: no NVML, no driver, no CUDA library)."""
    try:
        from ccbench_kit.health.gpu import check
        inv = check.inventory()
        inv.close()
        return len(inv.indices)
    except Exception as e:  # no NVML, no driver, no CUDA library, no GPU
        return f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def mpirun():
    return mpirun_python


def _mpi_started():
    mpi = sys.modules.get("mpi4py.MPI")
    return bool(mpi and mpi.Is_initialized())


@pytest.fixture(autouse=True)
def _mpi_stays_out_of_the_test_process(request):
    """Starting MPI here (importing the engine, which cimports mpi4py.MPI
    with mpi4py's default rc.initialize) makes the pytest process a
    one-rank singleton job and puts OMPI_* variables in its environment:
    every later `ccbench run` the tests start would then see itself inside
    that job and run with 1 rank.  (The kit itself imports mpi4py.MPI
    without initialising it outside a rank: `backends.mpi.engine`.)  Such a
    test runs the import in a subprocess instead."""
    before = _mpi_started()
    yield
    if not before and _mpi_started():
        pytest.fail(f"{request.node.nodeid} started MPI in the pytest process; do that in "
                    "a subprocess (tests/conftest.py says why)", pytrace=False)


def pytest_collection_modifyitems(config, items):
    """Modules with a slow test first (a stable sort: each module's own order
    is kept).  `make test` hands whole modules to its workers (pytest-xdist,
    ``--dist loadfile``) in this order: a long module handed out last would
    run on alone after the others ended."""
    def module(item):
        return item.nodeid.split("::", 1)[0]
    slow = {module(item) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: module(item) not in slow)


def pytest_collection_finish(session):
    """The same, for a test module that starts MPI when it is imported."""
    if _mpi_started():
        raise pytest.UsageError("a test module started MPI in the pytest process when it was "
                                "imported; do that in a subprocess (tests/conftest.py says why)")
