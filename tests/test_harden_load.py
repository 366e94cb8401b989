"""Every results file is checked for times that are no times (issue 28):
the lazy path (``ccb.load(path, chunks=...)``) refuses a negative, zero or
infinite latency as the eager path does, naming the file, the count and
the first offending place, without loading the file into memory; missing
times (NaN, also all of them) load on both paths alike."""
import numpy as np
import pytest

import ccbench_kit as ccb
from ccbench_kit.dataset.schema import make_dataset
from ccbench_kit.dataset.versions import SchemaError

pytest.importorskip("dask")

CHUNKS = [None, {}, "auto", {"iteration": 3}]


def _saved(path, fill):
    sizes = [8, 64, 512]
    lat = np.full((2, 1, 3, 2, 6), 5.0)
    fill(lat)
    ccb.save(make_dataset(
        algorithms=["ring", "mpi"], placements=["out_of_place"], sizes=sizes,
        counts=[s // 4 for s in sizes], in_bytes=sizes, out_bytes=sizes, latency=lat,
        wrong=np.zeros((2, 1, 3), np.int64), ranks=[0, 1], hosts=["a", "b"],
        devices=["cpu", "cpu"], attrs={"collective": "all_reduce", "dtype": "fp32",
                                       "nranks": 2}), path)
    return path


@pytest.mark.filterwarnings("ignore:The specified chunks separate the stored chunks")
@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize("value", [-2.5, 0.0, np.inf, -np.inf])
def test_a_bad_time_is_refused_lazily_as_eagerly(tmp_path, chunks, value):
    def fill(lat):
        lat[1, 0, 2, 1, 4] = value
        lat[1, 0, 2, 0, 5] = value
    path = _saved(tmp_path / "r.nc", fill)
    with pytest.raises(SchemaError) as e:
        ccb.load(path, chunks=chunks)
    msg = str(e.value)
    assert str(path) in msg and "'latency' holds 2 value(s)" in msg
    # the first one, named by its coordinates (algorithm, placement, size, rank)
    assert f"first: {value:g} at algorithm mpi, placement out_of_place, size 512, rank 0" in msg


@pytest.mark.filterwarnings("ignore:The specified chunks separate the stored chunks")
@pytest.mark.parametrize("chunks", CHUNKS)
def test_missing_times_load_alike_and_stay_lazy(tmp_path, chunks):
    def fill(lat):
        lat[0] = np.nan           # every time of one algorithm missing
        lat[1, 0, 1] = np.nan     # and one size of the other
    path = _saved(tmp_path / "r.nc", fill)
    ds = ccb.load(path, chunks=chunks)
    assert (ds["latency"].chunks is None) == (chunks is None)   # checked, not loaded
    lat = np.asarray(ds["latency"].values)
    assert np.isnan(lat[0]).all() and np.isnan(lat[1, 0, 1]).all()
    assert (lat[1, 0, [0, 2]] == 5.0).all()


def test_all_nan_file_loads_lazily_and_the_cli_gate_refuses_it(tmp_path, capsys):
    from ccbench_kit.cli import main
    path = _saved(tmp_path / "r.nc", lambda lat: lat.fill(np.nan))
    assert np.isnan(ccb.load(path, chunks={})["latency"].values).all()
    rc = main(["compare", str(path), str(path), "--min-ratio", "0.9"])
    out, err = capsys.readouterr()
    assert rc in (1, 2) and "Traceback" not in err
    assert "PASSED" not in out


def test_show_of_an_unknown_collective_names_the_file_and_the_attr(tmp_path, capsys):
    from ccbench_kit.cli import main
    path = tmp_path / "r.nc"
    sizes = [8]
    ccb.save(make_dataset(
        algorithms=["ring"], placements=["out_of_place"], sizes=sizes, counts=[2],
        in_bytes=sizes, out_bytes=sizes, latency=np.full((1, 1, 1, 2, 2), 5.0),
        wrong=np.zeros((1, 1, 1), np.int64), ranks=[0, 1], hosts=["a", "b"],
        devices=["cpu", "cpu"], attrs={"collective": "x/../y", "dtype": "fp32", "nranks": 2}),
        path)
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ccbench: error: {path}: attr collective: unknown collective 'x/../y'")
    assert len(err.strip().splitlines()) == 1


def test_a_bad_time_under_an_unprintable_name_is_still_one_line(tmp_path):
    path = tmp_path / "r.nc"
    ccb.save(make_dataset(
        algorithms=["0\x1e x\ny"], placements=["out_of_place"], sizes=[8], counts=[2],
        in_bytes=[8], out_bytes=[8], latency=np.full((1, 1, 1, 2, 2), -1.0),
        wrong=np.zeros((1, 1, 1), np.int64), ranks=[0, 1], hosts=["a", "b"],
        devices=["cpu", "cpu"], attrs={"collective": "all_reduce", "dtype": "fp32",
                                       "nranks": 2}), path)
    with pytest.raises(SchemaError) as e:
        ccb.load(path)
    assert len(str(e.value).splitlines()) == 1
    assert "algorithm '0\\x1e x\\ny', placement out_of_place" in str(e.value)
