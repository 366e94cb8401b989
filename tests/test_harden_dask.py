"""The Dask-MPI launch path keeps a results file to its own run (issue 28),
as the mpirun path does: rank 0's sidecars carry the run's id (attr
``run_id`` of the file), another run's sidecars beside ``out`` are never
folded in nor removed, and a second writer to a file in use is refused in
one line (the lock beside it), not merged.  A real cluster: mpirun +
dask-mpi, a scheduler and 2 workers."""
import re

import numpy as np
import pytest

psutil = pytest.importorskip("psutil")
pytest.importorskip("dask_mpi")

import ccbench_kit as ccb  # noqa: E402
from ccbench_kit.dataset.checkpoint import output_lock, pending_runs  # noqa: E402
from ccbench_kit.errors import CCBenchError  # noqa: E402
from ccbench_kit.launch import cluster  # noqa: E402

FOREIGN = "f" * 32


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    c = cluster.start(3, scheduler_file=str(tmp_path_factory.mktemp("cl") / "s.json"),
                      timeout=120)
    pids = c.processes()
    cl = c.client()
    yield cl
    cl.close()
    c.stop()
    alive = [p for p in pids if psutil.pid_exists(p)
             and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == []


def _foreign_sidecar(out):
    side = out.parent / f"{out.name}.ccb-pending-{FOREIGN}-00000.npz"
    with open(side, "wb") as f:
        np.savez(f, size=1 << 20, count=1, in_bytes=1, out_bytes=1,
                 latency=np.full((1, 1, 2, 2), 9.0), wrong=np.zeros((1, 1), int))
    return side, side.read_bytes()


def test_a_cluster_run_writes_its_own_run_id_and_leaves_another_runs_sidecars(client, tmp_path):
    out = tmp_path / "r.nc"
    side, before = _foreign_sidecar(out)
    ds = ccb.run("all_reduce", 2, sizes=[8, 64], iters=2, warmup=1, client=client,
                 out=str(out), progress=False)
    saved = ccb.load(out)
    assert re.fullmatch(r"[0-9a-f]{32}", saved.attrs["run_id"])
    assert saved.attrs["run_id"] != FOREIGN and ds.attrs["run_id"] == saved.attrs["run_id"]
    assert list(saved["size"].values) == [8, 64]              # nothing of the other run
    assert side.read_bytes() == before and pending_runs(out) == [FOREIGN]
    assert not (tmp_path / "r.nc.ccb-lock").exists()
    # a second run to the same file gets another id
    again = ccb.run("all_reduce", 2, sizes=[8], iters=2, warmup=1, client=client,
                    out=str(out), progress=False)
    assert again.attrs["run_id"] != saved.attrs["run_id"]


def test_a_file_in_use_is_refused_before_any_rank_runs(client, tmp_path):
    out = tmp_path / "busy.nc"
    with output_lock(str(out)):
        with pytest.raises(CCBenchError, match="--out"):
            ccb.run("all_reduce", 2, sizes=[8], iters=2, warmup=1, client=client,
                    out=str(out), progress=False)
    assert not out.exists()
