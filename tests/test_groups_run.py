"""Replica groups end to end: the CLI splits the ranks, the groups run the
collective concurrently, each rank's group is a coord along `rank`, results
are checked per group, and busbw uses the group's size."""
import json
import os

import numpy as np
import pytest

import ccbench_kit as ccb
from conftest import run_cli


def _run(tmp_path, coll, nranks, *args, env=None, size="64K", iters=10):
    out = tmp_path / "g.nc"
    proc = run_cli("run", coll, "-r", nranks, "-b", size, "-n", iters, "-w", 2, "--check",
                   "--algorithms", "ring,mpi", "--out", out, *args, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return proc, ccb.load(out)


def _table_rows(stdout):
    return [l.split() for l in stdout.splitlines() if l.strip() and l.split()[0].isdigit()]


def test_split_runs_groups_concurrently_with_busbw_per_group(tmp_path):
    js = tmp_path / "g.json"
    proc, ds = _run(tmp_path, "all_reduce", 4, "--split", "MOD 2", "--report-to-json-file", js,
                    "--json-format", "nccl-tests")
    assert "2 concurrent groups of 2 (busbw per group)" in proc.stdout
    assert list(ds["group"].values) == [0, 1, 0, 1]
    assert list(ds["group_rank"].values) == [0, 0, 1, 1]
    assert json.loads(ds.attrs["groups"]) == [[0, 2], [1, 3]]
    assert ds.attrs["group_size"] == 2 and ds.attrs["nranks"] == 4
    assert ds.sizes["rank"] == 4 and (ds["wrong"].values == 0).all()
    # busbw = algbw x 2(p-1)/p with p = 2, the group, not the 4 ranks
    t = ds["latency"].values.max(axis=3).mean(axis=-1)
    np.testing.assert_allclose(ds.ccb.busbw().values, 65536 / (t * 1e3) * 1.0, rtol=1e-12)
    for row in _table_rows(proc.stdout):
        assert row[7] == row[8] and row[11] == row[12], row  # busbw column == algbw column
    # nccl-tests' JSON: every process with its group, busbw per group
    doc = json.loads(js.read_text())
    assert [(d["rank"], d["group"]) for d in doc["config"]["devices"]] == \
        [(0, 0), (1, 1), (2, 0), (3, 1)]
    assert all(r[p]["bus_bw"] == pytest.approx(r[p]["alg_bw"]) for r in doc["results"]
               for p in ("out_of_place", "in_place"))


@pytest.mark.measures  # a 300 ms sleep against 90 ms bounds: alone, not beside the suite
def test_groups_run_concurrently_and_independently(tmp_path_factory, tmp_path):
    """Rank 3 (group 1) sleeps 300 ms inside its first measured iteration: group 0
    never waits for it and is done long before group 1, on the common clock."""
    import pmpi_probe
    lib = pmpi_probe.build(tmp_path_factory.mktemp("probe"))
    out, d = tmp_path / "c.nc", 300_000
    proc = run_cli("run", "all_reduce", "-r", 4, "-b", 4000, "-w", 2, "-n", 5, "--split", "MOD 2",
                   "--algorithms", "mpi", "--placement", "out_of_place", "--out", out,
                   env=pmpi_probe.env(lib, tmp_path / "log", [1000], delay=(3, 2, d)), timeout=180)
    assert proc.returncode == 0, proc.stderr
    ds = ccb.load(out)
    lat = ds["latency"].values[0, 0, 0]   # (rank, iteration)
    start = ds["start"].values[0, 0, 0]
    g0, g1 = [0, 2], [1, 3]
    assert lat[3, 0] >= 0.95 * d and lat[1, 1] >= 0.9 * d  # group 1 pays for the sleep
    assert lat[g0].max() < 0.3 * d                          # group 0 never waits
    end = start + lat
    assert end[g0].max() < end[g1][:, -1].min() - 0.5 * d  # group 0 done, group 1 not
    # both groups left the same world barrier: their timed loops start together
    assert abs(start[g0, 0].min() - start[g1, 0].min()) < 0.3 * d


def test_data_parallel_dimension_groups_are_strided(tmp_path):
    proc, ds = _run(tmp_path, "all_gather", 6, "--data-parallel-dimension", 3, size="3000")
    assert json.loads(ds.attrs["groups"]) == [[0, 2, 4], [1, 3, 5]]
    assert list(ds["group"].values) == [0, 1, 0, 1, 0, 1]
    # all_gather's size rounds down to 3 ranks of whole fp32: 3000 B -> 750 elements -> 249 per rank
    assert list(ds["count"].values) == [250] and list(ds["size"].values) == [3000]
    assert (ds["wrong"].values == 0).all()
    np.testing.assert_allclose(ds.ccb.busbw().values, ds.ccb.algbw().values * 2 / 3, rtol=1e-12)


def test_custom_groups_keep_the_listed_rank_order(tmp_path):
    # all_gather's output is in group-rank order: the check passes only if rank 2
    # is rank 0 of its group, as listed
    path = tmp_path / "groups.json"
    path.write_text(json.dumps({"replica_groups": [[2, 0], [3, 1]]}))
    _, ds = _run(tmp_path, "all_gather", 4, "--custom-replica-group", path, size="1K")
    assert list(ds["group"].values) == [0, 1, 0, 1]
    assert list(ds["group_rank"].values) == [1, 1, 0, 0]
    assert (ds["wrong"].values == 0).all()


def test_nccl_tests_split_from_the_environment(tmp_path):
    env = {**os.environ, "NCCL_TESTS_SPLIT": "DIV 2"}
    proc, ds = _run(tmp_path, "all_reduce", 4, env=env, size="4K", iters=4)
    assert json.loads(ds.attrs["groups"]) == [[0, 1], [2, 3]]
    assert json.loads(ds.attrs["env"])["NCCL_TESTS_SPLIT"] == "DIV 2"
    assert (ds["wrong"].values == 0).all()
