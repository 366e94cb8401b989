"""NCCL Inspector dumps in, and a production job compared with a run.

The samples in tests/data/inspector follow the Inspector's writer exactly
(README.md there says where each field comes from); expected values are
computed here by hand from the numbers written in make_samples.py.
"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ccbench_kit import importers
from ccbench_kit.compare import compare_parts
from ccbench_kit.importers import ImporterError

DATA = Path(__file__).parent / "data" / "inspector"
sys.path.insert(0, str(DATA))
import make_samples as sample  # noqa: E402

sys.path.remove(str(DATA))


@pytest.fixture(scope="module")
def parts():
    return importers.open_any(DATA)


def test_folder_gives_one_dataset_per_communicator_and_collective(parts):
    assert sorted(parts) == ["all_gather-0x7f8c496ae9f661", "all_reduce-0x7f8c496ae9f661",
                             "reduce_scatter-0xe62dedaa97644a"]
    ar = parts["all_reduce-0x7f8c496ae9f661"]
    assert ar.attrs["nranks"] == 3 and ar.attrs["nnodes"] == 2
    assert ar.attrs["comm_name"] == "DP Group 0"
    assert list(ar["rank"].values) == [0, 1, 2]
    assert list(ar["host"].values) == ["node-a", "node-a", "node-b"]
    assert list(ar["size"].values) == [8192, 65536, 1048576]
    assert ar.sizes["iteration"] == 6
    # latency[size, rank, iteration] is each rank's coll_exec_time_us, calls in coll_sn order
    want = np.array([sample._AR_US[m] for m in (8192, 65536, 1048576)], float)  # (S, it, R)
    got = ar["latency"].sel(algorithm="nccl", placement="out_of_place").values
    np.testing.assert_array_equal(got, want.transpose(0, 2, 1))
    assert ar["coll_sn"].values[0].tolist() == [1, 4, 7, 10, 13, 16]
    assert ar.attrs["reported_check"].startswith("ok: 108 printed bandwidths agree")
    assert json.loads(ar.attrs["timing_sources"]) == {"kernel_gpu": 54}
    assert json.loads(ar.attrs["skipped"]) == {"All2All records": 3, "p2p_perf records": 2}
    assert ar.attrs["complete"] == "true"


def test_size_follows_nccl_tests_convention(parts):
    # AllGather/ReduceScatter print the per-rank bytes; nccl-tests' size is the total
    ag = parts["all_gather-0x7f8c496ae9f661"]
    assert list(ag["size"].values) == [65536 * 3]
    assert list(ag["in_bytes"].values) == [65536] and list(ag["out_bytes"].values) == [65536 * 3]
    rs = parts["reduce_scatter-0xe62dedaa97644a"]
    assert rs.attrs["nranks"] == 2 and list(rs["size"].values) == [131072 * 2]
    assert list(rs["host"].values) == ["node-a", "node-b"]
    # busbw of the kit = the Inspector's own printed busbw of the slowest rank
    np.testing.assert_allclose(rs.ccb.busbw("min").values.ravel(),
                               262144 / 1e3 / min(max(c[2]) for c in sample.RS) * 0.5)
    assert float(rs["inspector_busbw"].max()) == pytest.approx(262144 / 1e3 / min(
        min(c[2]) for c in sample.RS) * 0.5, abs=5e-7)


def test_indented_readme_example_imports_as_one_rank_of_eight():
    parts = importers.open_any(DATA / "readme-verbose.json")
    (ds,) = parts.values()
    assert ds.attrs["collective"] == "reduce_scatter" and ds.attrs["nranks"] == 8
    assert list(ds["rank"].values) == [4] and int(ds["size"][0]) == 2147483648 * 8
    assert float(ds["latency"].squeeze()) == 41057
    assert ds.attrs["complete"] == "false"
    assert "records of 1 of the communicator's 8 ranks" in ds.attrs["incomplete_reason"]
    assert ds.attrs["reported_check"].startswith("ok: 2 printed")


def test_wrong_bandwidth_warns_and_truncated_record_names_the_line(tmp_path):
    lines = (DATA / "node-a-pid4102.log").read_text().splitlines()
    bad = lines[0].replace('"coll_busbw_gbs":0.248242', '"coll_busbw_gbs":0.300000')
    assert bad != lines[0]
    f = tmp_path / "h-pid1.log"
    f.write_text(bad + "\n")
    with pytest.warns(importers.ReportedMismatchWarning, match="MISMATCH: 1 of 1 records"):
        importers.open_any(f)
    f.write_text(lines[0] + "\n" + lines[1][:80] + "\n")
    with pytest.raises(ImporterError, match=r"h-pid1.log:2: expected the rest of the record"):
        importers.open_any(f)
    f.write_text(lines[0].replace('"coll_exec_time_us":44,', "") + "\n")
    with pytest.raises(ImporterError, match=r"h-pid1.log:1: expected coll_perf.coll_exec_time_us"):
        importers.open_any(f)


def test_compare_production_with_a_run_gives_a_ratio_per_size(parts, tmp_path, cli):
    """A 3-rank all_reduce run of the sizes the job used; ratio = job / run."""
    out = tmp_path / "bench.nc"
    cli("run", "all_reduce", "-r", 3, "-b", "8K", "-e", "1M", "-f", 8, "-n", 8, "-w", 2,
        "--algorithms", "mpi", "--out", out, timeout=240, check=True)
    bench = importers.open_any(out)
    results = compare_parts(parts, bench, placements=["out_of_place"])
    # only the 3-rank all_reduce has a counterpart (no all_gather/reduce_scatter ran)
    assert [(r, b) for r, b, _ in results] == [("all_reduce-0x7f8c496ae9f661", "all_reduce")]
    res = results[0][2]
    assert list(res["size"].values) == [8192, 65536]      # the sizes both have
    ar, run = parts["all_reduce-0x7f8c496ae9f661"], bench["all_reduce"]
    for size in (8192, 65536):
        job = ar["latency"].sel(size=size).max("rank").mean().item()
        mb = run["latency"].sel(size=size, placement="out_of_place").max("rank").mean().item()
        r = res.sel(size=size, placement="out_of_place").isel(algorithm=0)
        assert float(r["ratio"]) == pytest.approx(mb / job, rel=1e-12)
        assert r["method"].item() == "bootstrap"
        assert float(r["ratio_lo"]) <= float(r["ratio"]) <= float(r["ratio_hi"])
    # the CLI: the Inspector folder as the run, the ratio per size printed
    proc = cli("compare", out, DATA, "--csv", tmp_path / "cmp.csv", check=True)
    assert "[all_reduce-0x7f8c496ae9f661] vs" in proc.stdout
    assert "[reduce_scatter-0xe62dedaa97644a] has no counterpart" in proc.stdout
    import pandas as pd
    frame = pd.read_csv(tmp_path / "cmp.csv")
    assert sorted(frame["size"].unique()) == [8192, 65536]


def test_cli_import_writes_every_communicator(tmp_path, cli):
    files = sorted(str(p) for p in DATA.glob("*.log"))
    proc = cli("import", *files, "-o", tmp_path / "prod.nc", check=True)
    assert "# wrote 3 result sets" in proc.stdout
    assert "not imported: {\"p2p_perf records\": 2, \"All2All records\": 3}" in proc.stdout \
        or "not imported: {\"All2All records\": 3, \"p2p_perf records\": 2}" in proc.stdout
    back = importers.open_any(tmp_path / "prod.nc")
    assert sorted(back) == sorted(importers.open_any(DATA))


# -- records that disagree: refused, named -------------------------------------

COMM = {"id": "0xabc", "name": "g", "n": 2, "nnodes": 1}


def _dump(tmp_path, lines, name="h-pid1.log"):
    path = tmp_path / name
    path.write_text("".join(lines))
    return path


def _rec(rank, perf):
    return sample.record(COMM, rank, "h", 1 + rank, 0, "coll_perf", perf)


def test_zero_microsecond_record_is_refused_naming_its_line(tmp_path):
    path = _dump(tmp_path, [_rec(0, sample.coll("AllReduce", 1, 8192, 5, 2)),
                            _rec(0, sample.coll("AllReduce", 2, 8192, 0, 2))])
    with pytest.raises(ImporterError, match=r"h-pid1.log:2: .*positive coll_exec_time_us.*0"):
        importers.open_any(path)


def test_ranks_giving_one_call_different_sizes_are_refused(tmp_path):
    path = _dump(tmp_path, [_rec(0, sample.coll("AllReduce", 1, 8192, 5, 2)),
                            _rec(1, sample.coll("AllReduce", 1, 16384, 5, 2))])
    with pytest.raises(ImporterError, match=r":2: .*one size for coll_sn 1 .*rank 0 gives "
                                            r"8192 B at .*h-pid1.log:1.*rank 1: 16384 B"):
        importers.open_any(path)


def test_a_duplicated_record_counts_once_and_a_differing_one_is_refused(tmp_path):
    same = _rec(0, sample.coll("AllReduce", 1, 8192, 5, 2))
    ds = importers.open_any(_dump(tmp_path, [same, same, _rec(1, sample.coll(
        "AllReduce", 1, 8192, 6, 2))]))
    ds = next(iter(ds.values())) if isinstance(ds, dict) else ds
    assert ds.sizes["iteration"] == 1 and ds["latency"].values.ravel().tolist() == [5.0, 6.0]
    other = _rec(0, sample.coll("AllReduce", 1, 8192, 7, 2))
    with pytest.raises(ImporterError, match=r"x.log:2: .*rank 0 coll_sn 1 is also at .*x.log:1"):
        importers.open_any(_dump(tmp_path, [same, other], "x.log"))


def test_nan_bandwidths_do_not_pass_the_reported_check(tmp_path):
    perf = sample.coll("AllReduce", 1, 8192, 5, 2)
    perf = perf.split('"coll_algobw_gbs"')[0] + '"coll_algobw_gbs":"nan","coll_busbw_gbs":"nan"}'
    with pytest.warns(Warning):
        ds = importers.open_any(_dump(tmp_path, [_rec(0, perf)]))
    ds = next(iter(ds.values())) if isinstance(ds, dict) else ds
    assert ds.attrs["reported_check"].startswith("MISMATCH: 1 of 1 records")


def test_unknown_collective_is_one_line(tmp_path):
    path = _dump(tmp_path, [_rec(0, sample.coll("AllReduce", 1, 8192, 5, 2)
                                 .replace("AllReduce", "Frobnicate"))])
    with pytest.raises(ImporterError, match="Frobnicate"):
        importers.open_any(path)


def test_a_folder_is_streamed_and_reads_as_the_same_text_does(tmp_path):
    # a folder's files are read a line at a time (Source text None); an
    # indented record over many lines and a truncated one read as they do
    # from the whole text
    (tmp_path / "r-pid1.log").write_text((DATA / "readme-verbose.json").read_text())
    (streamed,) = importers.open_any(tmp_path).values()
    (whole,) = importers.open_any(DATA / "readme-verbose.json").values()
    for ds in (streamed, whole):
        ds.attrs.pop("imported"), ds.attrs.pop("source")
    assert streamed.identical(whole)
    text = (DATA / "node-a-pid4101.log").read_text()
    (tmp_path / "r-pid1.log").write_text(text + text.splitlines()[1][:90])
    n = text.count("\n") + 1
    with pytest.raises(ImporterError, match=rf"r-pid1.log:{n}: expected the rest of the record"):
        importers.open_any(tmp_path)


def test_the_first_conflict_in_reading_order_is_named_across_files(tmp_path):
    # conflicts are found once every record is read: still the one a reader
    # checking each record on arrival meets first (b's line 2 before c's)
    ok = [_rec(0, sample.coll("AllReduce", sn, 8192, 5, 2)) for sn in (1, 2)]
    _dump(tmp_path, ok, "a-pid1.log")
    _dump(tmp_path, [ok[0], _rec(0, sample.coll("AllReduce", 2, 8192, 9, 2))], "b-pid2.log")
    _dump(tmp_path, [_rec(1, sample.coll("AllReduce", 1, 16384, 5, 2))], "c-pid3.log")
    with pytest.raises(ImporterError, match=r"b-pid2.log:2: .*rank 0 coll_sn 2 is also at "
                                            r".*a-pid1.log:2 with other values.*size 8192 time 9"):
        importers.open_any(tmp_path)
    (tmp_path / "b-pid2.log").unlink()
    with pytest.raises(ImporterError, match=r"c-pid3.log:1: .*one size for coll_sn 1 of "
                                            r"communicator 0xabc .*rank 0 gives 8192 B"):
        importers.open_any(tmp_path)


def test_a_progress_line_for_a_large_file_only(capsys):
    from ccbench_kit.formats.nccl_inspector.read_json import _Progress
    small, large = _Progress("s.log", 1 << 20), _Progress("l.log", 1 << 30)
    small.tell(1 << 19)
    large.tell(1 << 29)
    assert capsys.readouterr().err == ""        # not before a few seconds have passed
    large.next = 0.0                            # as if they had
    small.tell(1 << 19)                         # a small file: never
    large.tell(1 << 29)
    assert capsys.readouterr().err == "importing l.log: 512 of 1024 MB\n"
