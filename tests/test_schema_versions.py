"""The results schema's version history: files of every old version load
through the one upgrade path, value by value; a newer file, a foreign one or
one lacking required variables gives one line; new files round-trip.

``data/schema/v1_round1_groups.nc`` was written by the kit of round 1 (schema
``ccbench/1``, before versioning): ``ccbench run all_reduce -r 4 -b 8 -e 64
-f 8 -n 3 -w 1 --algorithms ring,mpi --custom-replica-group`` with groups
[[0, 2], [1, 3]].  The DESIGN-era file (the original contract, none of round
1's additions) is written here from code.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import ccbench_kit as ccb
from ccbench_kit import importers
from ccbench_kit.cli import main
from ccbench_kit.dataset import HISTORY, SCHEMA, SchemaError, make_dataset, open_parts, save
from ccbench_kit.dataset.schema import REQUIRED_ATTRS

DATA = Path(__file__).parent / "data" / "schema"
DOCS = Path(__file__).parent.parent / "docs"

V1_ATTRS = {  # the original contract's attrs, as a v1 kit wrote them (netCDF-safe)
    "schema": "ccbench/1", "collective": "all_reduce", "dtype": "fp32", "op": "sum",
    "root": -1, "nranks": 3, "backend": "mpi", "library": "Open MPI v4.1.4", "timing": "host-clock",
    "warmup": 2, "iters": 4, "kit_version": "0.0.9", "created": "2025-06-01T10:00:00+00:00",
    "command": "ccbench run all_reduce -r 3", "hosts": '["node-a"]', "env": "{}", "source": "",
}


def v1_design(collective="all_reduce", sizes=(12, 96, 768)):
    """A Dataset of the original contract: nothing of round 1."""
    A, P, S, R, I = 2, 2, len(sizes), 3, 4
    latency = 1.0 + np.arange(A * P * S * R * I, dtype=float).reshape(A, P, S, R, I) / 7
    return xr.Dataset(
        {"latency": (("algorithm", "placement", "size", "rank", "iteration"), latency),
         "start": (("algorithm", "placement", "size", "rank", "iteration"), latency * 3),
         "wrong": (("algorithm", "placement", "size"),
                   np.array([-1, 0, 2] * (A * P), dtype=np.int64)[:A * P * S].reshape(A, P, S))},
        coords={"algorithm": ["ring", "mpi"], "placement": ["out_of_place", "in_place"],
                "size": np.array(sizes, dtype=np.int64),
                "count": ("size", np.array(sizes, dtype=np.int64) // 4),
                "in_bytes": ("size", np.array(sizes, dtype=np.int64)),
                "out_bytes": ("size", np.array(sizes, dtype=np.int64)),
                "rank": np.arange(R), "host": ("rank", ["node-a"] * R),
                "device": ("rank", ["cpu"] * R), "iteration": np.arange(I)},
        attrs=dict(V1_ATTRS, collective=collective))


def write_v1(path, parts):
    """A v1 file as v1's `save` laid it out: the first in the root group."""
    names = list(parts)
    first = parts[names[0]].copy()
    first.attrs["collectives"] = json.dumps(names)
    first.to_netcdf(path, engine="h5netcdf", mode="w")
    for name in names[1:]:
        parts[name].to_netcdf(path, engine="h5netcdf", mode="a", group=name)
    return path


def cli_error(argv, capsys):
    """(exit status, stderr) of the in-process CLI."""
    rc = main(argv)
    return rc, capsys.readouterr().err


def test_the_history_is_a_chain_ending_in_what_is_written():
    assert [v.number for v in HISTORY] == list(range(1, len(HISTORY) + 1))
    assert SCHEMA == HISTORY[-1].schema == "ccbench/3"
    assert HISTORY[0].upgrade is None and all(v.upgrade for v in HISTORY[1:])
    names = [a.name for v in HISTORY for a in v.added]
    assert len(names) == len(set(names))          # each addition recorded once
    ds = make_dataset(algorithms=["ring"], placements=["in_place"], sizes=[8], counts=[2],
                      in_bytes=[8], out_bytes=[8], latency=np.ones((1, 1, 1, 3, 2)),
                      wrong=[[[0]]], ranks=range(3), hosts=["h"] * 3, devices=["cpu"] * 3,
                      attrs={"collective": "all_reduce"})
    # every addition with a default is written by every writer of the version
    assert (ds.attrs["schema"], ds.attrs["complete"], ds.attrs["group_size"], ds.attrs["kind"]) \
        == (SCHEMA, "true", 3, "sweep")
    assert set(REQUIRED_ATTRS) <= set(ds.attrs)


def test_a_design_era_file_loads_upgraded_value_by_value(tmp_path):
    old = v1_design()
    path = write_v1(tmp_path / "v1.nc", {"all_reduce": old})
    ds = ccb.load(path)
    assert ds.attrs["schema"] == "ccbench/3" and ds.attrs["schema_upgraded_from"] == "ccbench/1"
    # what versions 2 and 3 added, filled with their defaults
    assert ds.attrs["complete"] == "true" and ds.attrs["group_size"] == 3
    assert ds.attrs["kind"] == "sweep"
    # everything the file had, unchanged
    for name in ("latency", "start", "wrong"):
        np.testing.assert_array_equal(ds[name].values, old[name].values)
    for name in old.coords:
        np.testing.assert_array_equal(ds[name].values, old[name].values)
    for key, value in V1_ATTRS.items():
        if key != "schema":
            assert ds.attrs[key] == value, key
    assert set(ds.attrs) - set(V1_ATTRS) == {"complete", "group_size", "kind",
                                                   "schema_upgraded_from"}
    # the analysis works on the upgraded Dataset: busbw of ring out-of-place at 96 B
    t = old["latency"].sel(algorithm="ring", placement="out_of_place", size=96).max("rank").mean()
    assert float(ds.ccb.busbw().sel(algorithm="ring", placement="out_of_place", size=96)) == \
        pytest.approx(96 / (float(t) * 1e3) * 2 * 2 / 3)


def test_a_version_2_file_loads_upgraded_value_by_value(tmp_path):
    old = v1_design()
    old.attrs.update(schema="ccbench/2", complete="false", group_size=3,
                     incomplete_reason="interrupted")
    path = write_v1(tmp_path / "v2.nc", {"all_reduce": old})
    ds = ccb.load(path)
    assert (ds.attrs["schema"], ds.attrs["schema_upgraded_from"], ds.attrs["kind"]) == \
        ("ccbench/3", "ccbench/2", "sweep")
    assert set(ds.attrs) - set(old.attrs) == {"kind", "schema_upgraded_from"}
    assert all(ds.attrs[k] == v for k, v in old.attrs.items() if k != "schema")
    for name in ("latency", "start", "wrong"):
        np.testing.assert_array_equal(ds[name].values, old[name].values)


def test_every_reader_goes_through_the_upgrade(tmp_path):
    path = write_v1(tmp_path / "two.nc", {"all_reduce": v1_design(),
                                          "all_gather": v1_design("all_gather", (24, 48))})
    tree = ccb.load(path)
    assert isinstance(tree, xr.DataTree)
    for parts in (open_parts(path), open_parts(path, chunks={}), importers.open_any(path)):
        assert {n: d.attrs["schema"] for n, d in parts.items()} == \
            {"all_reduce": SCHEMA, "all_gather": SCHEMA}
        assert parts["all_gather"].attrs["group_size"] == 3
    xds = xr.open_dataset(path, engine="ccbench", group="all_gather")
    assert xds.attrs["schema_upgraded_from"] == "ccbench/1"
    np.testing.assert_array_equal(xds["size"].values, [24, 48])


def test_a_round1_file_keeps_what_it_already_had():
    path = DATA / "v1_round1_groups.nc"
    raw = xr.open_dataset(path, engine="h5netcdf")
    assert raw.attrs["schema"] == "ccbench/1" and raw.attrs["group_size"] == 2
    ds = ccb.load(path)
    assert ds.attrs["schema"] == SCHEMA and ds.attrs["schema_upgraded_from"] == "ccbench/1"
    # round 1 wrote version 2's group_size already: 2 (the groups), not nranks 4
    assert (ds.attrs["group_size"], ds.attrs["nranks"], ds.ccb.nranks) == (2, 4, 2)
    for key, value in raw.attrs.items():
        if key not in ("schema", "collectives"):
            assert ds.attrs[key] == value, key
    assert ds["group"].values.tolist() == [0, 1, 0, 1]
    assert ds["group_rank"].values.tolist() == [0, 0, 1, 1]
    np.testing.assert_array_equal(ds["latency"].values, raw["latency"].values)


def test_a_newer_version_is_one_line_naming_file_and_versions(tmp_path, capsys):
    ds = v1_design()
    ds.attrs.update(schema="ccbench/4", complete="true", group_size=3, kind="sweep")
    path = write_v1(tmp_path / "v4.nc", {"all_reduce": ds})
    message = (f"{path}: schema ccbench/4 is newer than this kit reads (newest ccbench/3); "
               "update ccbench_kit to read it")
    with pytest.raises(SchemaError) as err:
        ccb.load(path)
    assert str(err.value) == message
    for argv in (["show", str(path)], ["import", str(path)],
                 ["compare", str(path), str(path)],
                 ["export", str(path), "--csv", str(tmp_path / "x.csv")]):
        rc, stderr = cli_error(argv, capsys)
        assert (rc, stderr) == (2, f"ccbench: error: {message}\n"), argv
    with pytest.raises(SchemaError, match="newer than this kit"):
        xr.open_dataset(path, engine="ccbench")
    rc, stderr = cli_error(["report", str(path), "-o", str(tmp_path / "r.html")], capsys)
    assert (rc, stderr) == (2, f"ccbench: error: results: {message}\n")
    assert not (tmp_path / "r.html").exists()


def test_a_newer_group_is_named(tmp_path):
    newer = v1_design("all_gather", (24,))
    newer.attrs["schema"] = "ccbench/7"
    path = write_v1(tmp_path / "mixed.nc", {"all_reduce": v1_design(), "all_gather": newer})
    with pytest.raises(SchemaError) as err:
        ccb.load(path)
    assert str(err.value) == (f"{path} (group all_gather): schema ccbench/7 is newer than this "
                              "kit reads (newest ccbench/3); update ccbench_kit to read it")


def test_missing_required_parts_are_one_line(tmp_path, capsys):
    bare = v1_design().drop_vars(["wrong", "count"])
    path = write_v1(tmp_path / "bare.nc", {"all_reduce": bare})
    message = f"{path}: claims schema ccbench/1 but lacks coord 'count', variable 'wrong'"
    with pytest.raises(SchemaError) as err:
        ccb.load(path)
    assert str(err.value) == message
    assert cli_error(["show", str(path)], capsys) == (2, f"ccbench: error: {message}\n")


def test_a_foreign_schema_is_refused(tmp_path, capsys):
    path = tmp_path / "other.nc"
    xr.Dataset(attrs={"schema": "pyperf/1.0"}).to_netcdf(path, engine="h5netcdf")
    message = (f"{path}: not a ccbench results file (schema attr is 'pyperf/1.0'); "
               "import baselines with `ccbench import`")
    assert cli_error(["show", str(path)], capsys) == (2, f"ccbench: error: {message}\n")


def test_round_trips(tmp_path):
    # a current file: written and read back identical
    ds = ccb.load(DATA / "v1_round1_groups.nc").load()
    save(ds, tmp_path / "a.nc")
    back = ccb.load(tmp_path / "a.nc").load()
    xr.testing.assert_identical(back, ds)
    assert back.attrs["schema_upgraded_from"] == "ccbench/1"   # the provenance stays
    # an upgrade is idempotent: upgrading a current Dataset changes nothing
    assert ccb.dataset.upgrade(back) is back
    # the in-memory upgrade leaves its input alone
    old = v1_design()
    new = ccb.dataset.upgrade(old)
    assert old.attrs["schema"] == "ccbench/1" and "complete" not in old.attrs
    assert new.attrs["complete"] == "true"


def test_the_docs_table_names_every_addition():
    text = (DOCS / "data-contract.md").read_text()
    for version in HISTORY:
        assert f"`{version.schema}`" in text
        for added in version.added:
            assert f"`{added.name}`" in text, added.name


def test_the_history_records_everything_a_kit_run_wrote():
    raw = xr.open_dataset(DATA / "v1_round1_groups.nc", engine="h5netcdf")
    recorded = set(V1_ATTRS) | {a.name for v in HISTORY for a in v.added}
    assert set(raw.attrs) - {"collectives"} <= recorded   # "collectives": the file's index
    assert set(raw.coords) <= recorded | set(raw.dims) | {"count", "in_bytes", "out_bytes",
                                                          "host", "device"}
