"""A kit run written as nccl-tests' JSON (``ccbench run --report-to-json-file
X --json-format nccl-tests``) imports back equal: sizes, counts, every
rank's every iteration, times and busbw.  Likewise nccom-test's JSON for
what it holds (sizes, times, busbw)."""
import importlib.util

import numpy as np
import pytest

from ccbench_kit import importers, load


def _exporter_exists():
    if importlib.util.find_spec("ccbench_kit.output") is None:
        return False
    from ccbench_kit.cli import build_parser
    try:
        build_parser().parse_args(["run", "all_reduce", "--json-format", "nccl-tests"])
    except SystemExit:
        return False
    return True


pytestmark = pytest.mark.skipif(not _exporter_exists(),
                                reason="ccbench run --json-format nccl-tests does not exist yet")


def test_kit_run_round_trips_through_nccl_tests_json(cli, tmp_path):
    out, js = tmp_path / "run.nc", tmp_path / "run.json"
    # 3 ranks, sizes that are not powers of two (1000 B -> 250 floats)
    p = cli("run", "all_reduce,all_gather", "-r", "3", "-b", "1000", "-e", "72000", "-f", "6",
            "-n", "6", "-w", "1", "--algorithms", "ring,mpi", "--out", out,
            "--per_iter_timing", "1",  # nccl-tests -I 1: the *_per_iter blocks carry every rank
            "--report-to-json-file", js, "--json-format", "nccl-tests", timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    runs = load(out)
    for name in ("all_reduce", "all_gather"):
        orig = runs[name].to_dataset()
        (back,) = importers.read(tmp_path / f"run.{name}.json").values()
        assert back.attrs["collective"] == name and back.attrs["nranks"] == 3
        assert (back.attrs["dtype"], back.attrs["op"]) == (orig.attrs["dtype"], orig.attrs["op"])
        assert list(back["algorithm"].values) == list(orig["algorithm"].values)
        assert np.array_equal(back["size"].values, orig["size"].values)
        assert np.array_equal(back["count"].values, orig["count"].values)
        assert list(back["rank"].values) == [0, 1, 2]
        assert np.allclose(back["latency"].values, orig["latency"].values, rtol=1e-12, atol=0)
        assert np.allclose(back.ccb.time().values, orig.ccb.time().values, rtol=1e-12)
        assert np.allclose(back.ccb.busbw().values, orig.ccb.busbw().values, rtol=1e-12)
        assert np.allclose(back["reported_busbw"].values, orig.ccb.busbw().values, rtol=1e-12)
        assert back.attrs["reported_check"].startswith("ok")

        from ccbench_kit.output import write_json
        (path,) = write_json(orig, tmp_path / f"{name}.nccom.json", "nccom-test")
        (nc,) = importers.read(path).values()
        oop = dict(placement="out_of_place")
        assert np.array_equal(nc["size"].values, orig["size"].values)
        assert np.allclose(nc["reported_time"].sel(oop).values, orig.ccb.time().sel(oop).values,
                           rtol=1e-12)
        assert np.allclose(nc.ccb.busbw().sel(oop).values, orig.ccb.busbw().sel(oop).values,
                           rtol=1e-12)
