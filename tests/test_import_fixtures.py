"""Every real output we have imports: the nccl-tests fixtures (2xH200) and the
sample outputs from the seeds (nccom-test guides, the 8xH100 and p5en
nccl-tests logs, the AllgatherP table), copied into tests/data/baselines.

For each file: the printed numbers come back unchanged as reported_*, and
busbw recomputed from size and time with the collective's bus factor matches
them within the printed rounding.  The hand numbers below are size / time
(x 1e-3 for GB/s from B/us) x the bus factor, worked out from the file.
"""
import re
import warnings
from pathlib import Path

import pytest
import xarray as xr

from ccbench_kit import importers
from ccbench_kit.dataset import SCHEMA
from ccbench_kit.importers import ImporterError, ReportedMismatchWarning

DATA = Path(__file__).parent / "data" / "baselines"
GIB = 2 ** 30


def load(name, **hints):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReportedMismatchWarning)   # none of these disagree
        parts = importers.read(DATA / name, **hints)
    assert len(parts) == 1, parts.keys()
    return next(iter(parts.values()))


def _half(tok):
    tok = tok.lower()
    mant, _, exp = tok.partition("e")
    dec = len(mant) - mant.index(".") - 1 if "." in mant else 0
    return 0.5 * 10.0 ** ((int(exp) if exp else 0) - dec)


# (file, hints, collective, nranks, dtype, sizes, placements, unit,
#  [(size, placement, algorithm, time us, algbw, busbw printed, busbw by hand)])
CASES = [
    ("all_reduce_h200x2.txt", {}, "all_reduce", 2, "fp32", 30, 2, 1e9, [
        # 4294967296 B / 12356.3 us = 347.593316 GB/s; F = 2(2-1)/2 = 1
        (4294967296, "out_of_place", "nccl", 12356.3, 347.59, 347.59, 347.5933164),
        # 1073741824 / 3279.71 = 327.389258
        (1073741824, "in_place", "nccl", 3279.71, 327.39, 327.39, 327.3892582)]),
    ("all_gather_h200x2.txt", {}, "all_gather", 2, "fp32", 29, 2, 1e9, [
        # 4294967296 / 7513.34 = 571.645539 algbw; x (2-1)/2 = 285.822770
        (4294967296, "out_of_place", "nccl", 7513.34, 571.65, 285.82, 285.8227696),
        # 2147483648 / 3555.10 = 604.057171; /2 = 302.028585
        (2147483648, "in_place", "nccl", 3555.10, 604.06, 302.03, 302.0285854)]),
    ("all_reduce_h200x2.json", {}, "all_reduce", 2, "fp32", 30, 2, 1e9, [
        # 4294967296 / 12356.2722 = 347.594098
        (4294967296, "out_of_place", "nccl", 12356.2722, 347.594098, 347.594098, 347.5940985)]),
    ("all_gather_h200x2.json", {}, "all_gather", 2, "fp32", 29, 2, 1e9, [
        # 4294967296 / 7513.342 = 571.645387; /2 = 285.822694
        (4294967296, "out_of_place", "nccl", 7513.342, 571.645387, 285.822694, 285.8226935)]),
    ("nccl_tests_8xh100_excerpt.txt", {}, "all_reduce", 8, "fp32", 32, 2, 1e9, [
        # 17179869184 / 62648 = 274.228534; x 2*7/8 = 479.899934
        (17179869184, "out_of_place", "nccl", 62648, 274.23, 479.90, 479.8999341),
        # 1048576 / 27.37 = 38.311144; x 1.75 = 67.044501
        (1048576, "out_of_place", "nccl", 27.37, 38.31, 67.04, 67.0445013)]),
    # no device list: 128 ranks come from busbw/algbw = 369.86/186.39 = 2*127/128
    ("nccl_tests_p5en_excerpt.txt", {}, "all_reduce", 128, "fp32", 3, 2, 1e9, [
        # 17179869184 / 92173 = 186.387220; x 1.984375 = 369.862139
        (17179869184, "out_of_place", "nccl", 92173, 186.39, 369.86, 369.8621387),
        (17179869184, "in_place", "nccl", 92284, 186.16, 369.42, 369.4172653)]),
    # older nccom-test output: GiB/s
    ("nccom_r2_allr_quick.txt", {}, "all_reduce", 2, "uint8", 1, 1, GIB, [
        # 33554432 / 768 us = 43.690667 GB/s = 40.690104 GiB/s
        (33554432, "out_of_place", "nccom", 768, 40.69, 40.69, 43.6906667)]),
    ("nccom_r2_allr_fp32.txt", {}, "all_reduce", 2, "fp32", 11, 1, GIB, [
        # 1073741824 / 18930 = 56.721702 GB/s = 52.826202 GiB/s
        (1073741824, "out_of_place", "nccom", 18930, 52.83, 52.83, 56.7217023)]),
    ("nccom_r32_allg_check.txt", {}, "all_gather", 32, "fp32", 4, 1, GIB, [
        # 524288 / 179 = 2.928983 GB/s; x 31/32 = 2.837452 (2.642584 GiB/s)
        (524288, "out_of_place", "nccom", 179, 2.73, 2.64, 2.8374525)]),
    ("nccom_r64_allr_2nodes.txt", {}, "all_reduce", 64, "fp32", 28, 1, GIB, [
        # 1073741824 / 41806 = 25.683917 GB/s; x 2*63/64 = 50.565211 (47.092523 GiB/s)
        (1073741824, "out_of_place", "nccom", 41806, 23.92, 47.09, 50.5652111)]),
    # newer nccom-test output: 1e9
    ("nccom_r32_allg_io.txt", {}, "all_gather", 32, "fp32", 4, 1, 1e9, [
        # 524288 / 23.16 = 22.637651; x 31/32 = 21.930225
        (524288, "out_of_place", "nccom", 23.16, 22.64, 21.93, 21.9302245)]),
    ("nccom_r8_allg_stats.txt", {}, "all_gather", 8, "fp32", 4, 1, 1e9, [
        # 524288 / 14.83 = 35.353203; x 7/8 = 30.934053
        (524288, "out_of_place", "nccom", 14.83, 35.34, 30.92, 30.9340526)]),
    ("nccom_r32_allg_table.txt", {}, "all_gather", 32, "fp32", 4, 1, 1e9, [
        (524288, "out_of_place", "nccom", 23.11, 22.69, 21.98, 21.9776720)]),
    # the JSON names neither collective nor ranks: the caller says
    ("nccom_results.json", {"collective": "all_gather", "nranks": 32}, "all_gather", 32, "fp32",
     4, 1, 1e9, [
        (524288, "out_of_place", "nccom", 23.11, 22.688776793562784, 21.97975251876395,
         21.9776720)]),
    ("nccom_r16_allr_algorithm.txt", {}, "all_reduce", 16, "fp32", 8, 1, 1e9, [
        # 536870912 / 9689.51 = 55.407437; x 2*15/16 = 103.888944
        (536870912, "out_of_place", "nccom", 9689.51, 55.41, 103.89, 103.8889438)]),
    ("nccom_r8_permute.txt", {}, "permute", 8, "uint8", 1, 1, 1e9, [
        # 33554432 / 894.24 us = 37.522848 GB/s; permute's factor is 1
        (33554432, "out_of_place", "nccom", 894.24, 37.52, 37.52, 37.5228485)]),
    ("nccom_r2_alltoallv.txt", {}, "alltoallv", 2, "fp32", 1, 1, 1e9, [
        # 1048608 / 955.05 us = 1.097961 GB/s; x (2-1)/2 = 0.548981
        (1048608, "out_of_place", "nccom", 955.05, 1.10, 0.55, 0.5489807)]),
    # AllgatherP: Size(B) 32768 per rank x 8 ranks = 262144 B (nccl-tests' size)
    ("allgatherp_8ranks.txt", {}, "all_gather", 8, "bf16", 1, 1, 1e9, [
        # 262144 / 125 us = 2.097152; x 7/8 = 1.835008
        (262144, "out_of_place", "AllGatherP_Direct", 125.0, 2.104, 1.841, 1.835008),
        # 262144 / 112 = 2.340571; x 7/8 = 2.048
        (262144, "out_of_place", "AllGatherP_Pipeline", 112.0, 2.346, 2.053, 2.048),
        # 262144 / 118 = 2.221559; x 7/8 = 1.943864
        (262144, "out_of_place", "NCCL_AllGather", 118.0, 2.221, 1.944, 1.9438644)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fixture_imports_with_printed_and_recomputed_busbw(case):
    name, hints, coll, nranks, dtype, nsizes, nplace, unit, rows = case
    ds = load(name, **hints)
    a = ds.attrs
    assert (a["collective"], a["nranks"], a["dtype"], a["timing"]) == (coll, nranks, dtype, "imported")
    assert a["schema"] == SCHEMA and a["source"].endswith(name)
    assert ds.sizes["size"] == nsizes and ds.sizes["placement"] == nplace
    assert list(ds["rank"].values) == [-1] and list(ds["iteration"].values) == [0]
    assert a["aggregated"]
    assert a["reported_check"].startswith("ok:")
    assert ds["reported_busbw"].attrs["units"] == ("GiB/s" if unit == GIB else "GB/s")
    recomputed = ds.ccb.busbw()
    for size, pl, alg, t, algbw, busbw, by_hand in rows:
        sel = dict(size=size, placement=pl, algorithm=alg)
        assert float(ds["reported_time"].sel(sel)) == pytest.approx(t, rel=1e-12)
        assert float(ds["reported_algbw"].sel(sel)) == pytest.approx(algbw, rel=1e-12)
        assert float(ds["reported_busbw"].sel(sel)) == pytest.approx(busbw, rel=1e-12)
        # recomputed in GB/s (1e9) from the printed time: exactly the hand number
        assert float(recomputed.sel(sel)) == pytest.approx(by_hand, rel=1e-7)
        # and within rounding of the printed value (in the file's unit)
        in_unit = by_hand * 1e9 / unit
        tol = _half(repr(busbw)) + in_unit * _half(repr(t)) / t
        if name.startswith("allgatherp"):
            tol = 0.0005 + in_unit * 0.0005 / (t / 1e3)     # times printed in ms, 3 decimals
        assert abs(in_unit - busbw) <= tol + 1e-12


_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)"
                  r"\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")


@pytest.mark.parametrize("name", ["all_reduce_h200x2.txt", "all_gather_h200x2.txt",
                                  "nccl_tests_8xh100_excerpt.txt", "nccl_tests_p5en_excerpt.txt"])
def test_every_nccl_tests_row_round_trips(name):
    """Row by row, with a plain regex of the fixtures' layout: each printed
    busbw is in reported_busbw, and the recomputed one is within rounding."""
    ds = load(name)
    rec = ds.ccb.busbw()
    seen = set()
    for line in (DATA / name).read_text().splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        size = int(m.group(1))
        if size in seen:                 # all_gather's two 0 B rows: the first is kept
            continue
        seen.add(size)
        for pl, (t, alg, bus) in (("out_of_place", m.group(6, 7, 8)), ("in_place", m.group(10, 11, 12))):
            sel = dict(size=size, placement=pl, algorithm="nccl")
            assert float(ds["reported_busbw"].sel(sel)) == float(bus)
            assert float(ds["reported_time"].sel(sel)) == float(t)
            r = float(rec.sel(sel))
            assert abs(r - float(bus)) <= _half(bus) + r * _half(t) / float(t) + 1e-12, (size, pl)
    assert len(seen) == ds.sizes["size"]


def test_duplicate_zero_sizes_keep_the_first_row():
    # all_gather on 2 ranks: requests of 8 and 16 B both round to 0 B
    ds = load("all_gather_h200x2.txt")
    assert ds["size"].values[0] == 0 and ds["size"].values[1] == 32
    assert float(ds["reported_time"].sel(size=0, placement="out_of_place", algorithm="nccl")) == 0.62
    assert "duplicate_sizes" in ds.attrs


def test_nccl_tests_metadata():
    ds = load("all_reduce_h200x2.txt")
    a = ds.attrs
    assert a["library"] == "NCCL 2.28.9" and a["backend"] == "nccl"
    assert (a["warmup"], a["iters"]) == (5, 20)
    assert a["format"] == "nccl-tests text 2.19.6"
    assert a["reported_avg_busbw"] == "102.472"
    assert a["out_of_bounds"] == "0 OK"
    assert "20 back-to-back iterations" in a["aggregated"]
    js = load("all_reduce_h200x2.json")
    assert js.attrs["created"] == "2026-11-22T05:59:10"
    assert "all_reduce_perf" in js.attrs["command"]
    assert '"NCCL_NVLS_ENABLE": "0"' in js.attrs["env"]


def test_nccom_units_and_columns_are_said():
    old = load("nccom_r2_allr_fp32.txt")
    assert old.attrs["reported_bw_unit"].startswith("GiB/s (2^30 B/s): 11 of 11")
    assert "P50" in old.attrs["aggregated"]           # time(us) of the older guide
    new = load("nccom_r32_allg_io.txt")
    assert new.attrs["reported_bw_unit"].startswith("GB/s (1e9 B/s): 4 of 4")
    # --show-input-output-size: per rank input 32 B, output 1024 B for 1 KiB
    assert int(new["in_bytes"].sel(size=1024)) == 32 and int(new["out_bytes"].sel(size=1024)) == 1024
    stats = load("nccom_r8_allg_stats.txt")
    assert list(stats["stat"].values) == ["p25", "p50", "p90", "p99"]
    assert float(stats["reported_time_stats"].sel(size=524288, stat="p99").squeeze()) == 17.0
    alg = load("nccom_r16_allr_algorithm.txt")
    assert list(alg["algorithm_used"].values) == ["mesh"] * 5 + ["rdh", "kangaring", "kangaring"]


def test_allgatherp_sizes_and_rank_stats():
    ds = load("allgatherp_8ranks.txt")
    assert list(ds["algorithm"].values) == ["AllGatherP_Direct", "AllGatherP_Pipeline", "NCCL_AllGather"]
    assert int(ds["in_bytes"].values[0]) == 32768 and int(ds["out_bytes"].values[0]) == 262144
    assert int(ds["count"].values[0]) == 16384
    st = ds["reported_time_stats"].sel(algorithm="AllGatherP_Direct", size=262144).squeeze()
    assert float(st.sel(stat="rank_min")) == pytest.approx(118.0)
    assert float(st.sel(stat="rank_max")) == pytest.approx(132.0)


def test_nccom_failure_is_an_importer_error():
    with pytest.raises(ImporterError) as e:
        importers.read(DATA / "nccom_failure.txt")
    assert e.value.line == 2 and "Failure running neuron-bench" in str(e.value)


def test_open_dataset_engine_reads_baselines():
    ds = xr.open_dataset(DATA / "all_gather_h200x2.json", engine="ccbench")
    assert ds.attrs["collective"] == "all_gather"
    assert float(ds["reported_busbw"].sel(size=4294967296, placement="in_place").squeeze()) == 307.788814
    ds = xr.open_dataset(DATA / "nccom_results.json", engine="ccbench", collective="allg", nranks=32)
    assert ds.attrs["nranks"] == 32
    from ccbench_kit.dataset.backend import CCBenchBackendEntrypoint
    assert CCBenchBackendEntrypoint().guess_can_open(str(DATA / "all_reduce_h200x2.txt")) is False


def test_open_dataset_engine_reads_our_files_and_groups(tmp_path):
    from ccbench_kit.dataset import save
    parts = importers.read(DATA / "all_reduce_h200x2.txt")
    parts.update(importers.read(DATA / "all_gather_h200x2.txt"))
    save(parts, tmp_path / "both.nc")
    ds = xr.open_dataset(tmp_path / "both.nc", engine="ccbench", group="all_gather")
    assert ds.attrs["collective"] == "all_gather" and ds.sizes["size"] == 29
    assert float(ds["reported_busbw"].sel(size=4294967296, placement="in_place").squeeze()) == 307.79
    with pytest.raises(ImporterError, match="expected group 'all_reduce' or 'all_gather'"):
        xr.open_dataset(tmp_path / "both.nc", engine="ccbench", group="alltoall")
    with open(DATA / "nccl_tests_p5en_excerpt.txt", "rb") as f:
        ds = xr.open_dataset(f, engine="ccbench")
    assert ds.attrs["nranks"] == 128


def test_rank_count_from_the_bus_factor_or_asked_for():
    # the JSON's full-precision bandwidths give busbw/algbw = 0.96875 = 31/32 exactly
    ds = load("nccom_results.json", collective="all_gather")
    assert ds.attrs["nranks"] == 32
    # the table's 2.64/2.73 (with rounding) fits 28 to 34 ranks: without its
    # command line the importer asks instead of guessing
    text = (DATA / "nccom_r32_allg_check.txt").read_text().split("\n", 1)[1]
    with pytest.raises(ImporterError, match=r"pass --nranks .*fits 2\d to 3\d ranks"):
        importers.read_text(text, "table.txt", collective="all_gather")
    ds = importers.read_text(text, "table.txt", collective="all_gather", nranks=32)[0]
    assert ds.attrs["nranks"] == 32 and ds.attrs["reported_check"].startswith("ok")
