"""JSON outputs: nccom-test's keys, and nccl-tests' v3 format key for key, read
back by nccl-tests' own tools/analyze_perf_json.py (from a checkout named by
CCB_NCCL_TESTS_DIR)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ccbench_kit as ccb
from ccbench_kit import importers
from ccbench_kit.dataset.schema import make_dataset
from ccbench_kit.harness import group_coords
from ccbench_kit.output import json_paths, write_json
from ccbench_kit.formats.nccl_tests.write_json import iter_stats
from conftest import run_cli

FIXTURES = Path(__file__).parent / "data" / "baselines"  # nccl-tests logs (data/baselines/README.md)
# nccl-tests' own tools/analyze_perf_json.py reads our JSON; its code is not
# ours to ship, so point CCB_NCCL_TESTS_DIR at a nccl-tests checkout to run it.
ANALYZE = Path(os.environ.get("CCB_NCCL_TESTS_DIR", "/nonexistent")) / "tools" / "analyze_perf_json.py"


def synthetic(collective="all_reduce", nranks=4, groups=None, placements=("out_of_place", "in_place"),
              wrong=0, seed=1):
    rng = np.random.default_rng(seed)
    algs, sizes = ["ring", "mpi"], [8, 1024, 1 << 20]
    lat = rng.uniform(5, 50, size=(len(algs), len(placements), len(sizes), nranks, 7))
    lat[..., 3] *= 4  # a spike at iteration 3
    attrs = {"collective": collective, "dtype": "fp32", "op": "sum", "root": -1,
             "nranks": nranks, "backend": "mpi", "library": "Open MPI v4.1.4", "timing": "host-clock",
             "warmup": 5, "iters": 7, "agg_iters": 1, "blocking": False, "check": "random",
             "created": "2026-11-22T06:00:00+00:00", "command": "ccbench run allr -r 4 -b 8 -e 1M -f 2",
             "env": {"OMPI_MCA_x": "1"},
             "config": {"sizes": [8 << k for k in range(18)]}}
    if groups:
        attrs["groups"], attrs["group_size"] = groups, len(groups[0])
    return make_dataset(
        algorithms=algs, placements=list(placements), sizes=sizes,
        counts=[s // 4 for s in sizes], in_bytes=sizes, out_bytes=sizes, latency=lat,
        start=np.cumsum(lat, axis=-1),
        wrong=np.full((len(algs), len(placements), len(sizes)), wrong),
        ranks=range(nranks), hosts=["a", "a", "b", "b"][:nranks], devices=["cpu"] * nranks,
        attrs=attrs, extra_coords=group_coords(groups, nranks))


def _keys(obj):
    return list(obj.keys())


def test_nccl_tests_json_has_the_fixture_layout(tmp_path):
    fixture = json.loads((FIXTURES / "all_reduce_h200x2.json").read_text())
    [path] = write_json(synthetic(), tmp_path / "x.json", "nccl-tests")
    ours = json.loads(Path(path).read_text())
    assert _keys(ours) == _keys(fixture)
    assert ours["version"] == 3
    # config: the fixture's keys in its order (it steps by factor, as our sweep does)
    assert _keys(ours["config"]) == _keys(fixture["config"])
    assert _keys(ours["config"]["devices"][0]) == _keys(fixture["config"]["devices"][0])
    assert ours["config"]["step_factor"] == 2 and ours["config"]["minimum_bytes"] == 8
    assert ours["config"]["maximum_bytes"] == 1 << 20
    assert ours["config"]["blocking_collectives"] == "false"
    assert ours["config"]["per_iter_timing"] == "true"
    # results: the fixture's keys, plus the -I 1 blocks right after each placement
    r0, f0 = ours["results"][0], fixture["results"][0]
    assert _keys(r0) == ["size", "count", "type", "redop", "root", "out_of_place",
                         "out_of_place_per_iter", "in_place", "in_place_per_iter",
                         "actual_iterations", "experiment_name"]
    assert [k for k in _keys(r0) if not k.endswith("_per_iter")] == _keys(f0)
    assert _keys(r0["out_of_place"]) == _keys(f0["out_of_place"])
    assert r0["type"] == f0["type"] == "float" and r0["root"] == f0["root"] == "    -1"
    assert r0["redop"] == "sum" and r0["out_of_place"]["nwrong"] == 0.0
    assert _keys(r0["out_of_place_per_iter"]) == [
        "skipped_iterations", "min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us",
        "stdev_us", "cv_pct", "times_us", "per_process_max_times_us"]
    assert ours["out_of_bounds"] == {"count": 0, "okay": "true"}
    assert ours["average_bus_bandwidth"]["okay"] == "unchecked"
    assert ours["args"][:3] == ["ccbench", "run", "allr"] and ours["env"] == ["OMPI_MCA_x=1"]


def test_nccl_tests_json_holds_the_dataset_exactly(tmp_path):
    """What an importer needs to rebuild the run: sizes, times, busbw, every rank's
    iterations, and the algorithm in experiment_name."""
    ds = synthetic(groups=[[0, 2], [1, 3]])
    [path] = write_json(ds, tmp_path / "x.json", "nccl-tests")
    doc = json.loads(Path(path).read_text())
    assert [(r["size"], r["experiment_name"]) for r in doc["results"]] == \
        [(s, a) for s in (8, 1024, 1 << 20) for a in ("ring", "mpi")]
    assert [d["group"] for d in doc["config"]["devices"]] == [0, 1, 0, 1]
    assert [d["hostname"] for d in doc["config"]["devices"]] == ["a", "a", "b", "b"]
    assert [d["device"] for d in doc["config"]["devices"]] == [0, 1, 0, 1]  # local rank
    time, busbw = ds.ccb.time(), ds.ccb.busbw()
    for r in doc["results"]:
        for p in ("out_of_place", "in_place"):
            sel = dict(algorithm=r["experiment_name"], placement=p, size=r["size"])
            assert r[p]["time"] == float(time.sel(sel))
            assert r[p]["bus_bw"] == float(busbw.sel(sel))
            # busbw per group: all_reduce on groups of 2 has factor 1
            assert r[p]["bus_bw"] == pytest.approx(r[p]["alg_bw"])
            rows = np.array(r[f"{p}_per_iter"]["per_process_max_times_us"])
            np.testing.assert_array_equal(rows, ds["latency"].sel(sel).values)
            np.testing.assert_array_equal(r[f"{p}_per_iter"]["times_us"], rows.max(axis=0))
            assert r[p]["time"] == pytest.approx(np.mean(rows.max(axis=0)), rel=1e-12)


def test_iteration_stats_follow_nccl_tests():
    # computeIterStats: p50 = sorted[n/2], pNN = sorted[min(n-1, ceil(n*NN/100)-1)]
    t = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 6.0]
    s = iter_stats(t)
    assert (s["min"], s["max"], s["p50"], s["p95"], s["p99"]) == (1.0, 10.0, 4.0, 10.0, 10.0)
    assert s["avg"] == pytest.approx(31 / 7)
    assert s["stdev"] == pytest.approx(np.std(t)) and s["cv_pct"] == pytest.approx(np.std(t) / (31 / 7) * 100)
    s = iter_stats(np.arange(1, 101, dtype=float))
    assert (s["p50"], s["p95"], s["p99"]) == (51.0, 95.0, 99.0)


@pytest.mark.skipif(not ANALYZE.exists(), reason="set CCB_NCCL_TESTS_DIR to a nccl-tests "
                    "checkout to run its tools/analyze_perf_json.py on our JSON")
def test_nccl_tests_own_analyzer_reads_ours(tmp_path):
    [path] = write_json(synthetic(), tmp_path / "x.json", "nccl-tests")
    for extra in ([], ["--in-place"]):
        proc = subprocess.run([sys.executable, str(ANALYZE), path, "--all", *extra],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "Consistency (times_us == max over process rows" in proc.stdout
        assert ": PASS" in proc.stdout
        assert "Process rows: 4" in proc.stdout
        assert "iter  3:" in proc.stdout  # the spike we put at iteration 3 is found
        assert "PER-NODE ANALYSIS (2 nodes" in proc.stdout


def test_missing_placement_and_unchecked_and_nan(tmp_path):
    ds = synthetic(placements=("in_place",), wrong=-1)
    ds["latency"][0, 0, 0, 0, 0] = np.nan
    [path] = write_json(ds, tmp_path / "x.json", "nccl-tests")
    text = Path(path).read_text()
    doc = json.loads(text)  # valid JSON: NaN is written "nan", as nccl-tests does
    r = doc["results"][0]
    assert r["out_of_place"] is None and "out_of_place_per_iter" not in r
    assert r["in_place"]["nwrong"] is None
    assert r["in_place_per_iter"]["per_process_max_times_us"][0][0] == "nan"
    assert "NaN" not in text


def test_nccom_test_json_keys_and_values(tmp_path):
    ds = synthetic(collective="all_gather", nranks=4)
    [path] = write_json(ds, tmp_path / "n.json", "nccom-test", stats=["avg", "p50", "p99"])
    doc = json.loads(Path(path).read_text())
    row = doc["results"][0]
    assert _keys(row) == ["size(B)", "count(elems)", "type", "algbw(GB/s)", "busbw(GB/s)",
                          "time:avg(us)", "time:p50(us)", "time:p99(us)", "algorithm"]
    t = float(ds.ccb.time("avg").sel(algorithm="ring", placement="out_of_place", size=8))
    assert row["time:avg(us)"] == t and row["size(B)"] == 8 and row["type"] == "fp32"
    # the guide's units: GiB/s (2^30 B/s); its count: the elements of size(B)
    assert row["algbw(GB/s)"] == pytest.approx(8 / (t * 1e-6) / 2**30)
    assert row["busbw(GB/s)"] == pytest.approx(8 / (t * 1e-6) / 2**30 * 3 / 4)
    assert row["count(elems)"] == 2
    assert doc["config"]["placement"] == "out_of_place" and doc["config"]["group_size"] == 4
    # one algorithm: no algorithm key unless asked, io sizes on request
    one = ds.sel(algorithm=["mpi"])
    [path] = write_json(one, tmp_path / "m.json", "nccom-test")
    assert _keys(json.loads(Path(path).read_text())["results"][0]) == [
        "size(B)", "count(elems)", "type", "algbw(GB/s)", "busbw(GB/s)", "time:avg(us)"]
    [path] = write_json(one, tmp_path / "m.json", "nccom-test", show_algorithm=True, show_io=True)
    row = json.loads(Path(path).read_text())["results"][1]
    assert _keys(row) == ["size(B)", "count(elems)", "total_input_size(B)",
                          "total_output_size(B)", "type", "algbw(GB/s)", "busbw(GB/s)",
                          "time:avg(us)", "algorithm"]
    assert row["total_input_size(B)"] == 1024 and row["algorithm"] == "mpi"


def test_one_file_per_collective():
    assert json_paths("r.json", ["all_reduce"]) == {"all_reduce": "r.json"}
    assert json_paths("out/r.json", ["all_reduce", "all_gather"]) == \
        {"all_reduce": "out/r.all_reduce.json", "all_gather": "out/r.all_gather.json"}
    assert json_paths("r", ["a", "b"]) == {"a": "r.a.json", "b": "r.b.json"}


def test_cli_writes_json_and_io_columns(tmp_path):
    out, js = tmp_path / "r.nc", tmp_path / "r.json"
    proc = run_cli("run", "all_gather", "-r", 3, "-b", 96, "-e", 384, "-f", 4, "-n", 4, "-w", 1,
                   "--algorithms", "ring,mpi", "-t", "avg", "p50", "--show-input-output-size",
                   "--show-algorithm", "--report-to-json-file", js, "--out", out, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert f"# json (nccom-test): {js}" in proc.stdout
    head = next(l for l in proc.stdout.splitlines() if l.startswith("#") and "in_size" in l)
    assert head.split()[1:5] == ["size", "count", "in_size", "out_size"]
    rows = [l.split() for l in proc.stdout.splitlines() if l.strip() and l.split()[0].isdigit()]
    # all_gather of 96 B on 3 ranks: 8 fp32 per rank, 32 B in, 96 B out
    assert rows[0][:4] == ["96", "8", "32", "96"] and rows[0][7] == "ring"
    ds = ccb.load(out)
    doc = json.loads(js.read_text())
    assert [(r["size(B)"], r["algorithm"]) for r in doc["results"]] == \
        [(96, "ring"), (96, "mpi"), (384, "ring"), (384, "mpi")]
    for r in doc["results"]:
        sel = dict(algorithm=r["algorithm"], placement="out_of_place", size=r["size(B)"])
        assert r["time:avg(us)"] == float(ds.ccb.time("avg").sel(sel))
        assert r["time:p50(us)"] == float(ds.ccb.time("p50").sel(sel))
        assert r["busbw(GB/s)"] == pytest.approx(float(ds.ccb.busbw("avg").sel(sel)) * 1e9 / 2**30,
                                                 rel=1e-12)
        assert r["total_input_size(B)"] * 3 == r["total_output_size(B)"] == r["size(B)"]
    # round trip: the kit's importer and a parser written from the guide alone agree
    (back,) = importers.read_text(js.read_text(), str(js))
    guide = guide_parse(doc, nranks=3, collective="all_gather")
    for r, (busbw_gib, count) in zip(doc["results"], guide):
        sel = dict(algorithm=r["algorithm"], placement="out_of_place", size=r["size(B)"])
        assert busbw_gib == pytest.approx(float(back["reported_busbw"].sel(sel)), rel=1e-12)
        assert busbw_gib == pytest.approx(float(back.ccb.busbw().sel(sel)) * 1e9 / 2**30, rel=1e-9)
        assert count == int(back["reported_count"].sel(size=r["size(B)"]))
        # the count coordinate means one rank's call count whatever the source
        assert int(back["count"].sel(size=r["size(B)"])) == int(ds["count"].sel(size=r["size(B)"]))
    assert back["reported_busbw"].attrs["units"] == "GiB/s"
    assert list(back["count"].values) == [8, 32]  # 96 B and 384 B of fp32 on 3 ranks


def guide_parse(doc, nranks, collective):
    """(busbw in GiB/s, count) per row, from nccom-test's guide alone: algbw =
    size(B) / time in GiB/s (1 GiB = 1,073,741,824 B); busbw = algbw x
    (r-1)/r for all_gather; count(elems) = the elements of size(B)."""
    itemsize = {"fp32": 4, "fp16": 2, "bf16": 2, "uint8": 1, "int8": 1}
    factor = {"all_gather": (nranks - 1) / nranks, "all_reduce": 2 * (nranks - 1) / nranks}
    out = []
    for r in doc["results"]:
        algbw = r["size(B)"] / (r["time:avg(us)"] * 1e-6) / 1_073_741_824
        assert algbw == pytest.approx(r["algbw(GB/s)"], rel=1e-12)
        out.append((algbw * factor[collective], r["size(B)"] // itemsize[r["type"]]))
    return out
