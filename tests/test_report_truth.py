"""End to end: an oversubscribed run says so in the console, its Dataset
and its report; a batch-timed file shows per-size times only; two renders
of the same files give the same verdict and summary, byte for byte; no
report holds a path of the machine that rendered it."""
import re
from pathlib import Path

import pytest

import ccbench_kit as ccb
from ccbench_kit.report import page

# more than ~20 s in all: the module starts first under `make test` (conftest)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BATCH = ROOT / "reports" / "nccl-h200x4" / "timing_batch.nc"


@pytest.fixture(scope="module")
def oversubscribed(tmp_path_factory):
    """3 ranks on this 2-core machine (the tests' machine; skipped where
    there are more cores, since nothing would be oversubscribed)."""
    from ccbench_kit.hostinfo import cpus_available
    from conftest import run_cli
    if len(cpus_available()) >= 3:
        pytest.skip(f"{len(cpus_available())} CPUs: 3 ranks are not oversubscribed here")
    out = tmp_path_factory.mktemp("over") / "over.nc"
    proc = run_cli("run", "all_reduce", "-r", 3, "-b", 8, "-e", "4K", "-f", 8, "-n", 8, "-w", 1,
                   "--algorithms", "ring,mpi", "--out", out, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out, proc


@pytest.fixture(scope="module")
def two_renders(oversubscribed, tmp_path_factory):
    from conftest import run_cli
    out, _ = oversubscribed
    pages = []
    for name in ("first", "second"):
        html = tmp_path_factory.mktemp(name) / "reports" / "truth.html"
        proc = run_cli("report", out, BATCH, "--title", "truth", "-o", html, timeout=400)
        assert proc.returncode == 0, proc.stderr
        pages.append(html.read_text(encoding="utf-8"))
    return pages


def test_oversubscribed_run_warns_and_records_it(oversubscribed):
    out, proc = oversubscribed
    assert re.search(r"ccbench: warning: oversubscribed \(\S+: 3 ranks on [12] CPUs\)", proc.stderr)
    assert "[all_reduce 1/" in proc.stderr
    a = ccb.load(out).ccb.attrs
    assert a["oversubscribed"] is True and a["nranks"] == 3
    assert sum(a["ranks_per_host"].values()) == 3
    assert max(a["cpus_available"].values()) < 3
    assert a["memcpy_gbps"] > 0.1 and a["memcpy_method"].startswith("numpy.copyto of 64 MiB")


def _section(text, start, end):
    i = text.index(start)
    return text[i:text.index(end, i)]


def test_two_renders_give_the_same_verdict_and_summary(two_renders):
    first, second = two_renders
    verdict = [_section(p, '<section class="ccb-verdict"', "</section>") for p in two_renders]
    summary = [_section(p, 'id="summary"', "</table>") for p in two_renders]
    assert verdict[0] == verdict[1] and summary[0] == summary[1]
    assert "95 % CI" in summary[0]


def test_report_flags_oversubscription_and_batch_timing(two_renders, oversubscribed):
    text = two_renders[0]
    verdict = _section(text, '<section class="ccb-verdict"', "</section>")
    assert "ran oversubscribed" in verdict and "<strong>Oversubscribed</strong>: " in verdict
    # the memcpy peak the run measured, with how
    assert "of the <code>cpu</code> peak" in verdict and "numpy.copyto of 64 MiB" in verdict
    over, batch = "over.nc:all_reduce", "timing_batch.nc:all_reduce"
    assert f'id="{page.anchor(over, "trace")}"' in text
    assert f'id="{page.anchor(over, "latency")}"' in text
    # batch timing: per-size times only
    assert f'id="{page.anchor(batch, "trace")}"' not in text
    assert f'id="{page.anchor(batch, "latency")}"' not in text
    assert "Per-iteration data doesn't exist" in verdict
    tables = text[text.index('id="tables-' + page.slug(batch)):]
    assert "time:p50" not in tables and "time:p99" not in tables


def test_no_path_of_the_rendering_machine_and_unique_anchors(two_renders, oversubscribed):
    out, _ = oversubscribed
    for text in two_renders:
        assert str(out.parent) not in text and "/tmp/" not in text
        assert str(ROOT) not in text
        ids = re.findall(r'\sid="([^"]+)"', text)
        assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
        assert 'href="#verdict"' in text and 'id="contents"' in text
