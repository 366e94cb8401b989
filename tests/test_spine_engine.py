"""The engine under mpirun: results against numpy, for rank counts and
counts that don't divide evenly."""
import json

import pytest

SCRIPT = r"""
import json, numpy as np
from mpi4py import MPI
from ccbench_kit.backends.mpi import engine
_engine = engine()
comm = MPI.COMM_WORLD
r, p = comm.Get_rank(), comm.Get_size()
out = {}
for alg in ("mpi", "ring"):
    for count in (1, 7, 250, 1001):
        for dt, code in ((np.float32, 8), (np.int32, 7)):
            x = (np.arange(count) * (r + 1) % 97).astype(dt)
            recv = np.zeros(count, dt)
            n = _engine.scratch_bytes("all_reduce", alg, count, recv.itemsize, p)
            scratch = np.empty(n, np.uint8) if n else None
            lat, start = _engine.time_loop(comm, "all_reduce", alg, [(x, recv, scratch)],
                                           dtype=code, op=0, count=count, warmup=2, iters=3)
            want = sum((np.arange(count) * (k + 1) % 97).astype(np.int64) for k in range(p))
            out[f"ar/{alg}/{count}/{dt.__name__}"] = bool(np.array_equal(recv.astype(np.int64), want)) and len(lat) == 3
            # all_gather, in place: send = own block of recv
            g = np.zeros(count * p, dt)
            g[r * count:(r + 1) * count] = x
            _engine.time_loop(comm, "all_gather", alg, [(g[r * count:(r + 1) * count], g, None)],
                              dtype=code, op=0, count=count, warmup=1, iters=2)
            want_g = np.concatenate([(np.arange(count) * (k + 1) % 97).astype(dt) for k in range(p)])
            out[f"ag/{alg}/{count}/{dt.__name__}"] = bool(np.array_equal(g, want_g))
res = comm.gather(out)
if r == 0:
    print("RESULT " + json.dumps(res))
"""


@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_engine_matches_numpy(mpirun, nranks):
    proc = mpirun(nranks, SCRIPT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    per_rank = json.loads(line[7:])
    assert len(per_rank) == nranks
    failed = [k for res in per_rank for k, ok in res.items() if not ok]
    assert not failed, failed
    assert len(per_rank[0]) == 2 * 4 * 2 * 2


def test_engine_reports_unknown_algorithm():
    from ccbench_kit.backends.mpi import engine_algorithms
    assert engine_algorithms("all_reduce")[0] == "mpi"
    with pytest.raises(KeyError):
        engine_algorithms("no_such_collective")


def test_engine_records_the_mpi_it_was_built_against():
    from mpi4py import MPI

    from ccbench_kit.backends.mpi import engine
    from ccbench_kit.launch import mpi_impl
    build = engine().BUILD_MPI
    assert build.startswith(("Open MPI v", "MPICH Version:"))
    assert MPI.Get_library_version().startswith(build)
    # the one place that decides the launcher reads the same build
    assert mpi_impl.family() == ("openmpi" if build.startswith("Open MPI") else "mpich")
    assert engine().__name__ == ("ccbench_kit._engine" if mpi_impl.family() == "openmpi"
                                 else "ccbench_kit._engine_mpich")


def test_an_engine_failure_is_a_failed_run_not_a_bug():
    # the CLI prints a CCBenchError as one line (exit 3 for a RunError); the
    # worker reports it as an error event instead of a traceback
    from ccbench_kit.backends.mpi import engine
    from ccbench_kit.errors import CCBenchError, RunError
    assert issubclass(engine().EngineError, RunError)
    assert issubclass(engine().EngineError, CCBenchError) and engine().EngineError.exit_code == 3
