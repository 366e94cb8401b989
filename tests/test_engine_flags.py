"""nccl-tests 2.19.6's -C, -I (--per_iter_timing), -K, -M and -z on the mpi
backend: a real 3-rank run, its table, its nccl-tests JSON (version 3) and
its Dataset, checked against numbers computed here from the file."""
import json

import numpy as np
import pytest
import xarray as xr

import ccbench_kit as ccb
from ccbench_kit import api, importers
from ccbench_kit.errors import ConfigError
from ccbench_kit.formats.nccl_tests.write_table import mem_string, memory_line
from conftest import run_cli

SIZE = 3 << 20          # all_gather: 3 MiB received, 1 MiB sent per rank
ITERS, SKIP = 10, 3


@pytest.fixture(scope="module")
def flagged(tmp_path_factory):
    d = tmp_path_factory.mktemp("flags")
    out, js = d / "x.nc", d / "x.json"
    proc = run_cli("run", "all_gather", "-r", 3, "-b", SIZE, "-n", ITERS, "-w", 1, "-z", 3,
                   "-C", 1, "--per_iter_timing", 1, "-K", SKIP, "-M", 1, "--out", out,
                   "--report-to-json-file", js, "--json-format", "nccl-tests",
                   "--non-interactive", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, ccb.load(out), json.loads(js.read_text())


def _nearest_rank(sorted_times, p):
    # nccl-tests' percentileIndex: the ceil(n p / 100)-th smallest
    n = len(sorted_times)
    return sorted_times[min(n - 1, -(-n * p // 100) - 1)]


def _stats_by_hand(times):
    x = np.sort(times)
    avg = x.mean()
    sd = np.sqrt(((x - avg) ** 2).mean())      # population, as nccl-tests
    return {"min_us": x[0], "max_us": x[-1], "avg_us": avg, "p50_us": x[len(x) // 2],
            "p95_us": _nearest_rank(x, 95), "p99_us": _nearest_rank(x, 99),
            "stdev_us": sd, "cv_pct": sd / avg * 100}


def _lat(ds, placement):
    return ds["latency"].sel(algorithm="mpi", placement=placement, size=SIZE).values


def test_json_per_iter_skips_the_first_k_in_its_statistics_only(flagged):
    _, ds, doc = flagged
    assert doc["version"] == 3
    cfg = doc["config"]
    assert (cfg["per_iter_timing"], cfg["per_iter_skip"]) == ("true", SKIP)
    assert cfg["blocking_collectives"] == "true" and cfg["iterations"] == ITERS
    (res,) = doc["results"]
    for placement in ("out_of_place", "in_place"):
        lat = _lat(ds, placement)                        # (rank, iteration), µs
        block = res[f"{placement}_per_iter"]
        times = lat.max(axis=0)
        assert block["skipped_iterations"] == SKIP
        np.testing.assert_allclose(block["times_us"], times, rtol=1e-12)   # all ten kept
        np.testing.assert_allclose(block["per_process_max_times_us"], lat, rtol=1e-12)
        for key, value in _stats_by_hand(times[SKIP:]).items():
            assert block[key] == pytest.approx(value, rel=1e-12), key
        # -C 1: nccl-tests names the time cpu_time; it is the kit's mean time
        assert "time" not in res[placement]
        assert res[placement]["cpu_time"] == pytest.approx(times.mean(), rel=1e-12)


def test_table_has_cputime_and_the_per_iteration_columns(flagged):
    stdout, ds, _ = flagged
    head = next(l for l in stdout.splitlines() if "algbw" in l).split()
    assert head.count("cputime") == 2 and "time" not in head
    assert [c for c in head if c.startswith("i_")] == ["i_min", "i_max", "i_p99", "i_cv%"] * 2
    row = next(l for l in stdout.splitlines() if l.split() and l.split()[0] == str(SIZE)).split()
    # size count type redop root algorithm | time algbw busbw #wrong i_min i_max i_p99 i_cv% | ...
    for k, placement in enumerate(("out_of_place", "in_place")):
        s = _stats_by_hand(_lat(ds, placement).max(axis=0)[SKIP:])
        shown = [float(v) for v in row[6 + 8 * k + 4: 6 + 8 * k + 8]]
        want = [s["min_us"], s["max_us"], s["p99_us"], s["cv_pct"]]
        for got, exp in zip(shown, want):  # printed with 2 decimals, or 1 from 10^4
            assert got == pytest.approx(exp, abs=0.051), (placement, shown, want)


def test_memory_line_counts_the_buffers_by_hand(flagged):
    stdout, ds, _ = flagged
    # all_gather of 3 MiB over 3 ranks: each rank sends 1 MiB and receives
    # 3 MiB out of place (in place: one 3 MiB buffer): 4 MiB at most
    assert int(ds["in_bytes"].sel(size=SIZE)) == 1 << 20
    assert int(ds["out_bytes"].sel(size=SIZE)) == 3 << 20
    assert json.loads(ds.attrs["memory_usage"]) == {"User-Allocated": 4 << 20}
    assert ds.attrs["memory_scope"] == "host"
    assert "# Host memory usage    : User-Allocated 4.00 MB | Total  4.00 MB" in stdout


def test_attrs_record_what_was_done(flagged):
    _, ds, _ = flagged
    a = ds.attrs
    assert a["blocking"] == 3 and "outside the timed span" in a["blocking_mode"]
    assert (a["report_cputime"], a["per_iter_timing"], a["memory_report"]) == ("true",) * 3
    assert a["per_iter_skip"] == SKIP
    assert a["timing"] == "host-clock" and a["timing_clock"].startswith("host: MPI_Wtime")
    # no segment given: the engine's own (ext/coll.h), the one the theory's
    # models assume for an older file that does not say
    from ccbench_kit.theory.models import ENGINE_SEGMENT_DEFAULT
    assert a["segment_bytes"] == ENGINE_SEGMENT_DEFAULT == 256 << 10
    # -K leaves the file whole
    assert ds.sizes["iteration"] == ITERS and np.isfinite(ds["latency"].values).all()


@pytest.mark.parametrize("kw, flag", [
    (dict(per_iter_skip=2), "-K/--per_iter_skip"),                      # -K needs -I
    (dict(per_iter_timing=1, per_iter_skip=5, iters=5), "-K/--per_iter_skip"),
    (dict(per_iter_timing=2), "--per_iter_timing"),
    (dict(blocking=4), "-z/--blocking"),
    (dict(report_cputime=1, backend="nccl", timing="cuda-events"), "-C/--report_cputime"),
    (dict(per_iter_timing=1, backend="nccl", timing="batch"), "--per_iter_timing"),
    (dict(blocking=3, backend="nccl", timing="graph"), "-z/--blocking"),
    (dict(memory_report="yes"), "-M/--memory"),
])
def test_bad_combinations_name_their_flag(kw, flag):
    with pytest.raises(ConfigError) as e:
        api.make_config("all_reduce", 2, sizes=[1024], **kw)
    assert e.value.flag == flag


def test_cputime_picks_each_backends_host_clock():
    nccl = api.make_config("all_reduce", 2, sizes=[1024], backend="nccl", report_cputime=1)
    assert nccl.backend.options["timing"] == "host-enqueue" and nccl.sweep.report_cputime
    mpi = api.make_config("all_reduce", 2, sizes=[1024], report_cputime=True, blocking=2)
    assert mpi.backend.name == "mpi" and mpi.sweep.blocking == 2
    assert "timing" not in mpi.backend.options  # the mpi backend's clock is the host's already


def test_the_json_reads_back_as_nccl_tests_json(flagged, tmp_path):
    # the importer takes our -C 1 file as nccl-tests' own: cpu_time, every
    # rank's every iteration from per_process_max_times_us, -K's count kept
    _, ds, doc = flagged
    (back,) = importers.read_text(json.dumps(doc), "x.json", collective="all_gather")
    for placement in ("out_of_place", "in_place"):
        got = back["latency"].sel(placement=placement, size=SIZE).squeeze().values
        np.testing.assert_allclose(got, _lat(ds, placement), rtol=1e-12)
    assert int(back.attrs["per_iter_skip"]) == SKIP


def test_memory_line_is_nccl_tests_getmemstring():
    # nccl-tests' getMemString: by 1024; 2 decimals under 10, 1 under 100, none above
    assert [mem_string(n) for n in (0, 1023, 1536, 50 << 20, 150 << 20, 3 << 30)] == \
        ["0.00 B", "1023 B", "1.50 KB", "50.0 MB", "150 MB", "3.00 GB"]
    ds = xr.Dataset(attrs={"memory_scope": "device", "memory_usage": json.dumps(
        {"Initialization": 600 << 20, "User-Allocated": 2 << 30, "Collective": 0})})
    assert memory_line(ds) == ("# GPU memory usage     : Initialization 600 MB | User-Allocated "
                               "2.00 GB | Collective 0.00 B | Total  2.59 GB")
