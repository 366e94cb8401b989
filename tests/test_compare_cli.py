"""``ccbench compare`` and ``ccbench import``: exit codes, one-line errors,
the acceptance check."""
from pathlib import Path

import numpy as np
import pandas as pd

from ccbench_kit.dataset import save
from ccbench_kit.dataset.schema import make_dataset

DATA = Path(__file__).parent / "data" / "baselines"


def _run(path, scale, dtype="fp32", seed=0):
    """A 2-rank all_reduce 'kit run' at the fixture's sizes, `scale` x the
    fixture's out-of-place times, 12 iterations with 1 % noise."""
    import xarray as xr
    fx = xr.open_dataset(DATA / "all_reduce_h200x2.txt", engine="ccbench")
    t = fx["reported_time"].values[0]                       # (placement, size)
    rng = np.random.default_rng(seed)
    lat = t[None, :, :, None, None] * scale * rng.lognormal(0, 0.01, (1, 2, t.shape[1], 2, 12))
    sizes = fx["size"].values
    ds = make_dataset(algorithms=["nccl"], placements=["out_of_place", "in_place"], sizes=sizes,
                      counts=sizes // 4, in_bytes=sizes, out_bytes=sizes, latency=lat,
                      wrong=np.zeros((1, 2, len(sizes))), ranks=[0, 1], hosts=["a", "a"],
                      devices=["g0", "g1"],
                      attrs={"collective": "all_reduce", "dtype": dtype, "op": "sum", "root": -1,
                             "nranks": 2, "backend": "nccl"})
    save(ds, path)
    return path


def test_acceptance_min_ratio(cli, tmp_path):
    base = DATA / "all_reduce_h200x2.txt"
    good = _run(tmp_path / "good.nc", 1.0 / 0.97)     # 97 % of the baseline's busbw
    p = cli("compare", base, good, "--min-ratio", "0.9", "--csv", tmp_path / "c.csv",
            "--plot", tmp_path / "c.png")
    assert p.returncode == 0, p.stderr
    assert "PASSED: every size is at or above the minimum busbw ratio 0.9" in p.stdout
    assert "plain ratio" in p.stdout and "the baseline has fewer than 5 iterations" in p.stdout
    df = pd.read_csv(tmp_path / "c.csv")
    assert len(df) == 60 and set(df["method"]) == {"plain ratio"}
    assert np.allclose(df["ratio"], 0.97, rtol=0.04)
    assert (tmp_path / "c.png").stat().st_size > 10000
    slow = _run(tmp_path / "slow.nc", 1.0 / 0.8)
    p = cli("compare", base, slow, "--min-ratio", "0.9", "-b", "1M")
    assert p.returncode == 1
    assert "FAILED: 26 size(s) below the minimum busbw ratio 0.9" in p.stdout   # 1M..4G: 13 sizes x 2
    assert "slower" in p.stdout


def test_bootstrap_between_two_runs(cli, tmp_path):
    a = _run(tmp_path / "a.nc", 1.0, seed=1)
    b = _run(tmp_path / "b.nc", 1.0 / 1.2, seed=2)          # 20 % faster
    p = cli("compare", a, b, "-b", "64M", "--seed", "3")
    assert p.returncode == 0, p.stderr
    rows = [ln for ln in p.stdout.splitlines() if ln.strip().endswith(("faster", "slower", "indistinguishable"))]
    assert len(rows) == 14 and all(r.endswith("faster") for r in rows)
    assert "bootstrap 95% CI: 2000 resamples" in p.stdout


def test_refusals_are_one_line(cli, tmp_path):
    p = cli("compare", DATA / "all_reduce_h200x2.txt", DATA / "all_gather_h200x2.json")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert p.stderr.startswith("ccbench: error: nothing to compare: the run has all_gather fp32, "
                               "the baseline all_reduce fp32")
    bf = _run(tmp_path / "bf.nc", 1.0, dtype="bf16")
    p = cli("compare", DATA / "all_reduce_h200x2.txt", bf)
    assert p.returncode == 2 and "cannot compare all_reduce in bf16" in p.stderr
    assert "Traceback" not in p.stderr


def test_import_cli(cli, tmp_path):
    out = tmp_path / "base.nc"
    p = cli("import", DATA / "all_reduce_h200x2.txt", DATA / "all_gather_h200x2.json",
            DATA / "nccom_r32_allg_io.txt", "-o", out)
    assert p.returncode == 0, p.stderr
    assert "# all_gather-fp32: " in p.stdout and "wrote 3 result sets" in p.stdout
    p = cli("show", out)
    assert p.returncode == 0 and "347.59" in p.stdout
    bad = tmp_path / "bad.txt"
    bad.write_text((DATA / "all_reduce_h200x2.txt").read_text().replace("busbw", "bus  "))
    p = cli("import", bad)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert p.stderr.startswith(f"ccbench: error: {bad}:11: expected a header naming size")
    p = cli("import", DATA / "nccom_results.json")
    assert p.returncode == 2 and "pass --collective" in p.stderr
    p = cli("import", DATA / "nccom_results.json", "--collective", "allg", "--nranks", "32")
    assert p.returncode == 0 and "all_gather fp32 32 ranks" in p.stdout
    warn = tmp_path / "w.txt"
    warn.write_text((DATA / "all_reduce_h200x2.txt").read_text().replace(
        "12356.3  347.59  347.59", "12356.3  347.59  399.99"))
    p = cli("import", warn)
    assert p.returncode == 0 and "ccbench: warning:" in p.stderr and "MISMATCH: 1 of 120" in p.stdout
