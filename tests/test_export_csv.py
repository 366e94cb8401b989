"""``ccbench export``: one CSV row per (collective, algorithm, placement,
size), and the AWS recipe's file names."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ccbench_kit import importers
from ccbench_kit.dataset.schema import make_dataset
from ccbench_kit.errors import ConfigError
from ccbench_kit.formats.csv.write import aws_filename, summary_frame

DATA = Path(__file__).parent / "data" / "baselines"


def test_summary_rows_of_a_baseline():
    ds = importers.load(DATA / "all_reduce_h200x2.txt")
    df = summary_frame(ds)
    assert len(df) == 60                                   # 30 sizes x 2 placements x 1 algorithm
    r = df[(df["size"] == 4294967296) & (df["placement"] == "out_of_place")].iloc[0]
    assert (r["collective"], r["dtype"], r["algorithm"], r["iterations"]) == ("all_reduce", "fp32", "nccl", 1)
    assert r["time_avg_us"] == 12356.3 and r["time_p99_us"] == 12356.3 and r["time_std_us"] == 0.0
    # 4294967296 B / 12356.3 us = 347.593316 GB/s; factor 1 on 2 ranks
    assert r["busbw_GBps"] == pytest.approx(347.5933164) and r["reported_busbw"] == 347.59


def test_summary_of_per_iteration_data():
    lat = np.arange(1, 25, dtype=float).reshape(1, 1, 2, 3, 4)    # 2 sizes, 3 ranks, 4 iterations
    ds = make_dataset(algorithms=["ring"], placements=["out_of_place"], sizes=[1024, 2048],
                      counts=[256, 512], in_bytes=[1024, 2048], out_bytes=[1024, 2048],
                      latency=lat, wrong=np.zeros((1, 1, 2)), ranks=[0, 1, 2],
                      hosts=["a", "b", "b"], devices=["", "", ""],
                      attrs={"collective": "all_gather", "dtype": "fp32", "nranks": 3,
                             "created": "2026-03-04T05:06:07+00:00"})
    df = summary_frame(ds, stats=("avg", "max", "p50"), rank_stat="max")
    # size 1024: iteration times = max over ranks = 9, 10, 11, 12
    r = df.iloc[0]
    assert (r["time_avg_us"], r["time_max_us"], r["time_p50_us"], r["iterations"]) == (10.5, 12, 10.5, 4)
    # all_gather on 3 ranks: 1024 B / 10.5 us = 0.0975238 GB/s x 2/3
    assert r["busbw_GBps"] == pytest.approx(1024 / 10.5 / 1e3 * 2 / 3)
    assert aws_filename(ds) == "nccl_2_ami_allgather_0x0_20260304_050607_results.csv"
    assert aws_filename(ds, "container", "0x7", topo=True, nodes=16) == \
        "nccl_16_container_allgather_0x7_topo_20260304_050607_results.csv"
    with pytest.raises(ConfigError, match="--mode"):
        aws_filename(ds, "docker")


def test_export_cli(cli, tmp_path):
    out = tmp_path / "all.csv"
    p = cli("export", DATA / "all_reduce_h200x2.json", DATA / "allgatherp_8ranks.txt",
            "--csv", out, "--aws-naming", tmp_path / "aws")
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(out)
    assert len(df) == 60 + 3                                # 3 AllgatherP algorithms x 1 size
    assert set(df["collective"]) == {"all_reduce", "all_gather"}
    names = sorted(f.name for f in (tmp_path / "aws").iterdir())
    # JSON start_time 2026-11-22 05:59:10; one host ("vm")
    assert "nccl_1_ami_allreduce_0x0_20261122_055910_results.csv" in names
    assert any(n.startswith("nccl_unknown_ami_allgather_0x0_") for n in names)
    p = cli("export", DATA / "all_reduce_h200x2.json")
    assert p.returncode == 2 and p.stderr.strip() == \
        "ccbench: error: --csv: say where: --csv [OUT], --nccl-tuner-csv [OUT] or --aws-naming DIR"


def test_aws_naming_names_the_split_mask(cli, tmp_path):
    """The recipe's pattern field is the run's NCCL_TESTS_SPLIT mask: a real
    4-rank run with --split 'AND 0x1' (groups [0, 2] and [1, 3]) is named
    _0x1_, not _0x0_."""
    from ccbench_kit.inputs.groups import groups_from_colors, mask_of_groups, split_colors
    out = tmp_path / "split.nc"
    r = cli("run", "all_reduce", "-r", 4, "-b", 8, "-n", 2, "-w", 1, "--split", "AND 0x1",
            "--non-interactive", "--out", out, timeout=240)
    assert r.returncode == 0, r.stderr
    r = cli("export", out, "--aws-naming", tmp_path / "aws")
    assert r.returncode == 0, r.stderr
    [name] = [f.name for f in (tmp_path / "aws").iterdir()]
    assert name.startswith("nccl_1_ami_allreduce_0x1_") and name.endswith("_results.csv")
    # the mask that makes a run's groups, whichever way they were given
    for spec, nranks, mask in (("AND 0x7", 16, 0x7), ("MOD 8", 8, 0x7), ("DIV 4", 8, 0x4),
                               ("OR 1", 4, 0x2), ("DIV 3", 9, None)):
        assert mask_of_groups(groups_from_colors(split_colors(spec, nranks)), nranks) == mask
    assert mask_of_groups([], 8) == 0


def test_aws_naming_of_recorded_split_variables():
    from ccbench_kit.formats.csv.write import _env_pattern
    assert _env_pattern("NCCL_TESTS_SPLIT_MASK", "7") == "0x7"        # strtoul(s, 0, 16)
    assert _env_pattern("NCCL_TESTS_SPLIT_MASK", "0x7") == "0x7"
    assert _env_pattern("NCCL_TESTS_SPLIT", "AND 0x7") == "0x7"
    assert _env_pattern("NCCL_TESTS_SPLIT", "%8") == "MOD8"
    assert _env_pattern("NCCL_TESTS_SPLIT", "DIV 4") == "DIV4"
    # what cannot be read stays as recorded, for the file-name check to judge
    assert _env_pattern("NCCL_TESTS_SPLIT", "../x y") == "../xy"
