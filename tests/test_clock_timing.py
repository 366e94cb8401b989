"""The timed loop seen from outside, through a PMPI probe preloaded into the
ranks: a rank delayed by a known sleep shows up as a late start on the common
clock; -z/--blocking places barriers as nccl-tests' -z 1/2/3; -m/--agg-iters runs m
operations per timed iteration and reports the time of one."""
import json

import numpy as np
import pytest

import ccbench_kit as ccb
import pmpi_probe
from ccbench_kit.backends.blocking import BLOCKING_MODES
from conftest import run_cli

COUNT = 1000          # fp32 elements: a 4000 B all_reduce, a count nothing else uses
DELAY_US = 100_000


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    return pmpi_probe.build(tmp_path_factory.mktemp("probe"))


def _run(probe, tmp_path, nranks, args, delay=None):
    log, out = tmp_path / "log", tmp_path / "x.nc"
    proc = run_cli("run", "all_reduce", "-r", nranks, "-b", 4 * COUNT, "--placement",
                   "out_of_place", "--algorithms", "mpi", "--out", out, *args, timeout=180,
                   env=pmpi_probe.env(probe, log, [COUNT], delay))
    assert proc.returncode == 0, proc.stderr
    sel = dict(algorithm="mpi", placement="out_of_place", size=4 * COUNT)
    ds = ccb.load(out)
    return ds["start"].sel(sel).values, ds["latency"].sel(sel).values, ds, log


# the bounds are a 100 ms sleep seen on the common clock: a crowded machine's
# scheduler stretches it (202 ms once beside the rest of the suite), so alone
@pytest.mark.measures
def test_a_delayed_rank_arrives_late_on_the_common_clock(probe, tmp_path):
    # rank 1 sleeps after the allreduce of measured iteration 1 (call 2 + 1 = 3):
    # iteration 1 is slow on rank 1, and rank 1 starts iteration 2 late, so the
    # others wait for it there
    start, lat, ds, _ = _run(probe, tmp_path, 3, ["-w", 2, "-n", 6], delay=(1, 3, DELAY_US))
    d = DELAY_US
    others = [0, 2]
    late = start[1, 2] - np.mean(start[others, 2])
    assert 0.95 * d <= late <= 1.3 * d, (late, start)
    assert lat[1, 1] >= 0.95 * d and lat[1, 2] < 0.5 * d
    assert (lat[others, 2] >= 0.9 * d).all() and (lat[others, 1] < 0.5 * d).all()
    # everywhere else the ranks start together on the common clock (to within
    # what a loaded, oversubscribed machine's scheduler adds)
    for it in (0, 1, 3, 4, 5):
        assert np.ptp(start[:, it]) < 0.3 * d, (it, start[:, it])
    # starts grow with the iterations on every rank
    assert (np.diff(start, axis=1) > 0).all()
    offsets, errors = (json.loads(ds.attrs[k]) for k in ("clock_offsets_us", "clock_errors_us"))
    assert len(offsets) == 3 and offsets[0] == 0.0 and all(e >= 0 for e in errors)


@pytest.mark.parametrize("blocking", [0, 1, 2, 3])
def test_blocking_and_agg_iters_as_the_loop_runs_them(probe, tmp_path, blocking):
    # rank 0 sleeps 20 ms after every allreduce: every operation takes >= 20 ms
    start, lat, ds, log = _run(probe, tmp_path, 2, ["-w", 2, "-n", 3, "-m", 2, "-z", blocking],
                               delay=(0, -1, 20_000))
    # nccl-tests 2.19's -z: 1 a barrier after every operation, 2 a wait for
    # it (an MPI call has completed on return: nothing added), 3 a barrier
    # after every iteration
    iteration = {0: "AA", 1: "ABAB", 2: "AA", 3: "AAB"}[blocking]
    # 2 warm-up iterations of 2 operations, the barrier that ends warm-up,
    # then 3 iterations of 2 operations (what follows is the harness's)
    expected = "AAAA" + "B" + iteration * 3
    for rank in (0, 1):
        calls = pmpi_probe.pattern(pmpi_probe.read(log, rank))
        calls = calls[calls.index("A"):]
        assert calls[:len(expected)] == expected, (rank, calls)
        assert "A" not in calls[len(expected):], (rank, calls)
    # the time of one operation, not of the m aggregated ones: every operation
    # takes >= 20 ms, and an iteration (2 operations) lasts twice its latency:
    # back to back, the next iteration starts when this one ends
    assert (lat.max(axis=0) >= 19_000).all(), lat
    span = np.diff(start, axis=1)            # start to start, per rank
    if blocking == 3:
        # rank 1 waits in the barrier after each iteration for rank 0's
        # sleep after its last operation: ~20 ms between its iterations
        # that no latency holds (the barrier is outside the timed span)
        assert (span[1] - 2 * lat[1, :-1] >= 18_000).all(), (span, lat)
        assert (span[0] >= 2 * lat[0, :-1] - 50).all(), (span, lat)
    else:
        # -z 1's barriers are inside the span: back to back all the same
        np.testing.assert_allclose(span, 2 * lat[:, :-1], rtol=0.01, atol=50)
    assert ds.attrs["agg_iters"] == 2 and ds.attrs["blocking"] == blocking
    assert ds.attrs["blocking_mode"].startswith(BLOCKING_MODES[blocking])
