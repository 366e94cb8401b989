"""nccl-tests -J JSON (format version 3): per-iteration and per-process data,
``"nan"`` strings, null blocks, cycles, and broken files."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from ccbench_kit import importers
from ccbench_kit.importers import ImporterError

DATA = Path(__file__).parent / "data" / "baselines"


def lf(v):
    """nccl-tests' jsonDouble: %lf, and the string "nan" for NaN."""
    return "\"nan\"" if v != v else "%lf" % v


def doc(results, ngpus=1, procs=3, extra=""):
    """A JSON v3 document as util.cu writes it (compact, %lf numbers)."""
    devices = ",".join(
        '{"rank":%d,"group":0,"pid":%d,"hostname":"node%d","device":0,"device_hex":"0000:%02x:00",'
        '"device_info":"NVIDIA H200"}' % (p * ngpus, 100 + p, p, p) for p in range(procs))
    return ('{"version":3,"start_time":"2026-01-02 03:04:05","args":["./build/all_reduce_perf_mpi",'
            '"-b","1M","-e","2M","-I","1"],"env":["NCCL_DEBUG=WARN","HOME=/root","NCCL_PROTO=LL"],'
            '"nccl_version":22809,"config":{"nthreads":1,"ngpus":%d,"minimum_bytes":1048576,'
            '"maximum_bytes":2097152,"step_factor":2,"warmup_iters":5,"iterations":4,'
            '"aggregated_iterations":1,"validation":1,"graph":0,"blocking_collectives":"false",'
            '"per_iter_timing":"true","per_iter_skip":0,"parallel_init":"false","devices":[%s]},'
            '"results":[%s]%s,"end_time":"2026-01-02 03:04:09"}' % (ngpus, devices, ",".join(results), extra))


def result(size, per_proc, factor, in_place=True):
    """One results[] entry: time = the mean of the per-iteration max over processes."""
    per_proc = np.asarray(per_proc, dtype=float)
    it = np.nanmax(per_proc, axis=0)
    t = float(np.nanmean(it))
    alg = size / t / 1e3
    body = '{"time":%s,"alg_bw":%s,"bus_bw":%s,"nwrong":0.000000}' % (lf(t), lf(alg), lf(alg * factor))
    per = ('{"skipped_iterations":0,"min_us":%s,"max_us":%s,"avg_us":%s,"p50_us":%s,"p95_us":%s,'
           '"p99_us":%s,"stdev_us":%s,"cv_pct":%s,"times_us":[%s],"per_process_max_times_us":[%s]}'
           % (lf(np.nanmin(it)), lf(np.nanmax(it)), lf(t), lf(t), lf(t), lf(t), lf(0), lf(0),
              ",".join(lf(x) for x in it),
              ",".join("[" + ",".join(lf(x) for x in r) + "]" for r in per_proc)))
    ip = ('"in_place":%s,"in_place_per_iter":%s' % (body, per)) if in_place else '"in_place":null'
    return ('{"size":%d,"count":%d,"type":"float","redop":"sum","root":"    -1",'
            '"out_of_place":%s,"out_of_place_per_iter":%s,%s,"actual_iterations":4,'
            '"experiment_name":""}' % (size, size // 4, body, per, ip))


P1 = [[10.0, 12.0, 11.0, 13.0], [11.5, 11.0, float("nan"), 12.5], [9.0, 14.0, 10.5, 12.0]]
P2 = [[20.0, 21.0, 22.0, 23.0], [20.5, 21.5, 22.5, 23.5], [19.0, 25.0, 21.0, 20.0]]


def test_per_process_times_fill_rank_and_iteration():
    # 3 processes x 1 GPU: all_reduce factor 2*2/3
    text = doc([result(1048576, P1, 4 / 3), result(2097152, P2, 4 / 3)])
    (ds,) = importers.read_text(text, "ar.json")
    assert list(ds["rank"].values) == [0, 1, 2] and ds.sizes["iteration"] == 4
    assert list(ds["host"].values) == ["node0", "node1", "node2"]
    assert "per_process_max_times_us" in ds.attrs["rank_meaning"]
    lat = ds["latency"].sel(size=1048576, placement="out_of_place").squeeze()
    assert math.isnan(float(lat.sel(rank=1, iteration=2)))          # "nan" as a string
    assert float(lat.sel(rank=2, iteration=1)) == 14.0
    # iteration time = max over processes: 11.5, 14, 11, 13 -> mean 12.375 us
    assert list(ds.ccb.iteration_time().sel(size=1048576, placement="in_place").squeeze().values) \
        == [11.5, 14.0, 11.0, 13.0]
    assert float(ds.ccb.time().sel(size=1048576, placement="in_place").squeeze()) == 12.375
    # 1048576 B / 12.375 us = 84.73341 GB/s algbw, x 4/3 = 112.97788
    assert float(ds.ccb.busbw().sel(size=1048576, placement="in_place").squeeze()) \
        == pytest.approx(112.977880, rel=1e-7)
    assert float(ds["reported_time"].sel(size=1048576, placement="in_place").squeeze()) == 12.375
    a = ds.attrs
    assert (a["nranks"], a["library"], a["created"]) == (3, "NCCL 2.28.9", "2026-01-02T03:04:05")
    assert list(ds["algorithm"].values) == ["nccl:*/ll"]
    assert json.loads(a["env"]) == {"NCCL_DEBUG": "WARN", "NCCL_PROTO": "LL"}   # no HOME
    assert a["reported_check"].startswith("ok: 8 printed")


def test_single_process_times_us_is_rank_minus_one():
    one = [[10.0, 11.0, 12.0, 13.0]]
    text = doc([result(1048576, one, 1.0)], ngpus=2, procs=1)
    (ds,) = importers.read_text(text, "ar.json")
    assert list(ds["rank"].values) == [-1] and ds.attrs["nranks"] == 2
    assert list(ds["latency"].sel(placement="out_of_place").squeeze().values) == one[0]


def test_null_in_place_and_nwrong():
    r = result(1048576, P1, 4 / 3, in_place=False).replace('"nwrong":0.000000', '"nwrong":null')
    (ds,) = importers.read_text(doc([r]), "ar.json")
    assert list(ds["placement"].values) == ["out_of_place"]     # trace-style: no in-place run
    assert int(ds["wrong"].sel(placement="out_of_place").squeeze()) == -1


def test_cycles_and_algorithms_in_json():
    # -N 2: the 1M/2M sweep twice; cycles follow each other along `iteration`
    text = doc([result(1048576, P1, 4 / 3), result(2097152, P2, 4 / 3),
                result(1048576, P2, 4 / 3), result(2097152, P1, 4 / 3)])
    (ds,) = importers.read_text(text, "ar.json")
    assert ds.attrs["cycles"] == 2 and ds.sizes["iteration"] == 8 and ds.sizes["cycle"] == 2
    assert list(ds["latency"].sel(size=1048576, placement="out_of_place", rank=0).squeeze().values) \
        == P1[0] + P2[0]


def test_broken_json():
    text = (DATA / "all_reduce_h200x2.json").read_text()
    cut = text[: text.index('"size": 262144')]
    with pytest.raises(ImporterError) as e:
        importers.read_text(cut, "cut.json")
    assert e.value.line == cut.count("\n") + 1 and "truncated" in e.value.expected
    no_time = text.replace('"time": 19.3281', '"tiem": 19.3281', 1)
    with pytest.raises(ImporterError, match=r"m.json:207: expected 'time' in results\[7\].out_of_place"):
        importers.read_text(no_time, "m.json")
    bad = text.replace('"size": 512', '"size": "big"', 1)
    with pytest.raises(ImporterError, match=r"b.json:\d+: expected a whole number for size"):
        importers.read_text(bad, "b.json")
    with pytest.raises(ImporterError, match="a 'results' list"):
        importers.read_text('{"version": 3, "nccl_version": 1, "results": 7}', "r.json")
