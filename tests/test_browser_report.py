"""`ccbench report` end to end, then the HTML opened in headless Chromium:
every plot is an image that loaded, nothing is fetched from the network,
no console error.  A screenshot lands in tests/artifacts/ (git-ignored)."""
import contextlib
import os
import re
import shutil
from pathlib import Path

import pytest

from ccbench_kit.dataset import save
from ccbench_kit.theory.synthetic import synthetic_dataset

# slow: more than ~20 s in all, so the module starts first under `make test` (conftest)
pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
# docs/testing.md "Headless browser tests": no GPU, no sandbox (root), and every
# host name but localhost unresolvable, so nothing can leave the machine.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1"]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def launch_chromium(playwright):
    """Debian's chromium through playwright; never a downloaded browser."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium")
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


@contextlib.contextmanager
def browser_page(width, height):
    """(page, seen): a fresh Chromium page and what `watch` records on it."""
    from playwright.sync_api import sync_playwright
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page, watch(page)
        finally:
            browser.close()


def watch(page):
    """Console errors, uncaught page errors and off-machine requests of `page`."""
    seen = {"console": [], "page": [], "remote": []}
    page.on("console", lambda m: seen["console"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen["page"].append(str(e)))
    page.on("request", lambda r: seen["remote"].append(r.url)
            if not re.match(r"^(file|data|blob|about):|^https?://(127\.0\.0\.1|localhost)[:/]", r.url)
            else None)
    return seen


@pytest.fixture(scope="module")
def report(tmp_path_factory, cli_module):
    d = tmp_path_factory.mktemp("report")
    ar = synthetic_dataset("all_reduce", ["ring", "recursive_doubling", "mpi"], nranks=4, iters=15,
                           sizes=[8 << i for i in range(0, 25, 2)], straggler=2, warmup_iters=2,
                           alpha=3e-6, beta=1 / 6e9, gamma=1 / 40e9, seed=11)
    ag = synthetic_dataset("all_gather", ["ring", "bruck"], nranks=4, iters=15,
                           sizes=[32 << i for i in range(0, 23, 2)], seed=12)
    results = save({"all_reduce": ar, "all_gather": ag}, d / "synthetic.nc")
    base = save(synthetic_dataset("all_reduce", ["ring", "mpi"], nranks=4, iters=15,
                                  sizes=[8 << i for i in range(0, 25, 2)], beta=1 / 5e9, seed=13),
                d / "baseline.nc")
    html = d / "reports" / "synthetic.html"
    proc = cli_module("report", results, "--baseline", base, "--theory", "ib-hdr",
                      "--title", "Synthetic sweep", "-o", html, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == f"report: {html}"
    return html


@pytest.fixture(scope="module")
def cli_module():
    from conftest import run_cli
    return run_cli


def test_report_is_self_contained(report):
    text = report.read_text(encoding="utf-8")
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']https?:""", text)
    assert "cdnjs" not in text and "unpkg" not in text and "require.js" not in text
    # every plot is inline: 2 collectives × (busbw, winner, latency, heat map,
    # trace) + the baseline ratio for all_reduce
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', text)) == 11
    assert "<title>Synthetic sweep</title>" in text
    assert "α (µs/step)" in text and "1/β (GB/s)" in text and "γ (ns/B)" in text
    assert "% of ib-hdr" in text and "sizes fitted (down-weighted)" in text
    assert ("Crossovers (decided by 95 % bootstrap intervals, the winner clearly ahead on both "
            "sides): <strong>recursive_doubling → mpi</strong> at ≈ ") in text
    assert "R² (log)" in text and 'id="verdict"' in text and 'id="contents"' in text
    assert "rank 2" in text and "Stragglers by start skew" in text
    assert "injected-parameters" not in text and "ctx = rn.prepare" not in text  # code hidden


def test_report_opens_offline_with_every_plot_loaded(report):
    with browser_page(1200, 900) as (page, seen):
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        widths = page.evaluate("Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
        heading = page.locator("h1").first.inner_text()
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    assert len(widths) == 11 and min(widths) > 500, widths
    assert heading.strip().startswith("Synthetic sweep")
    assert seen == {"console": [], "page": [], "remote": []}
    shutil.copy(report, ARTIFACTS / "report.html")


def test_verdict_block_comes_first_and_shows(report):
    """An element screenshot of the verdict: at the top of the page, visible,
    with its text, and an image that is not blank."""
    import io

    from PIL import Image
    with browser_page(1200, 900) as (page, seen):
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        block = page.locator("section.ccb-verdict")
        visible = block.is_visible()
        box = block.bounding_box()
        text = block.inner_text()
        png = block.screenshot(path=str(ARTIFACTS / "verdict.png"))
        first_h2 = page.locator("h2").first.inner_text()
    assert visible and box["y"] < 250 and box["height"] > 150, box
    assert first_h2.startswith("Verdict")
    assert "Best busbw" in text and "% of the ib-hdr peak" in text and "What to distrust" in text
    assert ("Stragglers by start skew: rank 2 on synthetic (ring 13/13, recursive_doubling 13/13, "
            "mpi 13/13 sizes)") in text
    img = Image.open(io.BytesIO(png)).convert("RGB")
    assert img.size[0] > 800 and img.size[1] == pytest.approx(box["height"], abs=2)
    assert len(img.getcolors(1 << 20)) > 50   # text and colours, not a blank box
    assert seen == {"console": [], "page": [], "remote": []}
