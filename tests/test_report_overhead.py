"""The framework's overhead in the report and in ``ccbench compare``: a
torch run (eager and graph) against an nccl run of the same all_reduce,
as time ratios per size with bootstrap intervals.

The runs are built with known times: torch eager takes 4x the nccl loop's
time up to 4 KiB and 1.01x above, torch:graph 1.1x everywhere, every
iteration with 1 % noise; the ratios must come back within the noise."""
import re

import numpy as np
import pytest

from ccbench_kit.dataset import save
from ccbench_kit.dataset.schema import make_dataset
from ccbench_kit.report import analysis, overhead, page

SIZES = np.array([8, 1024, 4096, 1 << 20, 1 << 26])
BASE_US = np.array([10.0, 10.5, 11.0, 30.0, 400.0])
EAGER = np.where(SIZES <= 4096, 4.0, 1.01)


def _run(backend, algorithms, scales, seed, nccl="2.28.9"):
    rng = np.random.default_rng(seed)
    A, S, R, I = len(algorithms), len(SIZES), 4, 20
    t = BASE_US[None, :] * np.asarray(scales).reshape(A, S)
    lat = t[:, None, :, None, None] * rng.lognormal(0, 0.01, (A, 2, S, R, I))
    return make_dataset(
        algorithms=algorithms, placements=["out_of_place", "in_place"], sizes=SIZES,
        counts=SIZES // 4, in_bytes=SIZES, out_bytes=SIZES, latency=lat,
        wrong=np.zeros((A, 2, S)), ranks=range(R), hosts=["h"] * R,
        devices=[f"cuda:{r} NVIDIA H200" for r in range(R)],
        attrs={"collective": "all_reduce", "dtype": "fp32", "op": "sum", "root": -1, "nranks": R,
               "backend": backend, "timing": "cuda-events", "nccl_version": nccl})


@pytest.fixture(scope="module")
def runs():
    torch = _run("torch", ["torch", "torch:graph"], [EAGER, np.full(len(SIZES), 1.1)], 1,
                 nccl="2.27.5")
    nccl = _run("nccl", ["nccl"], [np.ones(len(SIZES))], 2)
    return torch, nccl


def test_time_ratios_against_the_baseline_and_between_algorithms(runs):
    torch, nccl = runs
    df = overhead.time_ratios(torch, nccl)
    assert sorted(set(df["pair"])) == ["torch / baseline nccl", "torch:graph / baseline nccl"]
    for pair, want in (("torch / baseline nccl", EAGER), ("torch:graph / baseline nccl", 1.1)):
        for placement in ("out_of_place", "in_place"):
            g = df[(df["pair"] == pair) & (df["placement"] == placement)]
            assert g["size"].tolist() == SIZES.tolist()
            assert np.allclose(g["ratio"], want, rtol=0.01)
            assert (g["lo"] < g["ratio"]).all() and (g["ratio"] < g["hi"]).all()
            assert np.allclose(g["time_ref"], BASE_US, rtol=0.02)  # the max of 4 ranks: +1 %
    small = df[(df["pair"] == "torch / baseline nccl") & (df["size"] <= 4096)]
    assert set(small["verdict"]) == {"slower"} and (small["lo"] > 3.9).all()
    inside = overhead.time_ratios(torch)   # graph against eager, in the run itself
    assert set(inside["pair"]) == {"torch:graph / torch"}
    assert np.allclose(inside.sort_values(["placement", "size"])["ratio"],
                       np.tile(1.1 / EAGER, 2), rtol=0.01)


def test_the_verdict_names_the_small_size_overhead_and_the_nccl_versions(runs):
    torch, nccl = runs
    findings, cautions = analysis.verdict(torch, baseline=nccl)
    line = next(f for f in findings if f.startswith("Time ratio to the baseline at ≤ 4 KiB"))
    got = re.findall(r"`(torch(?::graph)? / baseline nccl)` (out-of-place|in-place): "
                     r"\*\*([\d.]+)×\*\*(?: to \*\*([\d.]+)×\*\*)? \(95 % CIs within "
                     r"([\d.]+)–([\d.]+)×\) over 3 sizes", line)
    assert [(g[0], g[1]) for g in got] == [
        ("torch / baseline nccl", "out-of-place"), ("torch / baseline nccl", "in-place"),
        ("torch:graph / baseline nccl", "out-of-place"), ("torch:graph / baseline nccl", "in-place")]
    for pair, _, lo, hi, ci_lo, ci_hi in got:
        want = 4.0 if pair.startswith("torch /") else 1.1
        assert abs(float(lo) / want - 1) < 0.01 and abs(float(hi or lo) / want - 1) < 0.01
        assert float(ci_lo) < float(lo) and float(hi or lo) < float(ci_hi)
    assert ("Against the baseline: backends ran different NCCLs: 2.27.5 vs 2.28.9 (the "
            "baseline's), so the ratios include what changed between them.") in cautions
    # a page with a baseline, or two algorithms, has the section
    assert "overhead" in page.sections_of(True, True, 1)
    assert "overhead" in page.sections_of(False, True, 2)
    assert "overhead" not in page.sections_of(False, True, 1)


def test_the_section_shows_a_row_per_size(runs, monkeypatch):
    from ccbench_kit.report import collective
    shown = []   # what the cell would display, as HTML and Markdown text
    monkeypatch.setattr(collective, "_html", shown.append)
    monkeypatch.setattr(collective, "_md", shown.append)
    torch, nccl = runs
    collective._show_time_ratios(torch, nccl)
    out = "".join(shown)
    rows = re.findall(r"<tr><td>(torch[^<]*)</td><td>(out-of-place|in-place)</td><td>([^<]+)</td>",
                      out)
    assert len(rows) == 3 * 2 * len(SIZES)   # graph vs eager, eager vs nccl, graph vs nccl
    assert ("torch / baseline nccl", "in-place", "4 KiB") in rows


def test_compare_gives_the_ratio_at_small_sizes_with_its_interval(cli, runs, tmp_path):
    torch, nccl = runs
    save(torch, tmp_path / "torch.nc")
    save(nccl, tmp_path / "nccl.nc")
    p = cli("compare", tmp_path / "nccl.nc", tmp_path / "torch.nc", "--algorithm", "torch=nccl",
            "-e", "4K", "--csv", tmp_path / "c.csv")
    assert p.returncode == 0, p.stderr
    assert "backends differ: torch" in p.stderr   # said, not refused
    rows = [ln.split() for ln in p.stdout.splitlines() if ln.strip().endswith("slower")]
    assert [r[0] + r[1] for r in rows] == ["8B", "1KiB", "4KiB"] * 2
    for r in rows:   # busbw ratio torch / nccl: a quarter, its interval around it
        lo, hi = float(r[5].strip("[,")), float(r[6].strip("]"))
        assert abs(float(r[4]) - 0.25) < 0.003 and lo < float(r[4]) < hi
    assert "torch vs nccl" in (tmp_path / "c.csv").read_text()
