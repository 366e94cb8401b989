"""Runs too big for memory: per-iteration data stored in chunks, and
statistics, tables and the report computed from dask arrays without ever
holding the whole latency array (checked by watching every dask task)."""
import os
import sys

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("dask")
import dask  # noqa: E402
from dask.callbacks import Callback  # noqa: E402

import ccbench_kit as ccb  # noqa: E402
from ccbench_kit.dataset.io import analysis_ready  # noqa: E402
from ccbench_kit.dataset.schema import make_dataset  # noqa: E402

A, S, R, I = 3, 6, 7, 40   # algorithms, sizes, ranks (odd), iterations


def _dataset():
    rng = np.random.default_rng(11)
    sizes = [8 << (3 * k) for k in range(S)]
    base = np.array([[5 + 2 * a + s / 1e3 / (10 + a) for s in sizes] for a in range(A)])
    lat = base[:, None, :, None, None] * rng.lognormal(0, 0.1, (A, 2, S, R, I))
    lat[:, :, :, 5, :] *= 1.4   # rank 5 is slow
    start = np.cumsum(lat.max(axis=3, keepdims=True), axis=4) + rng.uniform(0, 1, lat.shape)
    start[:, :, :, 5, :] += 0.5 * base[:, None, :, None]   # ...and arrives late
    return make_dataset(
        algorithms=["ring", "mpi", "tree"], placements=["out_of_place", "in_place"],
        sizes=sizes, counts=[s // 4 for s in sizes], in_bytes=sizes, out_bytes=sizes,
        latency=lat, start=start, wrong=np.zeros((A, 2, S), np.int64), ranks=range(R),
        hosts=[f"n{r // 4}" for r in range(R)], devices=["cpu"] * R,
        attrs={"collective": "all_reduce", "dtype": "fp32", "op": "sum", "nranks": R,
               "iters": I, "warmup": 2, "backend": "mpi", "check": "none"})


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "r.nc"
    ds = _dataset()
    ccb.save(ds, path)
    return ds, path


class _Largest(Callback):
    """The largest numpy result of any dask task."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def _posttask(self, key, result, dsk, state, worker_id):
        if isinstance(result, np.ndarray):
            self.largest = max(self.largest, result.nbytes)


def test_latency_is_stored_in_one_chunk_per_block(saved):
    import h5py
    _, path = saved
    with h5py.File(path) as f:
        for name in ("latency", "start"):
            assert f[name].chunks == (1, 1, 1, R, I)
            assert f[name].compression == "gzip" and f[name].shuffle


def test_summary_and_busbw_stream_over_chunks(saved):
    eager, path = saved
    lazy = ccb.load(path, chunks={})
    assert lazy["latency"].chunks is not None
    one_block, reduced = R * I * 8, A * 2 * S * I * 8
    with dask.config.set(scheduler="synchronous"), _Largest() as watch:
        table = lazy.ccb.summary(stats=("avg", "p50", "p99"))
        bus = lazy.ccb.busbw("p90").values
    # no task held more than one (algorithm, placement, size) block of the
    # latency, or the iteration times once the ranks are reduced away
    assert 0 < watch.largest <= max(one_block, reduced) < lazy["latency"].nbytes / 2
    ref = eager.ccb.summary(stats=("avg", "p50", "p99"))
    cols = [c for c in ref.columns if c[0] in ("out_of_place", "in_place")]
    np.testing.assert_allclose(table[cols].to_numpy(float), ref[cols].to_numpy(float),
                               rtol=1e-12)
    np.testing.assert_allclose(bus, eager.ccb.busbw("p90").values, rtol=1e-12)
    assert lazy["latency"].chunks is not None  # still on disk afterwards


@pytest.mark.filterwarnings("ignore:The specified chunks separate the stored chunks")
def test_percentiles_over_split_iterations(saved):
    eager, path = saved
    lazy = ccb.load(path, chunks={"iteration": 7})   # iterations split over chunks
    np.testing.assert_allclose(lazy.ccb.time("p99").values, eager.ccb.time("p99").values,
                               rtol=1e-12)
    np.testing.assert_allclose(lazy.ccb.time("median", "mean").values,
                               eager.ccb.time("median", "mean").values, rtol=1e-12)


def test_analysis_ready_keeps_big_runs_on_disk(saved, monkeypatch):
    eager, path = saved
    small = analysis_ready(xr.open_dataset(path, engine="h5netcdf"))
    assert small["latency"].chunks is None  # small: loaded into memory
    monkeypatch.setenv("CCB_IN_MEMORY_LIMIT", "0")
    big = analysis_ready(xr.open_dataset(path, engine="h5netcdf"))
    assert big["latency"].chunks is not None
    assert big["latency"].chunks[:3] == ((1,) * A, (1, 1), (S,))  # whole sizes per chunk
    with dask.config.set(scheduler="synchronous"), _Largest() as watch:
        it = big.ccb.iteration_time()
    assert watch.largest <= max(S * R * I * 8, A * 2 * S * I * 8)  # one dask chunk at most
    np.testing.assert_allclose(it.values, eager.ccb.iteration_time().values, rtol=1e-12)


@pytest.mark.slow
def test_report_of_a_lazily_opened_run(saved, tmp_path, monkeypatch):
    """The whole report, with the kernel forced to keep the data on disk."""
    pytest.importorskip("papermill")
    from ccbench_kit.report.driver import render

    eager, path = saved
    monkeypatch.setenv("CCB_IN_MEMORY_LIMIT", "0")
    html = tmp_path / "r.html"
    render([str(path)], str(html), title="lazy")
    text = html.read_text()
    assert text.count("<img") >= 4
    assert "rank 5" in text  # the slow rank is found from the chunked data


def test_the_largest_part_is_read_from_the_files_metadata(saved, tmp_path, monkeypatch):
    """The report's driver decides before any data are read whether the
    kernel needs dask, by the rule `analysis_ready` applies: per part."""
    from ccbench_kit.dataset.memory import largest_part_bytes, needs_dask
    eager, path = saved
    per_part = 2 * (A * 2 * S * R * I) * 8   # latency and start, float64
    assert largest_part_bytes(path) == per_part
    two = tmp_path / "two.nc"   # the largest of two parts, not their sum
    small = eager.isel(iteration=slice(0, 4)).assign_attrs(collective="all_gather")
    ccb.save({"all_gather": small, "all_reduce": eager}, two)
    assert largest_part_bytes(two) == per_part
    log = tmp_path / "nccl-tests.log"   # another tool's log: its importer reads it whole
    log.write_text("# nccl-tests\n")
    assert largest_part_bytes(log) == 0
    fifo = tmp_path / "fifo"   # no regular file: never opened (a FIFO would block)
    os.mkfifo(fifo)
    assert largest_part_bytes(fifo) == largest_part_bytes(tmp_path) == 0
    monkeypatch.setenv("CCB_IN_MEMORY_LIMIT", str(per_part))
    assert not needs_dask([path, two, log, ""])
    assert analysis_ready(xr.open_dataset(path, engine="h5netcdf"))["latency"].chunks is None
    monkeypatch.setenv("CCB_IN_MEMORY_LIMIT", str(per_part - 1))
    assert needs_dask([log, two])
    assert analysis_ready(xr.open_dataset(path, engine="h5netcdf"))["latency"].chunks


def test_without_dask_a_large_run_is_loaded_whole(saved, monkeypatch):
    _, path = saved
    monkeypatch.setenv("CCB_IN_MEMORY_LIMIT", "0")
    monkeypatch.setitem(sys.modules, "dask", None)   # as `_optional.without` leaves it
    ds = analysis_ready(xr.open_dataset(path, engine="h5netcdf"))
    assert ds["latency"].chunks is None


_MODULES_SEEN = {"cells": [
    {"id": "params", "cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "x = 1",
     "outputs": [], "execution_count": None},
    {"id": "probe", "cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
     "source": "import sys, xarray\nxarray.Dataset({'a': ('n', [x])}).load()\n"
               "print([m for m in ('dask', 'dask.array') if sys.modules.get(m) is not None])"}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.parametrize("dask_wanted", [False, True])
def test_a_report_kernel_has_dask_only_when_asked(tmp_path, dask_wanted):
    """xarray imports dask.array in any process where dask can be imported;
    a report's kernel that holds no dask array is started without it."""
    pytest.importorskip("papermill")
    import json
    import nbformat
    from ccbench_kit.report.driver import execute
    nb = tmp_path / "modules.ipynb"
    nb.write_text(json.dumps(_MODULES_SEEN))
    executed = execute(nb, tmp_path / "out.html", {"x": 2}, dask=dask_wanted)
    cell = nbformat.read(executed, as_version=4).cells[-1]
    printed = "".join(o.get("text", "") for o in cell.outputs)
    assert printed.strip() == ("['dask', 'dask.array']" if dask_wanted else "[]")
