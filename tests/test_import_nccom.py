"""nccom-test tables and JSON beyond the guide's samples: no command line,
collectives the file names, kit-written nccom JSON, broken input."""
from pathlib import Path

import pytest

from ccbench_kit import importers
from ccbench_kit.importers import ImporterError

DATA = Path(__file__).parent / "data" / "baselines"


def test_table_without_command_takes_hints():
    text = (DATA / "nccom_r64_allr_2nodes.txt").read_text().split("\n", 1)[1]
    # all_reduce busbw/algbw = 47.09/23.92 -> 2(p-1)/p with p = 64 exactly enough
    (ds,) = importers.read_text(text, "t.txt", collective="allr")
    assert (ds.attrs["collective"], ds.attrs["nranks"]) == ("all_reduce", 64)
    # 1073741824 B / 41806 us = 25.683917 GB/s -> busbw x 126/64 = 50.565211 GB/s
    assert float(ds.ccb.busbw().sel(size=1073741824).squeeze()) == pytest.approx(50.5652111)


def test_named_collective_the_kit_lacks_is_not_guessed():
    # "permute": factor 1 fits all_reduce on 2 ranks too; the name must win
    text = (DATA / "nccom_r8_permute.txt").read_text()
    try:
        (ds,) = importers.read_text(text, "p.txt")
    except ImporterError as e:           # until ccbench_kit.collectives has permute
        assert "permute" in str(e)
    else:
        assert ds.attrs["collective"] == "permute" and ds.attrs["nranks"] == 8
        # 33554432 / 894.24 us = 37.522848 GB/s, factor 1
        assert float(ds.ccb.busbw().squeeze()) == pytest.approx(37.5228485)


def test_truncated_and_broken_tables():
    text = (DATA / "nccom_r2_allr_fp32.txt").read_text()
    no_footer = text.rsplit("Avg bus", 1)[0]
    with pytest.raises(ImporterError) as e:
        importers.read_text(no_footer, "n.txt")
    assert e.value.line == 14 and "Avg bus bandwidth" in e.value.expected
    (ds,) = importers.read_text(no_footer, "n.txt", partial=True)
    assert ds.attrs["complete"] == "false" and ds.sizes["size"] == 11
    cut = text[: text.index("52.63")]
    with pytest.raises(ImporterError, match=r"c.txt:12: expected 6 columns .*truncated"):
        importers.read_text(cut, "c.txt")
    no_busbw = text.replace("busbw(GB/s)", "bus(GB/s)")
    with pytest.raises(ImporterError, match=r"h.txt:2: expected nccom-test columns .*missing busbw"):
        importers.read_text(no_busbw, "h.txt")
    bad = text.replace("  4750  ", "  47x0  ")
    with pytest.raises(ImporterError, match=r"b.txt:12: expected a number in the time\(us\) column"):
        importers.read_text(bad, "b.txt")


def test_json_errors():
    text = (DATA / "nccom_results.json").read_text()
    with pytest.raises(ImporterError, match=r"j.json:\d+: expected the rest of the JSON"):
        importers.read_text(text[:300], "j.json")
    bad = text.replace('"time:avg(us)": 8.18', '"time:avg(us)": [8.18]')
    with pytest.raises(ImporterError, match=r"j.json:25: expected a number for time:avg\(us\)"):
        importers.read_text(bad, "j.json", collective="all_gather", nranks=32)


def test_kit_written_nccom_json_round_trips(tmp_path):
    """The kit's own --report-to-json-file (nccom-test keys, a config, one row
    per size and algorithm) imports back with its algorithms as the dim."""
    doc = ('{"config": {"collective": "all_reduce", "nranks": 3, "group_size": 3, "type": "fp32",'
           ' "op": "sum", "root": -1, "iters": 20, "warmup_iters": 5, "placement": "out_of_place",'
           ' "algorithms": ["ring", "mpi"], "backend": "mpi"}, "results": ['
           '{"size(B)": 1024, "count(elems)": 256, "type": "fp32", "algbw(GB/s)": 0.1024,'
           ' "busbw(GB/s)": 0.13653333333333334, "time:avg(us)": 10.0, "algorithm": "ring"},'
           '{"size(B)": 1024, "count(elems)": 256, "type": "fp32", "algbw(GB/s)": 0.0512,'
           ' "busbw(GB/s)": 0.06826666666666667, "time:avg(us)": 20.0, "algorithm": "mpi"}]}')
    (ds,) = importers.read_text(doc, "kit.json")
    assert list(ds["algorithm"].values) == ["ring", "mpi"]
    assert (ds.attrs["collective"], ds.attrs["nranks"], ds.attrs["op"], ds.attrs["backend"]) == \
        ("all_reduce", 3, "sum", "mpi")
    assert float(ds.ccb.busbw().sel(algorithm="mpi").squeeze()) == pytest.approx(0.0682666667)
    assert ds.attrs["reported_check"].startswith("ok: 4 printed")


def test_progress_output_and_crlf():
    # without --non-interactive nccom-test draws a spinner, redrawn with \r
    text = (DATA / "nccom_r32_allg_io.txt").read_text()
    lines = text.split("\n")
    lines[1] = "\x1b[2K| running 1/4\r\x1b[2K/ running 2/4\r" + lines[1]
    (ds,) = importers.read_text("\r\n".join(lines), "spin.txt")
    assert ds.sizes["size"] == 4 and ds.attrs["nranks"] == 32


def test_show_prints_the_imported_percentiles(tmp_path):
    """`show -t p50 p99` of an nccom-test --stats table prints the numbers the
    file printed, not the mean repeated (the file kept no iterations)."""
    from conftest import run_cli
    out = tmp_path / "s.nc"
    assert run_cli("import", DATA / "nccom_r8_allg_stats.txt", "--out", out).returncode == 0
    proc = run_cli("show", out, "-t", "p50", "p99")
    assert proc.returncode == 0, proc.stderr
    rows = [l.split() for l in proc.stdout.splitlines() if l.split() and l.split()[0].isdigit()]
    # size, count (one rank's: 256 elements of 8 ranks' all_gather / 8), p50, p99
    assert [(r[0], r[1], r[6], r[7]) for r in rows] == [
        ("1024", "32", "10.00", "12.00"), ("8192", "256", "10.00", "12.00"),
        ("65536", "2048", "11.00", "13.00"), ("524288", "16384", "15.00", "17.00")]
    assert "the file's count(elems) is reported_count" in proc.stdout


def test_gib_table_is_labelled_converted_and_counts_mean_one_thing():
    """nccom-test's quick example prints 40.69 GiB/s; the kit's table shows
    43.69 GB/s and says so; the printed numbers stay in reported_*."""
    from ccbench_kit.formats.nccl_tests.write_table import format_table
    (ds,) = importers.read_text((DATA / "nccom_r2_allr_quick.txt").read_text(), "q.txt")
    assert float(ds["reported_busbw"].squeeze()) == 40.69
    assert ds["reported_busbw"].attrs["units"] == "GiB/s"
    lines = format_table(ds)
    assert lines[0].startswith("# converted: algbw/busbw below are GB/s (1e9 B/s) from size/time;"
                               " the file printed GiB/s (x1.0737 here)")
    assert "43.69" in lines[-2]
    # all_reduce: nccom-test's count(elems) and the kit's count agree
    assert int(ds["count"].squeeze()) == int(ds["reported_count"].squeeze()) == 33554432
    (allg,) = importers.read_text((DATA / "nccom_r32_allg_io.txt").read_text(), "g.txt")
    assert list(allg["reported_count"].values) == [256, 2048, 16384, 131072]
    assert list(allg["count"].values) == [8, 64, 512, 4096]  # per rank, of 32
