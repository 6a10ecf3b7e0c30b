"""The live face in a real JupyterLab: a chapter runs, its explorer's controls move the figure.

Starts JupyterLab on 127.0.0.1 (a free port, a random token) over a temporary copy of one
small chapter, opens it in headless Debian chromium (Playwright), runs all cells with
``LLMVIZ_EXPLORER=live`` (so explorers show ipywidgets), then moves each slider of the
chapter's explorer with the arrow keys and checks that the plotly figure follows: its title
changes and names the slider's new value. Then it holds a key down (many presses in a row) and
checks that the figure ends on the slider's final value (the latest value wins).

The browser round trip of every update (key press to the new title on screen) goes to
``_build/live_latency.json`` with the machine's load average and is printed (median, max);
the test fails only past a generous bound (``MEDIAN_BOUND_S``). Runs with the other browser tests
(marker ``site``, xdist group ``site``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "_build"
CHROMIUM = os.environ.get("LLMVIZ_CHROMIUM", "/usr/bin/chromium")
CHAPTER = "07_rope.ipynb"  # small, and its explorer has three sliders whose values the title names
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
START_TIMEOUT_S = 60
RUN_TIMEOUT_MS = 120_000
UPDATE_TIMEOUT_MS = 15_000
HOLD_PRESSES = 8
#: Generous bound on the median browser round trip (target: 150 ms unloaded; see the end of
#: the test). Measured on a 2-core machine at load average 14-17: medians 0.4-1.05 s.
MEDIAN_BOUND_S = 2.0

pytestmark = [pytest.mark.site]
try:  # with `pytest -n 2 --dist loadgroup` it runs on the browser tests' worker
    import xdist  # noqa: F401
    pytestmark.append(pytest.mark.xdist_group("site"))
except ImportError:  # pragma: no cover - plain pytest
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a copy of the chapter; yields (base url, token)."""
    if importlib.util.find_spec("jupyterlab") is None:  # `jupyter` alone comes with jupyter-core
        pytest.fail("jupyterlab is not installed (pip install -e '.[test]' installs it)", pytrace=False)
    root = tmp_path_factory.mktemp("live")
    shutil.copy(ROOT / "notebooks" / CHAPTER, root / CHAPTER)
    home = tmp_path_factory.mktemp("lab-home")
    news = home / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)  # no "get notified about Jupyter news?" toast over the notebook
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "LLMVIZ_EXPLORER": "live", "OMP_NUM_THREADS": "1",
           "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "rt"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces")}
    env.pop("LLMVIZ_BUILD", None)
    log = open(home / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--ServerApp.port_retries=0", "--LabApp.news_url=", "--LabApp.check_for_updates_class="
         "jupyterlab.NeverCheckForUpdate"] + (["--allow-root"] if os.geteuid() == 0 else []),
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start; log:\n{(home / 'lab.log').read_text()[-3000:]}",
                                pytrace=False)
                time.sleep(0.3)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
        log.close()


def _close_dialogs(page, seen: list[str]) -> None:
    """Answer any JupyterLab dialog that is up (the kernel picker, a notice) with its default.

    Which dialogs JupyterLab raises at start depends on timing and on its version (a kernel
    picker when the session is slow to come up, first-run notices); any of them blocks the
    menu bar. Each one's text is kept in ``seen`` for the failure message.
    """
    for _ in range(5):
        dialog = page.query_selector(".jp-Dialog")
        if dialog is None or not dialog.is_visible():
            return
        seen.append(" ".join((dialog.text_content() or "").split())[:200])
        accept = dialog.query_selector(".jp-Dialog-button.jp-mod-accept")
        if accept is not None:
            accept.click()
        else:
            page.keyboard.press("Escape")
        page.wait_for_timeout(300)


_KERNEL_READY = """() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]
    .some(e => /ipykernel\\)? \\| Idle/.test(e.textContent))"""

_TITLE = """(out) => { const t = out.querySelector('.js-plotly-plot .gtitle');
                      return t ? t.textContent : null; }"""


#: What a reader sees of the figure: its traces' data, its title and every axis range (the
#: ranges plotly settles on, which a width-dependent constraint would change).
_SNAPSHOT = """(out) => { const gd = out.querySelector('.js-plotly-plot');
  if (!gd || !gd._fullLayout) { return null; }
  const f = gd._fullLayout, axes = {};
  Object.keys(f).filter(k => /^[xy]axis[0-9]*$/.test(k)).sort()
    .forEach(k => { axes[k] = (f[k].range || []).map(v => Math.round(v * 1e6) / 1e6); });
  return JSON.stringify({title: f.title && f.title.text, axes,
    data: gd.data.map(t => [t.x, t.y, t.z, t.x0, t.dx, t.mode])}); }"""


def test_live_explorer_follows_its_sliders(lab):
    from playwright.sync_api import sync_playwright

    base, token = lab
    errors: list[str] = []
    latencies: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route("**/*", lambda r: r.continue_() if urlparse(r.request.url).hostname
                   in ("127.0.0.1", None) or urlparse(r.request.url).scheme in ("data", "blob")
                   else r.abort())
        page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
        page.goto(f"{base}/lab/tree/{CHAPTER}?token={token}", timeout=RUN_TIMEOUT_MS)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=RUN_TIMEOUT_MS)
        # The status bar reads "No Kernel | Initializing" until the session is up, and a Run
        # All sent then is dropped (or raises the kernel picker): wait for "<kernel> | Idle".
        page.wait_for_function(_KERNEL_READY, timeout=RUN_TIMEOUT_MS)
        dialogs: list[str] = []
        for attempt in range(4):  # a click that lands before the UI is ready does nothing
            _close_dialogs(page, dialogs)
            try:  # a dialog may come up between the check and the click: answer it, try again
                page.click(".lm-MenuBar-itemLabel:text-is('Run')", timeout=UPDATE_TIMEOUT_MS)
                page.click(".lm-Menu-itemLabel:text-is('Run All Cells')",
                           timeout=UPDATE_TIMEOUT_MS)
            except Exception:  # noqa: BLE001 - the last attempt's failure shows below
                continue
            try:  # a cell got an execution prompt: [*] or [1]
                page.wait_for_selector(".jp-InputPrompt:text-matches('\\[[0-9*]+\\]')",
                                       timeout=15_000, state="attached")
                break
            except Exception:  # noqa: BLE001 - try again, then fail below
                page.keyboard.press("Escape")
        # The explorer is the chapter's last widget: wait for its figure inside its Output.
        try:
            page.wait_for_selector(".widget-output .js-plotly-plot .gtitle",
                                   timeout=RUN_TIMEOUT_MS, state="attached")
        except Exception:
            BUILD.mkdir(exist_ok=True)
            page.screenshot(path=str(BUILD / "live_failure.png"), full_page=True)
            print("JupyterLab dialogs seen:", dialogs)
            raise
        box = page.query_selector_all(".widget-vbox")[-1]
        output = box.query_selector(".widget-output")
        sliders = box.query_selector_all(".widget-slider")
        assert len(sliders) == 3, f"expected the RoPE explorer's 3 sliders, got {len(sliders)}"

        def title() -> str:
            return output.evaluate(_TITLE)

        def press(slider, key: str) -> tuple[str, str]:
            before = title()
            slider.query_selector(".noUi-handle").focus()
            start = time.perf_counter()
            page.keyboard.press(key)
            page.wait_for_function(f"([o, b]) => ({_TITLE})(o) !== b", arg=[output, before],
                                   timeout=UPDATE_TIMEOUT_MS, polling="raf")
            latencies.append(time.perf_counter() - start)
            return title(), slider.query_selector(".widget-readout").text_content().strip()

        problems = []
        for k, slider in enumerate(sliders):
            first = output.evaluate(_SNAPSHOT)
            for key in ("ArrowRight", "ArrowLeft"):
                text, value = press(slider, key)
                if value not in text:
                    problems.append(f"slider {k} at {value}: figure title {text!r}")
            page.wait_for_timeout(300)  # nothing stale may land afterwards
            back = output.evaluate(_SNAPSHOT)
            if back != first:  # away and back (the RoPE base: 10000 -> 100000 -> 10000)
                problems.append(f"slider {k}: after sliding away and back the figure differs "
                                f"from the one first shown:\n{first}\n{back}")
        # A held key: many presses while updates run; the figure must end on the last value.
        slider = sliders[1]
        handle = slider.query_selector(".noUi-handle")
        handle.focus()
        for _ in range(HOLD_PRESSES):
            page.keyboard.press("ArrowRight")
            page.wait_for_timeout(30)
        value = slider.query_selector(".widget-readout").text_content().strip()
        try:
            page.wait_for_function(f"([o, v]) => (({_TITLE})(o) || '').includes('m=' + v + ':')",
                                   arg=[output, value], timeout=UPDATE_TIMEOUT_MS)
        except Exception:  # noqa: BLE001 - reported below
            problems.append(f"after {HOLD_PRESSES} presses the slider reads {value} but the "
                            f"figure shows {title()!r}")
        page.wait_for_timeout(1000)  # nothing stale may land afterwards
        if value not in (title() or ""):
            problems.append(f"a stale figure landed after the held key: {title()!r} at {value}")
        browser.close()
    report = {"chapter": CHAPTER, "updates": len(latencies),
              "load_average_1min": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
              "median_ms": round(statistics.median(latencies) * 1000, 1),
              "max_ms": round(max(latencies) * 1000, 1),
              "all_ms": [round(x * 1000, 1) for x in latencies]}
    BUILD.mkdir(exist_ok=True)
    (BUILD / "live_latency.json").write_text(json.dumps(report, indent=2))
    print(f"\nlive explorer ({CHAPTER}) in JupyterLab: {report['updates']} updates, "
          f"median {report['median_ms']} ms, max {report['max_ms']} ms "
          f"(load average {report['load_average_1min']} on {report['cpus']} CPUs)")
    # The target is a median under 150 ms on an unloaded machine; a shared CI runner (or a
    # developer machine running other kernels) can be several times slower, so the test only
    # fails on an update that is clearly stuck or queued (the numbers above are the record).
    if statistics.median(latencies) > MEDIAN_BOUND_S:
        problems.append(f"median update {report['median_ms']} ms is over the "
                        f"{MEDIAN_BOUND_S * 1000:.0f} ms bound (all: {report['all_ms']})")
    assert not problems + errors, "\n".join(problems + errors)
