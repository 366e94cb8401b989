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
