"""--unique-buff and --coalesced-cc-size-ratio, seen through a PMPI probe
preloaded into the ranks: which buffers and counts the engine really passes
to MPI_Allreduce."""
import json
from collections import Counter

import numpy as np
import pytest

import ccbench_kit as ccb
import pmpi_probe
from conftest import run_cli


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    return pmpi_probe.build(tmp_path_factory.mktemp("probe"))


def _run(probe, tmp_path, counts, *args):
    log, out = tmp_path / "log", tmp_path / "x.nc"
    proc = run_cli("run", "all_reduce", "-r", 2, "--algorithms", "mpi", "--placement",
                   "out_of_place", "--out", out, *args, timeout=180,
                   env=pmpi_probe.env(probe, log, counts))
    assert proc.returncode == 0, proc.stderr
    return ccb.load(out), [f for f in pmpi_probe.read(log, 0) if f[0] == "A"]


@pytest.mark.parametrize("unique", [False, True])
def test_unique_buff_gives_every_operation_its_own_buffers(probe, tmp_path, unique):
    # 3 warm-up + 4 measured iterations of 2 aggregated operations = 14 operations
    ds, calls = _run(probe, tmp_path, [1000], "-b", 4000, "-w", 3, "-n", 4, "-m", 2,
                     *(["--unique-buff"] if unique else []))
    buffers = [(f[2], f[3]) for f in calls]
    assert len(buffers) == 14
    if unique:
        assert len(set(buffers)) == 14
        assert len({b for pair in buffers for b in pair}) == 28  # no two share memory
    else:
        assert len(set(buffers)) == 1
    assert ds.attrs["unique_buff"] == ("true" if unique else "false")


def test_coalesced_ratio_splits_each_operation(probe, tmp_path):
    # 4000 B as [1, 3]: collectives of 250 and 750 fp32 elements, in that order,
    # as one timed operation; with -m 2, two such operations per iteration
    ds, calls = _run(probe, tmp_path, [250, 750], "-b", 4000, "-w", 1, "-n", 3, "-m", 2,
                     "--coalesced-cc-size-ratio", "[1,3]", "--check")
    counts = [int(f[1]) for f in calls]
    # (1 warm-up + 3 measured) x 2 aggregated x 2 parts; the check runs the whole 1000
    assert counts == [250, 750] * 8
    assert list(ds["size"].values) == [4000] and list(ds["count"].values) == [1000]
    assert json.loads(ds.attrs["coalesced_ratio"]) == [1, 3]
    assert (ds["wrong"].values == 0).all()
    # every part has its own buffers; the two parts don't share memory
    assert len(Counter((f[1], f[2], f[3]) for f in calls)) == 2
    assert np.isfinite(ds["latency"].values).all()
