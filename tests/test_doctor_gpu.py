"""The doctor's GPU local check on real GPUs (``ccbench doctor --local``):
figures in their physical range, NVML state read, a GPU loaded by a
competing process named, and the baseline catching it.  Skipped without a
GPU; `bench/gpu_doctor.sh` runs them on the device machine."""
import json
import math
import os
import subprocess
import sys

import pytest

from conftest import gpus_here

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_N = gpus_here()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not isinstance(_N, int),
                                                  reason=f"needs a GPU ({_N})")]


def _doctor(tmp_path, *args):
    p = subprocess.run([sys.executable, "-m", "ccbench_kit", "doctor", "--local", "--repeats",
                        "3", *args], capture_output=True, text=True, cwd=tmp_path, timeout=200,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(
                           [ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])})
    return p.returncode, p.stdout, p.stderr


def test_idle_figures_and_state(tmp_path):
    from ccbench_kit.health.gpu import check
    rc, out, err = _doctor(tmp_path, "--out", "idle.nc", "--save-baseline", "base.json")
    assert rc in (0, 1), err
    ds = check.load(tmp_path / "idle.nc")
    med = {f: ds[f].median("repeat").values.ravel() for f in check.FIGURES}
    # physical ranges of any data-centre GPU of the last years
    assert ((med["hbm_gbps"] > 300) & (med["hbm_gbps"] < 20000)).all(), med
    assert ((med["matmul_tflops"] > 20) & (med["matmul_tflops"] < 5000)).all(), med
    assert ((med["h2d_gbps"] > 2) & (med["h2d_gbps"] < 130)).all(), med
    assert ((med["d2h_gbps"] > 2) & (med["d2h_gbps"] < 130)).all(), med
    for key in ("temperature_c", "power_w", "sm_clock_max_mhz", "pcie_width_max"):
        assert all(math.isfinite(v) and v > 0 for v in ds[key].values.ravel()), key
    assert ds.attrs["gpu_check_s"] < 60 * len(ds["gpu"])
    base = json.loads((tmp_path / "base.json").read_text())
    assert base["schema"] == "ccbench-baseline/1" and "matmul_tflops" in base["figures"]
    assert out.strip().splitlines()[-1].startswith("verdict: ")


def test_loaded_gpu_is_named_against_the_baseline(tmp_path):
    sys.path.insert(0, ROOT)
    from testbed.gpu_load import competing_load
    rc, out, err = _doctor(tmp_path, "--gpus", "0", "--out", "idle.nc", "--save-baseline",
                           "base.json")
    assert rc == 0, out + err
    with competing_load(0, "compute"):
        rc, out, err = _doctor(tmp_path, "--gpus", "0", "--out", "loaded.nc", "--baseline",
                               "base.json")
    assert rc == 1, out + err
    assert out.strip().splitlines()[-1].startswith("verdict: ") and "gpu0" in out.splitlines()[-1]
    assert "bf16 matmul" in out and "the baseline's" in out, out
