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

The lab's kernels import this checkout's llmviz (its folder goes first on ``PYTHONPATH``),
whatever llmviz is installed. Every wait is bounded and fails with what the page shows
(``live_lab.py``): a cell that raised (Run All stops there), a dead or restarted kernel, a run
with no progress for ``RUN_STALL_MS``, controls that stop answering. A third test runs a
notebook whose second cell raises and checks that the wait fails within seconds, naming it.

Both run with the other browser tests (marker ``site``, xdist group ``site``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import time
from pathlib import Path

import pytest

from tests.book.live_lab import BUILD, ROOT, SETTLE_MS, LiveRun, start_lab

CHAPTER = "07_rope.ipynb"  # small, and its explorer has three sliders whose values the title names
GALLERY = "00_demo_gallery.ipynb"  # every explorer of the package
#: Run All: the longest a run may go without a code cell finishing or an output coming (a
#: stuck run fails then, saying what the page shows), and the longest it may take in all.
RUN_STALL_MS = 120_000
RUN_TIMEOUT_MS = 300_000
UPDATE_TIMEOUT_MS = 15_000
HOLD_PRESSES = 8
#: Generous bound on the median browser round trip (target: 150 ms unloaded; see the end of
#: the test). Measured on a 2-core machine at load average 14-17: medians 0.4-1.05 s.
MEDIAN_BOUND_S = 2.0
#: The gallery's target median round trip (ms), asserted when the machine is not overloaded.
GALLERY_MEDIAN_MS = 150.0
GALLERY_RUN_TIMEOUT_MS = 600_000
#: Driving the gallery's controls: at most this long in all, and it stops (saying what the page
#: shows) after this many controls in a row that do not redraw their figure.
GALLERY_DRIVE_TIMEOUT_S = 600
GALLERY_DEAD_CONTROLS = 3
BURST = 6  # presses away and back in a burst, CLICK_GAP_MS apart (faster than an update)
BURST_GAP_MS = 30

pytestmark = [pytest.mark.site]
try:  # with `pytest -n 2 --dist loadgroup` it runs on the browser tests' worker
    import xdist  # noqa: F401
    pytestmark.append(pytest.mark.xdist_group("site"))
except ImportError:  # pragma: no cover - plain pytest
    pass


@pytest.fixture
def lab(tmp_path_factory):
    """A JupyterLab of its own for each test, serving copies of the notebooks; yields a
    ``live_lab.Lab``. Not shared between tests: a second page on the same server restores the
    first test's workspace (its notebook open beside the new one, its kernel alive, its
    autosaved execution prompts), which is how the gallery once opened with no cell run."""
    if importlib.util.find_spec("jupyterlab") is None:  # `jupyter` alone comes with jupyter-core
        pytest.fail("jupyterlab is not installed (pip install -e '.[test]' installs it)", pytrace=False)
    root = tmp_path_factory.mktemp("live")
    for name in (CHAPTER, GALLERY):
        shutil.copy(ROOT / "notebooks" / name, root / name)
    yield from start_lab(root, tmp_path_factory.mktemp("lab-home"))


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

    latencies: list[float] = []
    with sync_playwright() as p:
        run = LiveRun(p, lab, CHAPTER)
        page, errors = run.page, run.errors
        run.open_and_run_all()
        # The explorer is the chapter's last widget: wait for its figure inside its Output.
        run.wait_for_run("() => !!document.querySelector('.widget-output .js-plotly-plot .gtitle')",
                         None, "the explorer's figure", stall_ms=RUN_STALL_MS,
                         total_ms=RUN_TIMEOUT_MS)
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
            try:
                page.wait_for_function(f"([o, b]) => ({_TITLE})(o) !== b", arg=[output, before],
                                       timeout=UPDATE_TIMEOUT_MS, polling="raf")
            except Exception:  # noqa: BLE001 - the failure says what the page shows
                run.fail(f"after {key} on a slider the figure's title stayed {before!r} for "
                         f"{UPDATE_TIMEOUT_MS / 1000:.0f} s (explorer output: "
                         f"{(output.text_content() or '')[:300]!r})")
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
        run.browser.close()
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

    expected = _explorer_cells(ROOT / "notebooks" / GALLERY)
    assert len(expected) >= 15, f"the gallery shows only {len(expected)} explorers"
    problems: list[str] = []
    latencies: list[float] = []
    controls = 0
    with sync_playwright() as p:
        run = LiveRun(p, lab, GALLERY)
        page, errors = run.page, run.errors
        run.open_and_run_all()
        run.wait_for_run(  # every explorer drawn: as many boxes with a figure as explorer cells
            f"n => [...document.querySelectorAll('{_BOXES}')]"
            ".filter(b => b.querySelector('.js-plotly-plot .main-svg')).length >= n",
            len(expected), f"the figures of all {len(expected)} explorers",
            stall_ms=RUN_STALL_MS, total_ms=GALLERY_RUN_TIMEOUT_MS, poll_ms=1000)
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

        deadline, dead = time.monotonic() + GALLERY_DRIVE_TIMEOUT_S, 0
        for b, (box, call) in enumerate(zip(boxes, expected)):
            if time.monotonic() > deadline:
                run.fail(f"driving the controls took over {GALLERY_DRIVE_TIMEOUT_S} s; stopped "
                         f"before {call} ({controls} controls driven); problems so far:\n"
                         + "\n".join(problems))
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
                    dead += 1
                    if dead >= GALLERY_DEAD_CONTROLS:  # the kernel or its comms are gone: say so
                        run.fail(f"{dead} controls in a row did not redraw their figure; "
                                 "stopped. Problems so far:\n" + "\n".join(problems))
                    continue
                dead = 0
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
        run.browser.close()
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


# ----------------------------------------------------------------------------- a run that fails
@pytest.fixture
def broken_lab(tmp_path_factory):
    """A JupyterLab serving one notebook whose second cell raises (a missing module)."""
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.fail("jupyterlab is not installed (pip install -e '.[test]' installs it)", pytrace=False)
    root = tmp_path_factory.mktemp("broken")
    cells = ["x = 1", "import llmviz_no_such_module", "y = 2"]
    (root / "broken.ipynb").write_text(json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [],
                   "execution_count": None} for c in cells],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                    "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5}))
    yield from start_lab(root, tmp_path_factory.mktemp("broken-home"))


def test_live_run_stops_at_once_when_a_cell_raises(broken_lab):
    """The wait for a run's figures does not sit out its timeout when Run All has stopped at a
    cell that raised (how the tests above once waited 120 s and 600 s for nothing): it fails
    within seconds, naming the cell, the exception and what did not run."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        run = LiveRun(p, broken_lab, "broken.ipynb")
        run.open_and_run_all()
        start = time.monotonic()
        with pytest.raises(pytest.fail.Exception) as failure:
            run.wait_for_run("() => false", None, "a figure that never comes",
                             stall_ms=RUN_STALL_MS, total_ms=RUN_TIMEOUT_MS)
        waited = time.monotonic() - start
        run.browser.close()
    (BUILD / "live_failure_broken.png").unlink(missing_ok=True)  # an expected failure's picture
    message = str(failure.value)
    for shown in ("a cell raised, so Run All stopped there", "not run: 1",
                  "cell 2/3: ModuleNotFoundError: No module named 'llmviz_no_such_module'"):
        assert shown in message, f"{shown!r} missing from the failure message:\n{message}"
    assert waited < SETTLE_MS / 1000, f"it failed only after {waited:.0f} s"
