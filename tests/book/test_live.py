"""The live face in a real JupyterLab: a chapter runs, its explorer's controls move the figure.

Each test starts its own JupyterLab on 127.0.0.1 (a free port, a random token, a fresh
workspace) over temporary copies of the notebooks, opens its notebook in headless Debian
chromium (Playwright) and, once that notebook's kernel is idle, runs all its cells with
``LLMVIZ_EXPLORER=live`` (so explorers show ipywidgets) through JupyterLab's own command aimed
at that notebook's panel. Then the first test moves each slider of the chapter's explorer
with the arrow keys and checks that the plotly figure follows: its title changes and names the
slider's new value. Then it holds a key down (many presses in a row) and
checks that the figure ends on the slider's final value (the latest value wins).

The browser round trip of every update (key press to the new title on screen) goes to
``_build/live_latency.json`` with the machine's load average and is printed (median, max);
the test fails only past a generous bound (``MEDIAN_BOUND_S``).

A second test runs the gallery (``notebooks/00_demo_gallery.ipynb``) the same way and drives
every control of every explorer in it (sliders with the arrow keys, dropdowns by choosing an
option): each move must redraw the figure, moving back must give the figure first shown again
(the RoPE base: 10000 -> 100000 -> 10000), and a burst of moves away and back, faster than the
updates, must end on that same figure (only the latest value is drawn). Its round trips go to
``_build/live_latency_gallery.json``; the median must be under ``GALLERY_MEDIAN_MS`` (150 ms)
on a machine that is not overloaded (1-minute load average below its CPU count), and under
``MEDIAN_BOUND_S`` otherwise (the file says which bound applied).

Both run with the other browser tests (marker ``site``, xdist group ``site``).
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
GALLERY = "00_demo_gallery.ipynb"  # every explorer of the package
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
START_TIMEOUT_S = 60
RUN_TIMEOUT_MS = 120_000
UPDATE_TIMEOUT_MS = 15_000
HOLD_PRESSES = 8
#: Generous bound on the median browser round trip (target: 150 ms unloaded; see the end of
#: the test). Measured on a 2-core machine at load average 14-17: medians 0.4-1.05 s.
MEDIAN_BOUND_S = 2.0
#: The gallery's target median round trip (ms), asserted when the machine is not overloaded.
GALLERY_MEDIAN_MS = 150.0
GALLERY_RUN_TIMEOUT_MS = 600_000
BURST = 6  # presses away and back in a burst, CLICK_GAP_MS apart (faster than an update)
BURST_GAP_MS = 30

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


@pytest.fixture
def lab(tmp_path_factory):
    """A JupyterLab of its own for each test, serving copies of the notebooks; yields (base url,
    token). Not shared between tests: a second page on the same server restores the first
    test's workspace (its notebook open beside the new one, its kernel alive, its autosaved
    execution prompts), which is how the gallery once opened with no cell run."""
    if importlib.util.find_spec("jupyterlab") is None:  # `jupyter` alone comes with jupyter-core
        pytest.fail("jupyterlab is not installed (pip install -e '.[test]' installs it)", pytrace=False)
    root = tmp_path_factory.mktemp("live")
    for name in (CHAPTER, GALLERY):
        shutil.copy(ROOT / "notebooks" / name, root / name)
    home = tmp_path_factory.mktemp("lab-home")
    news = home / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)  # no "get notified about Jupyter news?" toast over the notebook
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)  # every cell's output stays in the page (no windowing)
    (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
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
         "jupyterlab.NeverCheckForUpdate", "--LabApp.expose_app_in_browser=True"] + (["--allow-root"] if os.geteuid() == 0 else []),
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


#: The notebook panel open on ``path`` once JupyterLab has started and restored its layout,
#: its document loaded and its kernel connected and idle; returns the panel's id, or null
#: while that is not so (polled by ``wait_for_function``).
_PANEL_READY = """(path) => { const app = window.jupyterapp;
  if (!app || !app.shell) { return null; }
  const panels = [...app.shell.widgets('main')].filter(w => w.context && w.context.path === path);
  if (panels.length !== 1) { return null; }
  const panel = panels[0], ctx = panel.sessionContext;
  if (!panel.context.isReady || !ctx || !ctx.isReady || !ctx.session || !ctx.session.kernel) {
    return null; }
  return ctx.session.kernel.status === 'idle' && ctx.session.kernel.connectionStatus === 'connected'
    ? panel.id : null; }"""

#: Run All on exactly that panel, through JupyterLab's own command with the panel named (not the
#: menu, which acts on whatever document is current). Errors are kept for the failure message.
_RUN_ALL = """(id) => { const app = window.jupyterapp;
  window.__llmvizRunAll = 'sent';
  app.shell.activateById(id);
  app.commands.execute('notebook:run-all-cells', {widgetId: id, activate: true})
    .then(() => { window.__llmvizRunAll = 'done'; },
          (err) => { window.__llmvizRunAll = 'failed: ' + err; }); }"""

#: Code cells of the panel and how many have an execution prompt ([*] or [n]).
_PROMPTS = """(id) => { const panel = document.getElementById(id);
  const prompts = panel ? [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')] : [];
  return [prompts.length, prompts.filter(p => /\\[[0-9*]+\\]/.test(p.textContent)).length]; }"""


def _open_and_run_all(p, base: str, token: str, name: str, errors: list[str]):
    """A browser page with notebook ``name`` open in JupyterLab and all its cells sent to its
    kernel; returns ``(browser, page, dialogs seen)``. Requests may only go to the local server.

    Run All goes through ``window.jupyterapp`` (the lab runs with ``expose_app_in_browser``):
    the command names the notebook's own panel, and is sent only once that panel's kernel is
    connected and idle; the run counts as started only when a code cell *of that panel* shows
    an execution prompt.
    """
    browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.route("**/*", lambda r: r.continue_() if urlparse(r.request.url).hostname
               in ("127.0.0.1", None) or urlparse(r.request.url).scheme in ("data", "blob")
               else r.abort())
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    page.goto(f"{base}/lab/tree/{name}?token={token}", timeout=RUN_TIMEOUT_MS)
    dialogs: list[str] = []
    deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000
    panel = None
    while panel is None:  # a kernel picker or a notice may come up while the kernel starts
        _close_dialogs(page, dialogs)
        panel = page.evaluate(_PANEL_READY, name)
        if panel is None:
            if time.monotonic() > deadline:
                _fail_with_shot(page, name, f"the notebook's kernel was not ready after "
                                f"{RUN_TIMEOUT_MS / 1000:.0f} s", dialogs)
            page.wait_for_timeout(250)
    _close_dialogs(page, dialogs)
    page.evaluate(_RUN_ALL, panel)
    try:  # the run reached this notebook: one of its code cells shows [*] or [n]
        page.wait_for_function(f"id => ({_PROMPTS})(id)[1] > 0", arg=panel,
                               timeout=UPDATE_TIMEOUT_MS * 2)
    except Exception:  # noqa: BLE001 - the failure says what the page shows
        _fail_with_shot(page, name, "Run All did not start any cell of the notebook "
                        f"(command: {page.evaluate('window.__llmvizRunAll')!r}, prompts "
                        f"[cells, executed]: {page.evaluate(_PROMPTS, panel)})", dialogs)
    return browser, page, dialogs


def _fail_with_shot(page, name: str, message: str, dialogs: list[str]) -> None:
    BUILD.mkdir(exist_ok=True)
    shot = BUILD / f"live_failure_{Path(name).stem}.png"
    page.screenshot(path=str(shot), full_page=True)
    pytest.fail(f"{name}: {message}; JupyterLab dialogs seen: {dialogs}; screenshot: {shot}",
                pytrace=False)


def test_live_explorer_follows_its_sliders(lab):
    from playwright.sync_api import sync_playwright

    base, token = lab
    errors: list[str] = []
    latencies: list[float] = []
    with sync_playwright() as p:
        browser, page, dialogs = _open_and_run_all(p, base, token, CHAPTER, errors)
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


# ----------------------------------------------------------------------------- the gallery
#: Remember the figure an explorer's output shows now (its element and its data array).
_MARK = """(out) => { const gd = out.querySelector('.js-plotly-plot');
  window.__llmvizPrev = gd ? [gd, gd.data] : [null, null]; }"""
#: True once the output shows another, fully drawn figure than the one remembered.
_REDRAWN = """(out) => { const gd = out.querySelector('.js-plotly-plot');
  const [g, d] = window.__llmvizPrev || [null, null];
  return !!(gd && gd._fullLayout && gd.querySelector('.main-svg') && (gd !== g || gd.data !== d)); }"""
#: Explorer boxes: a VBox of the controls' HBox and the figure's Output.
_BOXES = ".widget-vbox:has(> .widget-output)"


def _explorer_cells(notebook: Path) -> list[str]:
    """The gallery's code cells that show an explorer (their last line calls ``*_explorer(``)."""
    import re

    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    out = []
    for cell in cells:
        lines = [ln for ln in "".join(cell["source"]).splitlines() if ln.strip()]
        if cell["cell_type"] == "code" and lines and re.match(r"\w+_explorer\(", lines[-1]):
            out.append(lines[-1])
    return out


def test_live_gallery_every_control_follows(lab):
    """Every control of every explorer in the gallery, in JupyterLab's live face."""
    from playwright.sync_api import sync_playwright

    base, token = lab
    expected = _explorer_cells(ROOT / "notebooks" / GALLERY)
    assert len(expected) >= 15, f"the gallery shows only {len(expected)} explorers"
    errors: list[str] = []
    problems: list[str] = []
    latencies: list[float] = []
    controls = 0
    with sync_playwright() as p:
        browser, page, dialogs = _open_and_run_all(p, base, token, GALLERY, errors)
        try:  # every explorer drawn: as many boxes with a figure as explorer cells
            page.wait_for_function(
                f"n => [...document.querySelectorAll('{_BOXES}')]"
                ".filter(b => b.querySelector('.js-plotly-plot .main-svg')).length >= n",
                arg=len(expected), timeout=GALLERY_RUN_TIMEOUT_MS, polling=1000)
        except Exception:
            BUILD.mkdir(exist_ok=True)
            page.screenshot(path=str(BUILD / "live_gallery_failure.png"), full_page=True)
            print("JupyterLab dialogs seen:", dialogs)
            raise
        boxes = page.query_selector_all(_BOXES)
        assert len(boxes) == len(expected), f"{len(boxes)} explorer boxes for {expected}"

        def redraw(out, act) -> bool:
            """Do ``act`` and wait for the output to show a new figure; time the round trip."""
            out.evaluate(_MARK)
            start = time.perf_counter()
            act()
            try:
                page.wait_for_function(_REDRAWN, arg=out, timeout=UPDATE_TIMEOUT_MS,
                                       polling="raf")
            except Exception:  # noqa: BLE001 - reported by the caller
                return False
            latencies.append(time.perf_counter() - start)
            return True

        def settled(out, want: str) -> bool:
            """The output ends on the figure ``want`` and stays there (nothing stale lands)."""
            try:
                page.wait_for_function(f"([o, w]) => ({_SNAPSHOT})(o) === w", arg=[out, want],
                                       timeout=UPDATE_TIMEOUT_MS, polling=100)
            except Exception:  # noqa: BLE001 - reported by the caller
                return False
            page.wait_for_timeout(500)
            return out.evaluate(_SNAPSHOT) == want

        for b, (box, call) in enumerate(zip(boxes, expected)):
            box.scroll_into_view_if_needed()
            out = box.query_selector(":scope > .widget-output")
            items = box.query_selector_all(":scope > .widget-hbox > .widget-slider, "
                                           ":scope > .widget-hbox > .widget-dropdown")
            if not items:
                problems.append(f"{call}: no control found")
            for k, item in enumerate(items):
                controls += 1
                label = (item.query_selector(".widget-label") or item).text_content().strip()
                where = f"{call} control {k} ({label!r})"
                first = out.evaluate(_SNAPSHOT)
                select = item.query_selector("select")
                if select is not None:  # a dropdown: another option, then the first again
                    now = select.input_value()
                    options = select.evaluate("s => [...s.options].map(o => o.value)")
                    other = options[(options.index(now) + 1) % len(options)]

                    def away(select=select, other=other):
                        select.select_option(other)

                    def back(select=select, now=now):
                        select.select_option(now)
                else:  # a slider: one arrow-key step, towards the side that has room
                    handle = item.query_selector(".noUi-handle")
                    at, top = (float(handle.get_attribute(a) or 0)
                               for a in ("aria-valuenow", "aria-valuemax"))
                    keys = ("ArrowRight", "ArrowLeft") if at < top else ("ArrowLeft", "ArrowRight")

                    def away(handle=handle, key=keys[0]):
                        handle.focus()
                        page.keyboard.press(key)

                    def back(handle=handle, key=keys[1]):
                        handle.focus()
                        page.keyboard.press(key)
                if not redraw(out, away):
                    problems.append(f"{where}: moving it did not redraw the figure "
                                    f"({(out.text_content() or '')[:200]!r})")
                    continue
                page.wait_for_timeout(300)
                if out.evaluate(_SNAPSHOT) == first:
                    problems.append(f"{where}: moving it redrew the same figure")
                if not redraw(out, back):
                    problems.append(f"{where}: moving it back did not redraw the figure")
                    continue
                if not settled(out, first):
                    problems.append(f"{where}: after moving away and back the figure is not "
                                    "the one first shown")
                    continue
                for i in range(BURST):  # away, back, away, back...: ends where it started
                    (away if i % 2 == 0 else back)()
                    page.wait_for_timeout(BURST_GAP_MS)
                if not settled(out, first):
                    problems.append(f"{where}: after a burst of {BURST} moves away and back the "
                                    "figure is not the one for the control's value (stale)")
        browser.close()
    assert latencies, "no update was timed"
    median_ms = statistics.median(latencies) * 1000
    load = os.getloadavg()[0]
    busy = load >= (os.cpu_count() or 1)
    bound_ms = MEDIAN_BOUND_S * 1000 if busy else GALLERY_MEDIAN_MS
    report = {"notebook": GALLERY, "explorers": len(expected), "controls": controls,
              "updates": len(latencies), "load_average_1min": round(load, 2),
              "cpus": os.cpu_count(), "median_ms": round(median_ms, 1),
              "max_ms": round(max(latencies) * 1000, 1), "bound_ms": bound_ms,
              "bound_reason": "machine overloaded (load >= CPUs)" if busy else "target",
              "all_ms": [round(x * 1000, 1) for x in latencies]}
    BUILD.mkdir(exist_ok=True)
    (BUILD / "live_latency_gallery.json").write_text(json.dumps(report, indent=2))
    print(f"\nlive gallery in JupyterLab: {controls} controls of {len(expected)} explorers, "
          f"{len(latencies)} updates, median {report['median_ms']} ms, max {report['max_ms']} ms "
          f"(load average {report['load_average_1min']} on {report['cpus']} CPUs; "
          f"bound {bound_ms:.0f} ms)")
    if median_ms > bound_ms:
        problems.append(f"median update {median_ms:.0f} ms is over {bound_ms:.0f} ms "
                        f"({report['bound_reason']})")
    assert not problems + errors, "\n".join(problems + errors)
