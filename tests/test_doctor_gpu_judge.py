"""The GPU check's judgment on hand-made figures (no GPU needed), the
baseline file, and its bad input on this machine (where the no-GPU path is
real: no NVIDIA driver here)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ccbench_kit.errors import ConfigError
from ccbench_kit.health import baseline
from ccbench_kit.health.gpu import check, judge, nvml, report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H100 = "NVIDIA H100 80GB HBM3"
# the idle H100: copy 2,987 GB/s, matmul 792 TFLOP/s, H2D 53 GB/s
IDLE = {"hbm_gbps": 2987.0, "matmul_tflops": 792.0, "h2d_gbps": 53.0, "d2h_gbps": 52.0}


def healthy_state(**over):
    values = {"temperature_c": 40, "power_w": 120, "power_limit_w": 700, "sm_clock_mhz": 1980,
              "sm_clock_max_mhz": 1980, "mem_clock_mhz": 2619, "mem_clock_max_mhz": 2619,
              "clock_event_reasons": 0x4, "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": 16,
              "pcie_width_max": 16, "ecc_volatile_uncorrected": 0, "ecc_volatile_corrected": 0,
              "ecc_aggregate_uncorrected": 0, "ecc_aggregate_corrected": 3,
              "remapped_rows_correctable": 0, "remapped_rows_uncorrectable": 0,
              "remap_pending": 0, "remap_failure": 0, "nvlink_up": 18, "nvlink_links": 18}
    values.update(over)
    return nvml.State(name=H100, uuid="GPU-x", values={k: float(v) for k, v in values.items()})


def gpu_run(scale=None, ngpu=3, node="n1", names=None, states=None, reps=5, seed=1):
    """A GPU check Dataset: every GPU at IDLE x (1 +- 1 %) noise, times
    `scale` {(gpu, figure): factor}."""
    rng = np.random.default_rng(seed)
    samples = {f: v * (1 + 0.01 * rng.standard_normal((ngpu, reps))) for f, v in IDLE.items()}
    for (g, f), k in (scale or {}).items():
        samples[f][g] *= k
    states = states or [healthy_state() for _ in range(ngpu)]
    bus = [f"00000000:{0x18 + g:02X}:00.0" for g in range(ngpu)]
    return check.to_dataset(node, list(range(ngpu)), names or [H100] * ngpu, bus, samples,
                            states, {}, "", {"cuda_runtime": "13.0"})


def test_healthy_gpus_verdict_none_with_three_references():
    v = judge.judge(gpu_run())
    assert v.line() == "verdict: none"
    row = v.scores["matmul_tflops"]["n1/gpu1"]
    assert row["peers"] == pytest.approx(1.0, abs=0.03)
    assert row["preset"] == pytest.approx(1.0, abs=0.03)  # 792 is the preset's typical
    assert row["baseline"] is None
    assert any("no baseline" in n for n in v.notes)


def test_loaded_gpu_named_with_the_figures_that_moved():
    # the loaded H100: copy 1,192 GB/s, matmul 269 TFLOP/s, H2D unchanged
    ds = gpu_run({(2, "hbm_gbps"): 1192 / 2987, (2, "matmul_tflops"): 269 / 792})
    v = judge.judge(ds)
    assert v.line() == "verdict: n1 gpu2"
    f = v.findings[0]
    assert f.moved == ["hbm_gbps", "matmul_tflops"]
    text = f.sentence()
    assert "other GPUs' median" in text and "preset's typical" in text and "h100-nvlink4" in text
    assert "H2D" not in text
    assert v.scores["matmul_tflops"]["n1/gpu2"]["peers"] == pytest.approx(0.34, abs=0.02)


def test_every_gpu_slow_is_seen_by_preset_and_baseline_not_peers(tmp_path):
    base_path = tmp_path / "base.json"
    baseline.save(gpu_run(seed=2), base_path)
    slow = gpu_run({(g, "matmul_tflops"): 0.6 for g in range(3)})  # a driver regression
    v = judge.judge(slow, baseline.load(base_path))
    assert v.line() == "verdict: n1 gpu0, n1 gpu1, n1 gpu2"
    for f in v.findings:
        assert f.moved == ["matmul_tflops"]
        assert "other GPUs" not in f.sentence()
        assert "the baseline's" in f.sentence() and "preset's typical" in f.sentence()
    assert v.scores["matmul_tflops"]["n1/gpu0"]["baseline"] == pytest.approx(0.6, abs=0.02)


def test_without_preset_the_baseline_still_judges(tmp_path):
    names = ["NVIDIA A40"] * 2
    base_path = tmp_path / "b.json"
    baseline.save(gpu_run(ngpu=2, names=names, seed=3), base_path)
    v = judge.judge(gpu_run({(0, "h2d_gbps"): 0.5, (1, "h2d_gbps"): 0.5}, ngpu=2, names=names),
                    baseline.load(base_path))
    assert v.line() == "verdict: n1 gpu0, n1 gpu1"
    assert any("no preset for NVIDIA A40" in n for n in v.notes)


def test_nvml_state_findings():
    states = [healthy_state(), healthy_state(ecc_volatile_uncorrected=2, pcie_width=8),
              healthy_state(nvlink_up=16, clock_event_reasons=0x4 | 0x40)]
    v = judge.judge(gpu_run(states=states))
    assert v.line() == "verdict: n1 gpu1, n1 gpu2, n1 gpu2 nvlink"
    by = {f.label: f for f in v.findings}
    assert by["n1 gpu1"].moved == ["ecc_volatile_uncorrected", "pcie_width"]
    assert "PCIe link x8 of x16" in by["n1 gpu1"].sentence()
    assert "hardware thermal slowdown" in by["n1 gpu2"].sentence()
    assert "software power cap" not in by["n1 gpu2"].sentence()  # a busy GPU's normal limit
    assert "2 of 18 NVLink links down" in by["n1 gpu2 nvlink"].sentence()
    table = report.text(gpu_run(states=states), v)
    assert "ECC uncorrected volatile 2" in table and "x8/x16" in table


def test_baseline_score_ratio_interval_and_z():
    base = {"hbm_gbps": [100.0, 101, 99, 100, 100.5]}
    now = np.array([80.0, 81, 79, 80, 80.5])
    m_now, m_base, ratio, ci, z, flagged = baseline._score_one(
        now, np.array(base["hbm_gbps"]), "higher", 0.8, np.random.default_rng(0))
    assert (m_now, m_base) == (80.0, 100.0) and ratio == pytest.approx(0.8)
    assert ci[0] <= 0.8 <= ci[1] < 1 and flagged
    assert z == pytest.approx(-20 / (1.4826 * 0.5))
    # lower is better (a latency): 1.3x slower is flagged, 1.1x is not
    lat = np.array([1.0, 1.01, 0.99, 1.0, 1.0])
    assert baseline._score_one(lat * 1.3, lat, "lower", 0.8, np.random.default_rng(0))[5]
    assert not baseline._score_one(lat * 1.1, lat, "lower", 0.8, np.random.default_rng(0))[5]


def test_baseline_of_another_cluster_model_or_schema(tmp_path):
    path = tmp_path / "b.json"
    baseline.save(gpu_run(node="other-node"), path)
    with pytest.raises(ConfigError, match=r"^--baseline: .*b.json: recorded on other-node, "
                                          r"this run checks n1: a baseline of another cluster"):
        baseline.check_matches(baseline.load(path), gpu_run())
    baseline.save(gpu_run(names=["NVIDIA H200"] * 3), path)
    with pytest.raises(ConfigError, match=r"n1/0 was a NVIDIA H200 when the baseline was saved, "
                                          r"it is a NVIDIA H100 80GB HBM3 now"):
        baseline.check_matches(baseline.load(path), gpu_run())
    path.write_text(json.dumps({"schema": "ccbench/1"}))
    with pytest.raises(ConfigError, match="not a ccbench baseline of schema ccbench-baseline/1 "
                                          r"\(it says 'ccbench/1'\)"):
        baseline.load(path)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not a baseline file"):
        baseline.load(path)


def test_gpus_of_different_models_and_bad_gpu_list():
    with pytest.raises(ConfigError, match=r"^--gpus: GPUs of different models on one node "
                                          r"\(gpu0 NVIDIA H100 80GB HBM3, gpu1 NVIDIA A100"):
        check.check_models([H100, "NVIDIA A100-SXM4-80GB"], [0, 1])
    assert check.parse_gpus("2,0", 4) == [2, 0]
    with pytest.raises(ConfigError, match=r"^--gpus: '0,7': this node has GPUs 0-3"):
        check.parse_gpus("0,7", 4)
    with pytest.raises(ConfigError, match="give GPU indices like"):
        check.parse_gpus("a", 4)


def test_results_file_round_trip(tmp_path):
    ds = gpu_run()
    ds.attrs["doctor_verdict"] = json.dumps(judge.judge(ds).to_dict(), default=float)
    check.save(ds, tmp_path / "r.nc")
    back = check.load(tmp_path / "r.nc")
    np.testing.assert_array_equal(back["matmul_tflops"].values, ds["matmul_tflops"].values)
    assert str(back["gpu_name"].sel(node="n1", gpu=0).values) == H100


def test_show_prints_the_verdict_findings_and_state(tmp_path, capsys):
    from ccbench_kit.cli import main
    ds = gpu_run({(2, "hbm_gbps"): 1192 / 2987, (2, "matmul_tflops"): 269 / 792})
    ds.attrs.update(doctor_verdict=json.dumps(judge.judge(ds).to_dict(), default=float),
                    gpu_check_s=12.5, command="ccbench doctor --local")
    check.save(ds, tmp_path / "r.nc")
    assert main(["show", str(tmp_path / "r.nc")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "verdict: n1 gpu2"
    assert out[1].startswith("- n1 gpu2: ") and "HBM copy" in out[1]
    assert [ln.split(":")[0] for ln in out if ln.startswith("n1/gpu")] == \
        ["n1/gpu0", "n1/gpu1", "n1/gpu2"]
    assert out[-1] == "check took 12.5 s; reproduce: ccbench doctor --local"


def test_the_file_is_the_kits_schema_and_sweep_readers_refuse_it(tmp_path, capsys):
    from ccbench_kit.cli import main
    from ccbench_kit.dataset import SchemaError, io, load
    ds = gpu_run()
    check.save(ds, tmp_path / "r.nc")
    assert io.file_kind(tmp_path / "r.nc") == "gpu-check"
    back = check.load(tmp_path / "r.nc")
    assert (back.attrs["schema"], back.attrs["kind"]) == ("ccbench/3", "gpu-check")
    assert "schema_upgraded_from" not in back.attrs
    message = (f"{tmp_path / 'r.nc'}: a GPU check (`ccbench doctor --local`), not a "
               "collective's results; read it with `ccbench show`, `ccbench compare BASELINE "
               "RUN` of two GPU checks, or the doctor_gpu notebook")
    with pytest.raises(SchemaError) as err:
        load(tmp_path / "r.nc")
    assert str(err.value) == message
    for argv in (["export", str(tmp_path / "r.nc"), "--csv", str(tmp_path / "x.csv")],
                 ["compare", str(tmp_path / "x.nc"), str(tmp_path / "r.nc")]):
        if argv[0] == "compare":  # a collective's results as the baseline
            io.save(load(os.path.join(ROOT, "tests", "data", "schema", "v1_round1_groups.nc")),
                    tmp_path / "x.nc")
        assert main(argv) == 2
        assert capsys.readouterr().err == f"ccbench: error: {message}\n"
    assert not (tmp_path / "x.csv").exists()
    # ccbench show prints it: not judged yet (the file as written before the judging)
    assert main(["show", str(tmp_path / "r.nc")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "verdict: not judged (the file holds no readable attr doctor_verdict)"
    assert out[1].startswith(f"n1/gpu0: {H100}: 40 C, 120/700 W, SM 1980/1980 MHz")
    assert len(out) == 1 + 3 + 1 and out[-1] == ("check took None s; reproduce: ccbench "
                                                 "doctor --local")
    # and the GPU check's reader refuses a collective's results the same way
    sweep = tmp_path / "sweep.nc"
    io.save(load(os.path.join(ROOT, "tests", "data", "schema", "v1_round1_groups.nc")), sweep)
    assert io.file_kind(sweep) == "sweep"
    with pytest.raises(SchemaError) as err:
        check.load(sweep)
    assert str(err.value) == (f"{sweep}: a collective's results, not a GPU check (`ccbench "
                              "doctor --local`); read it with `ccbench show`, `compare`, "
                              "`report`")
    # a kind no kit wrote, and a GPU check missing what every one has
    odd = ds.copy()
    odd.attrs["kind"] = "gpu-chek\n"
    check.save(odd, tmp_path / "odd.nc")
    with pytest.raises(SchemaError) as err:
        check.load(tmp_path / "odd.nc")
    assert str(err.value) == (f"{tmp_path / 'odd.nc'}: kind 'gpu-chek\\n' is not one this "
                              "kit reads (sweep, gpu-check)")
    check.save(ds.drop_vars("gpu_name"), tmp_path / "bare.nc")
    with pytest.raises(SchemaError) as err:
        check.load(tmp_path / "bare.nc")
    assert str(err.value) == (f"{tmp_path / 'bare.nc'}: claims schema ccbench/3 but lacks "
                              "coord 'gpu_name'")


def test_a_file_of_the_checks_own_schema_of_before_loads_upgraded(tmp_path):
    """Until schema version 3 the GPU check wrote its own netCDF, schema
    ``ccbench-doctor-gpu/1``, with xarray directly: such a file is read as
    a GPU check of today, value by value, and compares against a new one."""
    old = gpu_run(seed=7)
    old.attrs["schema"] = "ccbench-doctor-gpu/1"
    del old.attrs["kind"]
    old.to_netcdf(tmp_path / "old.nc", engine="h5netcdf")   # the old writer's call
    back = check.load(tmp_path / "old.nc")
    assert (back.attrs["schema"], back.attrs["kind"], back.attrs["schema_upgraded_from"]) == \
        ("ccbench/3", "gpu-check", "ccbench-doctor-gpu/1")
    for name in ("hbm_gbps", "matmul_tflops", "h2d_gbps", "d2h_gbps", "temperature_c"):
        np.testing.assert_array_equal(back[name].values, old[name].values)
    assert set(old.attrs) - {"schema"} <= set(back.attrs)
    assert all(back.attrs[k] == v for k, v in old.attrs.items() if k != "schema")
    check.save(gpu_run({(1, "hbm_gbps"): 0.5}, seed=8), tmp_path / "new.nc")
    p = subprocess.run([sys.executable, "-m", "ccbench_kit", "compare", "old.nc", "new.nc",
                        "--min-ratio", "0.9"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=60, env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 1, p.stderr
    assert "new.nc n1/gpu1 hbm_gbps: ratio 0.50" in p.stdout


def _cli(tmp_path, *args):
    p = subprocess.run([sys.executable, "-m", "ccbench_kit", "doctor", *args],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60,
                       env={**os.environ, "PYTHONPATH": ROOT})
    return p.returncode, p.stdout, p.stderr.strip()


@pytest.mark.skipif(os.path.exists("/proc/driver/nvidia"), reason="this host has a GPU driver")
def test_cli_no_gpu_and_bad_files(tmp_path):
    rc, out, err = _cli(tmp_path, "--local")
    assert rc == 2 and err.startswith("ccbench: error: --local: ") and "\n" not in err, err
    assert "no GPU" in err or "pynvml is required" in err
    (tmp_path / "other.json").write_text(json.dumps({"schema": "something/2"}))
    rc, out, err = _cli(tmp_path, "--local", "--baseline", "other.json")
    assert rc == 2 and err == ("ccbench: error: --baseline: other.json: not a ccbench baseline "
                               "of schema ccbench-baseline/1 (it says 'something/2'); save one "
                               "with --save-baseline"), err
    rc, out, err = _cli(tmp_path, "--hosts", "a", "b", "--gpus", "0")
    assert rc == 2 and err == "ccbench: error: --gpus: applies to the GPU checks: add --local"
    rc, out, err = _cli(tmp_path, "--local", "--hosts", "a", "b")
    assert rc == 2 and "--hosts does not apply" in err
    assert sorted(os.listdir(tmp_path)) == ["other.json"]  # nothing written


def test_report_page_shows_the_verdict_and_bars(tmp_path):
    pytest.importorskip("papermill")
    ds = gpu_run({(2, "matmul_tflops"): 0.4})
    base = tmp_path / "b.json"
    baseline.save(gpu_run(seed=5), base)
    ds.attrs["doctor_verdict"] = json.dumps(judge.judge(ds, baseline.load(base)).to_dict(),
                                            default=float)
    check.save(ds, tmp_path / "r.nc")
    page = open(report.html(tmp_path / "r.nc", tmp_path / "r.html")).read()
    assert "verdict: n1 gpu2" in page and "bf16 matmul" in page
    executed = json.loads((tmp_path / "r.ipynb").read_text())
    images = [o for c in executed["cells"] for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 1  # the per-GPU bars


def test_compare_two_gpu_checks(tmp_path):
    check.save(gpu_run(seed=7), tmp_path / "idle.nc")
    check.save(gpu_run({(1, "hbm_gbps"): 0.5}, seed=8), tmp_path / "slow.nc")
    p = subprocess.run([sys.executable, "-m", "ccbench_kit", "compare", "idle.nc", "slow.nc",
                        "--min-ratio", "0.9"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=60, env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 1, p.stderr
    rows = {(line.split()[0], line.split()[2]): line for line in p.stdout.splitlines()
            if line.startswith("n1/gpu") and "copy" in line}
    assert "0.51x" in rows[("n1/gpu1", "copy")] and rows[("n1/gpu1", "copy")].endswith("slower")
    assert 0.95 < float(rows[("n1/gpu0", "copy")].split()[-3].rstrip("x")) < 1.05  # 1 % noise
    assert "FAILED: 1 figure(s) below the minimum ratio 0.9" in p.stdout
    assert "slow.nc n1/gpu1 hbm_gbps: ratio 0.50" in p.stdout


def test_nvidia_ml_py_missing_names_the_extra(tmp_path):
    p = subprocess.run([sys.executable, "-c", "import sys; sys.modules['pynvml'] = None\n"
                        "from ccbench_kit.cli import main; sys.exit(main(['doctor', '--local']))"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 2
    assert p.stderr.strip() == ("ccbench: error: --local: pynvml is required for this; install "
                                "it with `pip install ccbench_kit[gpu]`")


def test_the_bars_read_the_stored_verdict_and_star_the_named_gpu():
    """`report.plot` (the doctor_gpu notebook's figure): one bar a figure and
    reference a GPU, the ratios of the verdict stored with the results, the
    GPU it names starred; a file with no verdict draws empty bars."""
    import matplotlib
    matplotlib.use("Agg")
    ds = gpu_run({(1, "hbm_gbps"): 0.4})
    v = judge.judge(ds)
    ds.attrs["doctor_verdict"] = json.dumps(v.to_dict())
    ax = report.plot(ds)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["n1/gpu0", "n1/gpu1 *", "n1/gpu2"]
    assert len(ax.patches) == 3 * 2 * len(check.FIGURES)
    hbm = [p.get_height() for p in ax.patches[:3]]   # the first bars: hbm / preset
    assert list(check.FIGURES)[0] == "hbm_gbps"
    assert hbm == pytest.approx([v.scores["hbm_gbps"][f"n1/gpu{g}"]["preset"] for g in range(3)])
    assert hbm[1] == pytest.approx(0.4, rel=0.05)
    del ds.attrs["doctor_verdict"]
    ax = report.plot(ds)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["n1/gpu0", "n1/gpu1", "n1/gpu2"]
    assert all(np.isnan(p.get_height()) for p in ax.patches)
