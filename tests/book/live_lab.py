"""A JupyterLab of a test's own, and a notebook run in it that says what the page shows.

Used by ``test_live.py``. Every wait here is bounded, and a run fails as soon as it cannot
succeed any more (a cell raised, so Run All stopped there; the kernel died, restarted or lost
its connection; no cell finished for a while), with a message that says what the page shows:
the Run All command's outcome, how many code cells ran, each error (cell, exception, message),
the kernel's status history, JupyterLab's dialogs, the browser console and the end of the
server log, and a screenshot.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "_build"
CHROMIUM = os.environ.get("LLMVIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
START_TIMEOUT_S = 60
#: Opening the notebook until its kernel is connected and idle.
OPEN_TIMEOUT_MS = 120_000
#: Run All sent until a code cell of the notebook shows [*] or [n].
START_RUN_TIMEOUT_MS = 30_000
#: After Run All has finished, how long its last outputs (widgets, figures) may take to show.
SETTLE_MS = 30_000
#: How long a failed run's state may take to settle after the error shows (queued cells unmarked).
ERROR_SETTLE_MS = 5_000
#: Any other Playwright call (a click, a key press, reading an element).
ACTION_TIMEOUT_MS = 30_000
#: How long the kernel's connection may be down (JupyterLab reconnects it) before a run fails.
RECONNECT_S = 30


@dataclass
class Lab:
    """A running JupyterLab: its address, token, server log and the environment it gave kernels."""

    base: str
    token: str
    log: Path
    env: dict = field(repr=False)

    def log_tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(line[:300] for line in text[-lines:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kernel_env(root: Path, home: Path) -> dict:
    """The environment of the lab, which its kernels inherit: this checkout first on the path.

    The kernel must run the llmviz under test. Left to whatever is installed, it imports an
    editable install of another checkout (testing other code) or, when that install points
    at a folder that is gone or ``PYTHONPATH`` is relative (the kernel's working directory is
    the notebooks' temporary folder), nothing at all: the notebook's ``import llmviz`` cell
    raises ``ModuleNotFoundError`` and Run All stops there, every later cell left ``[ ]``.
    """
    env = {**os.environ, "LLMVIZ_EXPLORER": "live", "OMP_NUM_THREADS": "1",
           "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "rt"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces")}
    env.pop("LLMVIZ_BUILD", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    found = subprocess.run(  # where the kernel (same Python, environment and folder) finds it
        [sys.executable, "-c", "import importlib.util as u; s = u.find_spec('llmviz'); "
         "print(s.origin if s else '')"], cwd=root, env=env, capture_output=True, text=True,
        timeout=60).stdout.strip()
    if not found or Path(found).resolve() != (ROOT / "llmviz" / "__init__.py").resolve():
        pytest.fail(f"a kernel started by the lab would import llmviz from {found or 'nowhere'}, "
                    f"not from this checkout ({ROOT})", pytrace=False)
    return env


def start_lab(root: Path, home: Path):
    """Start JupyterLab over ``root`` with settings, runtime and workspaces under ``home``;
    a generator yielding a :class:`Lab`, which stops the server when closed."""
    news = home / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)  # no "get notified about Jupyter news?" toast over the notebook
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)  # every cell's output stays in the page (no windowing)
    (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    port, token = _free_port(), secrets.token_hex(16)
    env = kernel_env(root, home)
    log_path = home / "lab.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--ServerApp.port_retries=0", "--LabApp.news_url=", "--LabApp.check_for_updates_class="
         "jupyterlab.NeverCheckForUpdate", "--LabApp.expose_app_in_browser=True"]
        + (["--allow-root"] if os.geteuid() == 0 else []),
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    lab = Lab(f"http://127.0.0.1:{port}", token, log_path, env)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(f"{lab.base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start; log:\n{lab.log_tail(40)}",
                                pytrace=False)
                time.sleep(0.3)
        yield lab
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait(10)
        log.close()


#: The notebook panel open on ``path`` once JupyterLab has started and restored its layout,
#: its document loaded and its kernel connected and idle; returns the panel's id, or null
#: while that is not so. Once ready, the kernel's status changes are logged from then on.
_PANEL_READY = """(path) => { const app = window.jupyterapp;
  if (!app || !app.shell) { return null; }
  const panels = [...app.shell.widgets('main')].filter(w => w.context && w.context.path === path);
  if (panels.length !== 1) { return null; }
  const panel = panels[0], ctx = panel.sessionContext;
  if (!panel.context.isReady || !ctx || !ctx.isReady || !ctx.session || !ctx.session.kernel) {
    return null; }
  const kernel = ctx.session.kernel;
  if (kernel.status !== 'idle' || kernel.connectionStatus !== 'connected') { return null; }
  if (!window.__llmvizKernelLog) {
    const log = window.__llmvizKernelLog = [], t0 = performance.now();
    const add = (what) => { const t = ((performance.now() - t0) / 1000).toFixed(1);
      const last = log[log.length - 1];
      if (last && last.what === what) { last.n += 1; last.t = t; } else { log.push({t, what, n: 1}); }
      if (log.length > 40) { log.splice(0, log.length - 40); } };
    add('kernel ' + kernel.id + ' idle, connected');
    ctx.statusChanged.connect((_, s) => add(s));
    ctx.connectionStatusChanged.connect((_, s) => add('connection ' + s));
    ctx.kernelChanged.connect((_, c) => add('kernel changed to ' + (c.newValue ? c.newValue.id : 'none')));
  }
  return panel.id; }"""

#: Run All on exactly that panel, through JupyterLab's own command with the panel named (not the
#: menu, which acts on whatever document is current). Its outcome is kept for the checks.
_RUN_ALL = """(id) => { const app = window.jupyterapp;
  window.__llmvizRunAll = 'sent';
  app.shell.activateById(id);
  app.commands.execute('notebook:run-all-cells', {widgetId: id, activate: true})
    .then((ok) => { window.__llmvizRunAll = 'finished, ' + (ok ? 'every cell ok' : 'not every cell ok'); },
          (err) => { window.__llmvizRunAll = 'failed: ' + err; }); }"""

#: What the notebook shows: its code cells (run, running), the errors in their outputs (cell
#: number as JupyterLab's status bar counts, exception, message), the kernel's state and log.
_RUN_STATE = """(id) => { const app = window.jupyterapp;
  const panel = app ? [...app.shell.widgets('main')].find(w => w.id === id) : null;
  if (!panel) { return {gone: true}; }
  const all = panel.content.widgets, cells = all.filter(c => c.model.type === 'code');
  const errors = [];
  let executed = 0, running = 0, outputs = 0;
  for (const c of cells) {
    const m = c.model;
    if (m.executionState === 'running') { running += 1; } else if (m.executionCount) { executed += 1; }
    outputs += m.outputs.length;
    for (let k = 0; k < m.outputs.length; k++) {
      const o = m.outputs.get(k).toJSON();
      if (o.output_type === 'error') {
        errors.push(`cell ${all.indexOf(c) + 1}/${all.length}: ${o.ename}: ${String(o.evalue).slice(0, 300)}`); } } }
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {cells: cells.length, executed, running, outputs, errors,
          command: window.__llmvizRunAll || 'not sent',
          kernel: kernel ? kernel.status + ', ' + kernel.connectionStatus : 'no kernel',
          log: (window.__llmvizKernelLog || []).map(e => `${e.t}s ${e.what}` + (e.n > 1 ? ` x${e.n}` : ''))}; }"""


class LiveRun:
    """A browser page on one notebook of a :class:`Lab`, and what went wrong on it."""

    def __init__(self, p, lab: Lab, name: str):
        self.lab, self.name = lab, name
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []  # uncaught page errors: the tests fail on them at the end
        self.panel: str | None = None
        self.browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = self.page = self.browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(ACTION_TIMEOUT_MS)  # no Playwright call waits without a bound
        page.set_default_navigation_timeout(OPEN_TIMEOUT_MS)
        page.route("**/*", lambda r: r.continue_() if urlparse(r.request.url).hostname
                   in ("127.0.0.1", None) or urlparse(r.request.url).scheme in ("data", "blob")
                   else r.abort())
        page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text[:300]}")
                if m.type in ("error", "warning") else None)

    # ------------------------------------------------------------------ what the page shows
    def state(self) -> dict:
        if self.panel is None:
            return {}
        try:
            return self.page.evaluate(_RUN_STATE, self.panel)
        except Exception as exc:  # noqa: BLE001 - the page itself is gone: say so
            return {"unreadable": str(exc)[:300]}

    def describe(self, state: dict | None = None) -> str:
        s = self.state() if state is None else state
        lines = []
        if s.get("cells") is not None:
            lines += [f"Run All: {s['command']}",
                      f"code cells: {s['cells']}, run: {s['executed']}, running: {s['running']}, "
                      f"not run: {s['cells'] - s['executed'] - s['running']}",
                      f"errors in cell outputs: {s['errors'] or 'none'}",
                      f"kernel: {s['kernel']}; its status since the notebook was ready: "
                      f"{', '.join(s['log'][-15:])}"]
        elif s:
            lines.append(f"notebook panel: {s}")
        lines.append(f"JupyterLab dialogs seen: {self.dialogs or 'none'}")
        lines.append(f"browser console (errors, warnings; last 8): {self.console[-8:] or 'none'}")
        lines.append(f"server log (last lines):\n{self.lab.log_tail()}")
        return "\n".join(lines)

    def fail(self, message: str, state: dict | None = None) -> None:
        BUILD.mkdir(exist_ok=True)
        shot = BUILD / f"live_failure_{Path(self.name).stem}.png"
        try:
            self.page.screenshot(path=str(shot), full_page=True, timeout=30_000)
        except Exception as exc:  # noqa: BLE001 - the message matters more than the picture
            shot = f"none ({str(exc)[:100]})"
        pytest.fail(f"{self.name}: {message}\n{self.describe(state)}\nscreenshot: {shot}",
                    pytrace=False)

    def close_dialogs(self) -> None:
        """Answer any JupyterLab dialog that is up (the kernel picker, a notice) with its default.

        Which dialogs JupyterLab raises at start depends on timing and on its version (a kernel
        picker when the session is slow to come up, first-run notices); any of them blocks the
        page. Each one's text is kept for the failure message.
        """
        for _ in range(5):
            dialog = self.page.query_selector(".jp-Dialog")
            if dialog is None or not dialog.is_visible():
                return
            self.dialogs.append(" ".join((dialog.text_content() or "").split())[:200])
            accept = dialog.query_selector(".jp-Dialog-button.jp-mod-accept")
            if accept is not None:
                accept.click()
            else:
                self.page.keyboard.press("Escape")
            self.page.wait_for_timeout(300)

    # ------------------------------------------------------------------ opening and running
    def open_and_run_all(self) -> None:
        """Open the notebook, wait until its kernel is connected and idle, then Run All on it
        (the command names the notebook's own panel) and wait until one of its code cells
        shows ``[*]`` or ``[n]``."""
        page = self.page
        page.goto(f"{self.lab.base}/lab/tree/{self.name}?token={self.lab.token}")
        deadline = time.monotonic() + OPEN_TIMEOUT_MS / 1000
        while self.panel is None:  # a kernel picker or a notice may come up while it starts
            self.close_dialogs()
            self.panel = page.evaluate(_PANEL_READY, self.name)
            if self.panel is None:
                if time.monotonic() > deadline:
                    self.fail(f"the notebook's kernel was not connected and idle after "
                              f"{OPEN_TIMEOUT_MS / 1000:.0f} s")
                page.wait_for_timeout(250)
        self.close_dialogs()
        page.evaluate(_RUN_ALL, self.panel)
        deadline = time.monotonic() + START_RUN_TIMEOUT_MS / 1000
        while True:
            s = self.state()
            if s.get("executed", 0) + s.get("running", 0) > 0:
                return
            if s.get("errors") or time.monotonic() > deadline:
                self.fail("Run All did not start any code cell of the notebook", s)
            page.wait_for_timeout(100)

    def wait_for_run(self, ready_js: str, arg, what: str, *, stall_ms: int, total_ms: int,
                     poll_ms: int = 250) -> None:
        """Wait until ``ready_js(arg)`` is true in the page (``what``: what that means).

        Fails at once when a cell's output holds an error (Run All stops at it) or the kernel
        is dead or restarting; when its connection stays down for ``RECONNECT_S``; when Run
        All has finished and ``what`` has still not shown after ``SETTLE_MS``; when no code
        cell has finished and no output has come for ``stall_ms``; and after ``total_ms``.
        """
        start = last_change = time.monotonic()
        progress, finished, cut = None, None, None
        while True:
            if self.page.evaluate(ready_js, arg):
                return
            s = self.state()
            now = time.monotonic()
            if "cells" not in s:
                self.fail(f"waiting for {what}: the notebook's panel cannot be read", s)
            if s["errors"]:
                # The error output reaches the page before JupyterLab clears the queued cells'
                # running marks (the execute reply comes after it): wait briefly for those, so
                # the message says what did not run instead of a moment's snapshot.
                settle = now + ERROR_SETTLE_MS / 1000
                while s.get("running") and time.monotonic() < settle:
                    self.page.wait_for_timeout(100)
                    again = self.state()
                    s = again if "cells" in again else s
                self.fail(f"waiting for {what}: a cell raised, so Run All stopped there", s)
            if s["kernel"].split(",")[0] in ("dead", "restarting", "autorestarting", "terminating"):
                self.fail(f"waiting for {what}: the notebook's kernel is {s['kernel']}", s)
            if s["kernel"].endswith(", connected"):  # a dropped websocket reconnects by itself
                cut = None
            elif cut is None:
                cut = now
            elif now - cut > RECONNECT_S:
                self.fail(f"waiting for {what}: the notebook's kernel has been {s['kernel']} "
                          f"for {RECONNECT_S} s", s)
            if (s["executed"], s["outputs"]) != progress:
                progress, last_change = (s["executed"], s["outputs"]), now
            if s["command"] != "sent":  # the command's promise settled: every cell has replied
                finished = finished or now
                if now - finished > SETTLE_MS / 1000:
                    self.fail(f"Run All ended, but {what} did not show within "
                              f"{SETTLE_MS / 1000:.0f} s after it", s)
            if now - last_change > stall_ms / 1000:
                self.fail(f"waiting for {what}: no code cell finished and no output came for "
                          f"{stall_ms / 1000:.0f} s", s)
            if now - start > total_ms / 1000:
                self.fail(f"{what} did not show within {total_ms / 1000:.0f} s", s)
            self.page.wait_for_timeout(poll_ms)
