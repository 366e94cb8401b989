"""JupyterLab in headless Chromium: open explore.ipynb, run every cell, see
the Explorer render, change a dropdown and see the plot change, then start a
real sweep from the Run panel and see its progress bar finish and the new
run in the Explorer.  Screenshots land in tests/artifacts/."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ccbench_kit.dataset import save
from ccbench_kit.theory.synthetic import synthetic_dataset
from test_browser_report import ARTIFACTS, browser_page

# slow: more than ~20 s in all, so the module starts first under `make test` (conftest)
pytestmark = [pytest.mark.browser, pytest.mark.slow]
ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_MS = 90_000  # 2 shared cores: JupyterLab and a kernel take their time


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 with a token, every Jupyter directory
    private to the test (docs/testing.md), serving a copy of explore.ipynb and a
    results file where the notebook looks for one."""
    from jupyter_client.kernelspec import KernelSpecManager
    if "ccbench" not in KernelSpecManager().find_kernel_specs():
        pytest.fail("the ccbench Jupyter kernel is not registered: run `make kernel`")
    base = tmp_path_factory.mktemp("lab")
    root, home = base / "root", base / "home"
    # the repository's layout: notebooks/ beside results/
    (root / "results").mkdir(parents=True)
    (root / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "explore.ipynb", root / "notebooks" / "explore.ipynb")
    ar = synthetic_dataset("all_reduce", ["ring", "recursive_doubling", "mpi"], nranks=4, iters=10,
                           sizes=[8 << i for i in range(0, 23, 2)], seed=21)
    ag = synthetic_dataset("all_gather", ["ring", "bruck"], nranks=4, iters=10,
                           sizes=[32 << i for i in range(0, 21, 2)], seed=22)
    save({"all_reduce": ar, "all_gather": ag}, root / "results" / "demo.nc")
    env = dict(os.environ)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                 "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        (home / name).mkdir(parents=True)
        env[name] = str(home / name)
    env.pop("MPLBACKEND", None)  # the notebook's own inline backend, as for a user
    notes = home / "JUPYTERLAB_SETTINGS_DIR" / "@jupyterlab" / "apputils-extension"
    notes.mkdir(parents=True)
    (notes / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), "ccbench-test-token"
    cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--allow-root",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly", "--LabApp.expose_app_in_browser=True"]
    log = open(base / "server.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail("JupyterLab did not start:\n" + (base / "server.log").read_text()[-3000:])
            time.sleep(0.5)
        yield {"url": url, "token": token, "root": root}
    finally:
        # the server, its kernels and anything they started share one session
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


def _image_srcs(page):
    return page.evaluate(
        "Array.from(document.querySelectorAll('.ccb-explorer img')).map(i => i.src)")


def test_explore_notebook_runs_and_the_explorer_reacts(lab):
    with browser_page(1400, 1300) as (page, seen):
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{lab['url']}/lab/tree/notebooks/explore.ipynb?reset&token={lab['token']}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell")
        # the status bar says the kernel is idle only once it really is
        page.wait_for_function(
            "() => /Python \\(ccbench\\) \\| Idle/.test(document.body.innerText)")
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")

        # the Explorer renders, with both plots loaded
        page.wait_for_selector(".ccb-explorer")
        page.wait_for_function(
            "() => { const im = document.querySelectorAll('.ccb-explorer img');"
            " return im.length == 2 && Array.from(im).every(i => i.complete && i.naturalWidth > 0); }")
        assert "all_reduce, 4 ranks, fp32" in page.inner_text(".ccb-explorer")
        before = _image_srcs(page)
        selects = page.locator(".ccb-explorer .widget-dropdown select")
        assert selects.count() == 4  # collective, algorithm, dtype, statistic
        page.screenshot(path=str(ARTIFACTS / "explore.png"), full_page=True)

        # change the algorithm dropdown: both plots are drawn again
        selects.nth(1).select_option("ring")
        page.wait_for_function(
            "(old) => { const s = Array.from(document.querySelectorAll('.ccb-explorer img'))"
            ".map(i => i.src); return s.length == 2 && s[0] != old[0] && s[1] != old[1]; }",
            arg=before)
        page.wait_for_function("() => Array.from(document.querySelectorAll('.ccb-explorer img'))"
                               ".every(i => i.complete && i.naturalWidth > 0)")
        # the numbers under the plots follow (they are set after the images)
        page.wait_for_function(
            "() => { const t = document.querySelector('.ccb-explorer .ccb-numbers').innerText;"
            " return t.includes('ring') && !t.includes('recursive_doubling'); }")

        # and the collective dropdown switches the data
        selects.nth(0).select_option("all_gather")
        page.wait_for_function(
            "() => document.querySelector('.ccb-explorer').innerText.includes('all_gather, 4 ranks')")
        page.screenshot(path=str(ARTIFACTS / "explore-changed.png"), full_page=True)

        # the Run panel: a small real sweep (mpirun) from the browser
        panel = page.locator(".ccb-run-panel")
        panel.wait_for()
        for label, value in (("max size", "4K"), ("iterations", "3")):
            box = panel.locator(f".widget-inline-hbox:has-text('{label}') input")
            box.fill(value)
            box.press("Enter")
        panel.locator("button:has-text('Run sweep')").click()
        page.wait_for_function(
            "() => document.querySelector('.ccb-run-panel').innerText.includes('Done:')"
            " || document.querySelector('.ccb-run-panel').innerText.includes('Failed:')",
            timeout=240_000)
        status = page.inner_text(".ccb-run-panel")
        assert "Done: all_reduce, 5 sizes × 2 algorithms" in status, status
        assert panel.locator(".progress-bar-success").count() == 1
        page.wait_for_function(
            "() => document.querySelector('.ccb-explorer').innerText.includes('all_reduce, 3 ranks')")
        page.wait_for_function("() => Array.from(document.querySelectorAll('.ccb-explorer img'))"
                               ".every(i => i.complete && i.naturalWidth > 0)")
        page.locator(".ccb-explorer").screenshot(path=str(ARTIFACTS / "explorer-after-run.png"))
        panel.screenshot(path=str(ARTIFACTS / "run-panel.png"))
    assert seen["page"] == [] and seen["remote"] == []
    # JupyterLab logs some harmless 404s for optional settings; nothing else
    assert [m for m in seen["console"] if "404" not in m] == []
    assert (lab["root"] / "results" / "explore-run.nc").exists()
