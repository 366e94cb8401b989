"""The Explorer and the Run panel, headless: set a widget's value, check what
its observers did (the browser test checks the same in JupyterLab)."""
import re

import pytest

pytest.importorskip("ipywidgets")

from ccbench_kit.theory.synthetic import synthetic_dataset  # noqa: E402
from ccbench_kit.widgets import Explorer, RunPanel  # noqa: E402


@pytest.fixture(scope="module")
def data():
    ar = synthetic_dataset("all_reduce", ["ring", "recursive_doubling", "mpi"], nranks=3, iters=6,
                           sizes=[8 << i for i in range(0, 21, 2)], seed=1)
    ag = synthetic_dataset("all_gather", ["ring", "bruck"], nranks=3, iters=6,
                           sizes=[24 << i for i in range(0, 21, 2)], seed=2)
    ag16 = synthetic_dataset("all_gather", ["ring"], nranks=3, iters=6, dtype="bf16",
                             sizes=[24 << i for i in range(0, 21, 2)], seed=3)
    return {"all_reduce": ar, "all_gather": ag, "all_gather bf16": ag16}


def _png(value):
    assert value[:8] == b"\x89PNG\r\n\x1a\n"
    return value


def test_controls_follow_the_data(data):
    ex = Explorer(data, preset="ib-ndr")
    assert ex.collective.options == ("all_reduce", "all_gather")
    assert ex.algorithm.options == ("all algorithms", "ring", "recursive_doubling", "mpi")
    assert ex.dtype.options == ("fp32",)
    assert [v for _, v in ex.size.options] == [8 << i for i in range(0, 21, 2)]
    assert "all_reduce, 3 ranks, fp32" in ex.title.value
    _png(ex.busbw_image.value)
    _png(ex.detail_image.value)
    ex.collective.value = "all_gather"
    assert ex.dtype.options == ("fp32", "bf16")
    assert ex.algorithm.options == ("all algorithms", "ring", "bruck")
    ex.dtype.value = "bf16"
    assert ex.dataset is data["all_gather bf16"]
    assert ex.algorithm.options == ("all algorithms", "ring")


def test_changing_a_control_redraws(data):
    ex = Explorer(data, preset="none")
    before, detail = ex.busbw_image.value, ex.detail_image.value
    ex.algorithm.value = "ring"
    assert ex.busbw_image.value != before and ex.detail_image.value != detail
    rows = re.findall(r"<tr><td[^>]*>(\w+)</td>", ex.numbers.value)
    assert rows == ["ring"]
    before = ex.busbw_image.value
    ex.stat.value = "p99"
    assert ex.busbw_image.value != before and "time p99 (µs)" in ex.numbers.value


def test_size_slider_moves_the_marker_and_numbers(data):
    ex = Explorer({"all_reduce": data["all_reduce"]}, preset="none")
    ex.algorithm.value = "ring"
    ex.size.value = 8 << 10
    ds = data["all_reduce"]
    t = float(ds.ccb.time("avg").sel(algorithm="ring", placement="out_of_place", size=8 << 10))
    bw = float(ds.ccb.busbw("avg").sel(algorithm="ring", placement="out_of_place", size=8 << 10))
    assert "at 8 KiB" in ex.numbers.value
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", ex.numbers.value)
    assert cells[:3] == ["ring", f"{t:.4g}", f"{bw:.4g}"]
    detail = ex.detail_image.value
    ex.size.value = 8 << 20
    assert ex.detail_image.value != detail and "at 8 MiB" in ex.numbers.value


def test_add_selects_the_new_run(data):
    ex = Explorer({"all_reduce": data["all_reduce"]}, preset="none")
    ex.add(data["all_gather"], label="fresh")
    assert ex.collective.value == "all_gather" and ex.dataset is data["all_gather"]
    empty = Explorer(preset="none")
    assert "no results yet" in empty.title.value and empty.dataset is None


def test_run_panel_runs_a_real_sweep_into_the_explorer(tmp_path):
    ex = Explorer(preset="none")
    out = tmp_path / "run.nc"
    panel = RunPanel(explorer=ex, out=str(out), collective="all_gather", nranks=3,
                     minbytes="24", maxbytes="24K", stepfactor=16, iters=3, warmup=1)
    panel.algorithms.value = ("ring", "mpi")
    assert panel.options()["algorithms"] == ["ring", "mpi"]
    events = []
    panel.on_progress = (lambda f: (lambda ev: (events.append(ev), f(ev))))(panel.on_progress)
    panel.start()
    ds = panel.wait(timeout=240)
    assert ds is not None, panel.status.value
    assert [int(s) for s in ds["size"].values] == [24, 384, 6144]
    assert [e["index"] for e in events if e.get("event") == "size"] == [0, 1, 2]
    assert (panel.progress.value, panel.progress.max, panel.progress.bar_style) == (3, 3, "success")
    assert panel.status.value.startswith("Done: all_gather, 3 sizes × 2 algorithms")
    assert int(ds["wrong"].max()) == 0 and out.exists()
    assert ex.dataset is ds and ex.collective.value == "all_gather"
    assert not panel.button.disabled


def test_run_panel_reports_a_bad_size_without_raising():
    panel = RunPanel(collective="all_reduce", nranks=2, minbytes="8", maxbytes="lots")
    panel.start()
    with pytest.raises(Exception, match="cannot read size 'lots'"):
        panel.wait(timeout=60)
    assert "Failed: -e/--maxbytes: cannot read size 'lots'" in panel.status.value
    assert panel.progress.bar_style == "danger" and not panel.button.disabled
