"""Hardware presets: every required link, sources, user files, safe loading."""
import pytest

from ccbench_kit.errors import ConfigError
from ccbench_kit.theory import efficiency, preset
from ccbench_kit.theory.presets import available, load_file, measure_memcpy_gbps
from ccbench_kit.theory.synthetic import synthetic_dataset

REQUIRED = {"h100-nvlink4": 450, "h200-nvlink4": 450, "pcie-gen4": 31.5, "pcie-gen5": 63,
            "ib-hdr": 25, "ib-ndr": 50, "ib-xdr": 100, "efa-p4d": 6.25, "efa-p5": 50,
            "trn1": 384, "trn2": 1280}


def test_builtin_presets_have_peaks_and_sources(monkeypatch):
    monkeypatch.delenv("CCBENCH_PRESETS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent")
    got = available()
    for name, peak in REQUIRED.items():
        assert got[name].peak_gbps == peak
        assert got[name].source and got[name].scope
    assert got["cpu"].kind == "memcpy" and "measured" in got["cpu"].source


def test_aliases_and_case():
    assert preset("H100").name == "h100-nvlink4"
    assert preset("ib_ndr").name == "ib-ndr"
    assert preset("p5").peak_gbps == 50.0


def test_unknown_preset_lists_the_choices():
    with pytest.raises(ConfigError, match=r"^theory: unknown theory preset 'h900'; choose one of "
                                          r"h100-nvlink4, .*cpu"):
        preset("h900")


def test_cpu_preset_uses_the_runs_memcpy_or_measures():
    ds = synthetic_dataset("all_gather", ["ring"], nranks=3, iters=2,
                           extra_attrs={"memcpy_gbps": 12.5})
    p = preset("cpu", ds=ds)
    assert p.peak_gbps == 12.5 and "recorded by the run" in p.measured
    rate = measure_memcpy_gbps(8 << 20, repeats=2)
    assert 0.05 < rate < 1000


def test_user_file_adds_and_overrides(tmp_path, monkeypatch):
    user = tmp_path / "mine.toml"
    user.write_text('[lab-roce]\npeak_gbps = 12.5\nalpha_us = 4\nsource = "our switch"\n'
                    '[ib-ndr]\npeak_gbps = 45.0\nsource = "measured ib_write_bw"\n')
    monkeypatch.setenv("CCBENCH_PRESETS", str(user))
    assert preset("lab-roce").alpha == pytest.approx(4e-6)
    assert preset("ib-ndr").peak_gbps == 45.0
    monkeypatch.delenv("CCBENCH_PRESETS")
    assert preset(f"{user}#lab-roce").peak_gbps == 12.5
    y = tmp_path / "mine.yaml"
    y.write_text("lab-ib:\n  peak_gbps: 20\n  source: yaml\n")
    assert preset(f"{y}#lab-ib").peak_gbps == 20.0


@pytest.mark.parametrize("text,msg", [
    ('[x]\npeak_gbps = -1\n', "needs peak_gbps > 0"),
    ('[x]\npeak_gbps = 1\nbandwidth = 3\n', "unknown field"),
    ('[x\n', "cannot read presets"),
])
def test_bad_user_files(tmp_path, text, msg):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=msg):
        load_file(f)


def test_yaml_is_loaded_safely(tmp_path):
    f = tmp_path / "evil.yaml"
    f.write_text("x: !!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(ConfigError, match="cannot read presets"):
        load_file(f)


def test_efficiency_is_busbw_over_peak():
    ds = synthetic_dataset("all_gather", ["ring"], nranks=4, iters=3, noise=0.0)
    eff = efficiency(ds, "ib-hdr")
    bus = ds.ccb.busbw()
    assert float(eff.isel(size=-1)[0, 0]) == pytest.approx(float(bus.isel(size=-1)[0, 0]) / 25.0)
