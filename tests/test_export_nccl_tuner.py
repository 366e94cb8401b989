"""``ccbench export --nccl-tuner-csv``: the committed 2x/4x H200 all_reduce
sweeps as the performance CSV of NCCL's tuner example, and (with an NCCL
checkout in CCB_NCCL_DIR) its optimize_config.py picking our winners."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ccbench_kit import load
from ccbench_kit.formats.nccl_tuner.write_csv import COLUMNS

ROOT = Path(__file__).resolve().parent.parent
SWEEPS = [ROOT / "reports" / "nccl-h200x2" / "sweep_all_reduce.nc",
          ROOT / "reports" / "nccl-h200x4" / "sweep_all_reduce.nc"]
# NCCL's tuner example is not ours to ship: point CCB_NCCL_DIR at an NVIDIA/nccl checkout
OPTIMIZE = Path(os.environ.get("CCB_NCCL_DIR", "/nonexistent")) / "plugins" / "tuner" / \
    "example" / "scripts" / "optimize_config.py"


def _export(cli, tmp_path, *files):
    out = tmp_path / "perf.csv"
    proc = cli("export", *files, "--nccl-tuner-csv", out, "-t", "avg", check=True)
    with open(out) as f:
        rows = list(csv.DictReader(f))
    return out, rows, proc


def test_rows_are_what_ran_with_time_and_busbw(cli, tmp_path):
    out, rows, proc = _export(cli, tmp_path, SWEEPS[1])
    assert out.read_text().splitlines()[0] == ",".join(COLUMNS)
    ds = load(SWEEPS[1])
    ran = json.loads(ds.attrs["nccl_ran"])
    # nccl:pat is "not available" on 4 ranks at every size: nothing of it is written
    assert len(rows) == 3 * ds.sizes["size"]
    assert '"not run": 31' in proc.stderr
    row = next(r for r in rows if r["size_bytes"] == "2097152" and r["algorithm"] == "tree")
    assert ran["nccl:tree"]["2097152"] == "TREE/LL128 x24ch"
    assert (row["collective"], row["protocol"], row["channels"]) == ("allreduce", "ll128", "24")
    assert (row["nodes"], row["ranks"], row["pipeOps"], row["regBuff"]) == ("1", "4", "-1", "0")
    t = ds.ccb.time("avg").sel(algorithm="nccl:tree", placement="out_of_place", size=2097152)
    assert float(row["latency_us"]) == pytest.approx(float(t), rel=1e-8)
    assert float(row["bandwidth_gbps"]) == pytest.approx(2097152 / 1e3 / float(t) * 1.5, rel=1e-8)


def test_bad_requests_are_one_line(cli, tmp_path):
    alltoall = ROOT / "reports" / "nccl-h200x2" / "ccbench_alltoall.nc"
    proc = cli("export", alltoall, "--nccl-tuner-csv", tmp_path / "x.csv")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("ccbench: error: --nccl-tuner-csv: nothing to write")
    assert "alltoall has no NCCL tuner entry" in line
    assert not (tmp_path / "x.csv").exists()


def _winners(rows):
    """{(ranks, size): (algorithm, protocol, channels)} with the least latency
    (the first on a tie, as optimize_config.py's strict < keeps)."""
    best = {}
    for r in rows:
        key = (int(r["ranks"]), int(r["size_bytes"]))
        if key not in best or float(r["latency_us"]) < best[key][0]:
            best[key] = (float(r["latency_us"]), (r["algorithm"], r["protocol"], int(r["channels"])))
    return {k: v[1] for k, v in best.items()}


@pytest.mark.skipif(not OPTIMIZE.exists(), reason="set CCB_NCCL_DIR to an NVIDIA/nccl checkout "
                    "to run its tuner example's optimize_config.py on our CSV")
def test_optimize_config_picks_our_measured_winners(cli, tmp_path):
    out, rows, _ = _export(cli, tmp_path, *SWEEPS)
    conf = tmp_path / "nccl_tuner.conf"
    proc = subprocess.run([sys.executable, str(OPTIMIZE), str(out), "-o", str(conf)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"Loaded {len(rows)} performance data points" in proc.stdout
    assert "Warning" not in proc.stdout            # no row skipped as invalid
    ranges = []
    for line in conf.read_text().splitlines():
        if line and not line.startswith("#"):
            coll, lo, hi, algo, proto, ch, nodes, ranks, pipe, reg = line.split(",")
            assert (coll, nodes, pipe, reg) == ("allreduce", "1", "-1", "0")
            ranges.append((int(ranks), int(lo), int(hi), (algo, proto, int(ch))))
    winners = _winners(rows)
    assert {k[0] for k in winners} == {2, 4}
    for (ranks, size), want in winners.items():
        hits = [r for r in ranges if r[0] == ranks and r[1] <= size <= r[2]]
        assert len(hits) == 1, (ranks, size, hits)
        assert hits[0][3] == want, (ranks, size)
    # the measured answer differs by size: not one configuration for everything
    assert len({w for w in winners.values()}) > 3
    assert np.all([r[1] <= r[2] for r in ranges])
