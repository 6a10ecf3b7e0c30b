"""The built book, opened in a real headless browser (Debian's chromium, driven by Playwright).

For every page of the table of contents:

* no console error and no uncaught exception (known noise is filtered by name, below);
* every plotly figure is drawn (has its ``.main-svg``);
* every explorer figure (``data-llmviz-explorer``) responds to each of its sliders: clicking
  the end of each rail in turn selects a new frame of the joint grid
  (``data-llmviz-frame``) and changes the set of visible traces;
* every request goes to the local server: any other host is aborted and fails the test;
* no local request fails (a missing font or script shows up here);
* no figure is wider than its column, no plotly title is clipped, no slider covers an x-axis
  title and no colour bar covers tick labels (bounding boxes measured in the page) at 1280 px,
  at 420 px (a phone) and in dark mode;
* in dark mode, on every page with plotly figures (``_static/llmviz-theme.js`` themes them),
  measured in the page: no light card, paper, plot area, legend box, colour bar or 3-D wall
  behind any figure, and its titles, ticks, legend and slider labels readable on the dark page
  (contrast >= 3); again after one slider of every explorer has moved (a frame's relayout must
  not bring a light colour back).

The book is built once per test session (``jupyter-book build . -W --keep-going`` into
``_build/``, by ``tests/book/site_build.py``; under ``pytest -n 2`` the controller builds it before
the workers start, so the build has the machine to itself, and the workers find it built). Set
``LLMVIZ_SITE_PREBUILT=1`` to test the ``_build/html`` that is already there. A screenshot of
every failing page goes to ``site-shots/``. Page weights and the site's size are written to
``_build/site_report.json`` and printed (``pytest -s -n0 tests/test_site.py -k weights``).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "site-shots"
CHROMIUM = os.environ.get("LLMVIZ_CHROMIUM", "/usr/bin/chromium")
#: Page load limit; generous because the tests share 2 cores with the rest of the suite.
LOAD_TIMEOUT_MS = 120_000

sys.path.insert(0, str(ROOT / "tools"))
from sync_notebooks import toc_files  # noqa: E402

from tests.book.site_build import BUILD, HTML, BookBuildError, build_book  # noqa: E402

pytestmark = [pytest.mark.site]
try:  # with `pytest -n 2 --dist loadgroup` every site test runs on one worker (one build, one
    import xdist  # noqa: F401  # browser) while the other worker runs the unit tests
    pytestmark.append(pytest.mark.xdist_group("site"))
except ImportError:  # pragma: no cover - plain pytest
    pass

PAGES = toc_files(ROOT)
#: Pages Sphinx adds beside the toc's.
EXTRA_PAGES = ["search", "genindex"]

#: Console messages that are known, harmless and not ours, by name. Keep this list short and
#: explain every entry.
KNOWN_NOISE: dict[str, str] = {}

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-default-apps",
    "--disable-extensions",
]


# ----------------------------------------------------------------------------- build + serve
@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """``_build/html``, built once per test run (shared by xdist workers through a lock)."""
    if os.environ.get("LLMVIZ_SITE_PREBUILT"):
        if not (HTML / "book" / "intro.html").is_file():
            pytest.fail(f"LLMVIZ_SITE_PREBUILT is set but {HTML} holds no built book")
        return HTML
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"solo-{os.getpid()}"
    try:
        return build_book(run_id)
    except BookBuildError as err:
        pytest.fail(str(err), pytrace=False)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep the test output clean
        pass


@pytest.fixture(scope="session")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"no chromium at {CHROMIUM}: `apt-get install chromium` (or set LLMVIZ_CHROMIUM), "
            "or deselect the browser tests with -m 'not site'",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


# ----------------------------------------------------------------------------- one page visit
class Visit:
    """One page loaded in a fresh browser context, with everything it asked for recorded."""

    def __init__(self, browser, server: str, path: str, *, width: int = 1280,
                 dark: bool = False) -> None:
        self.url = f"{server}/{path}"
        self.errors: list[str] = []
        self.foreign: list[str] = []
        self.failed: list[str] = []
        self.responses: dict[str, int] = {}
        self.pending: set[str] = set()  # requests issued and not yet finished or failed
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.page = self.context.new_page()
        if dark:  # what the theme's toggle stores; the theme reads it before the first paint
            self.page.add_init_script(
                "localStorage.setItem('mode', 'dark'); localStorage.setItem('theme', 'dark');"
            )
        self.page.route("**/*", self._route)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        self.page.on("request", lambda request: self.pending.add(request.url))
        self.page.on("requestfinished", lambda request: self.pending.discard(request.url))
        self.page.on("requestfailed", self._request_failed)
        self.page.on("response", self._response)

    def _route(self, route) -> None:
        url = route.request.url
        parsed = urlparse(url)
        if parsed.scheme in ("data", "blob") or parsed.hostname == "127.0.0.1":
            route.continue_()
        else:
            self.foreign.append(url)
            route.abort()

    def _console(self, msg) -> None:
        if msg.type != "error":
            return
        text = msg.text
        where = msg.location.get("url", "") if msg.location else ""
        if any(name in text or name in where for name in KNOWN_NOISE):
            return
        self.errors.append(f"console: {text} ({where})")

    def _request_failed(self, request) -> None:
        self.pending.discard(request.url)
        host = urlparse(request.url).hostname
        if host == "127.0.0.1" and not any(n in request.url for n in KNOWN_NOISE):
            self.failed.append(f"{request.url}: {request.failure}")

    def _response(self, response) -> None:
        url = response.url
        if any(n in url for n in KNOWN_NOISE):
            return
        if response.status >= 400:
            self.failed.append(f"{url}: HTTP {response.status}")
        self.responses[url] = response.status

    def open(self) -> None:
        from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

        self.page.goto(self.url, wait_until="load", timeout=LOAD_TIMEOUT_MS)
        # "networkidle" (500 ms without traffic) can come late on a busy 2-core machine while a
        # heavy page draws dozens of figures; what matters is that no request is left hanging.
        try:
            self.page.wait_for_load_state("networkidle", timeout=LOAD_TIMEOUT_MS)
        except PlaywrightTimeoutError:
            if self.pending:
                self.failed.append(
                    f"requests still pending {LOAD_TIMEOUT_MS // 1000} s after load: "
                    f"{sorted(self.pending)[:5]}"
                )

    def screenshot(self, name: str) -> Path:
        SHOTS.mkdir(exist_ok=True)
        path = SHOTS / f"{name.replace('/', '__')}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.context.close()


def _local_file(url: str) -> Path | None:
    path = urlparse(url).path.lstrip("/")
    f = HTML / path
    if f.is_dir():
        f = f / "index.html"
    return f if f.is_file() else None


# ----------------------------------------------------------------------------- explorers
_VISIBLE = "gd => gd.data.map(t => t.visible === undefined || t.visible === true)"


def _check_explorer(page, handle, label: str) -> list[str]:
    """Move every slider of an explorer in turn (one click at the far end of its rail); each
    move must select another frame of the joint grid and change the visible traces."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    problems = []
    vis = handle.evaluate(_VISIBLE)
    n_vis = sum(vis)
    if n_vis == 0 or n_vis == len(vis) and len(vis) > 1:
        problems.append(f"{label}: {n_vis} of {len(vis)} traces visible at start")
    rails = handle.query_selector_all("g.slider-container rect.slider-rail-touch-rect")
    if not rails:
        return problems + [f"{label}: explorer has no slider rail"]
    seen = {handle.get_attribute("data-llmviz-frame")}
    for k, rail in enumerate(rails):
        before_frame = handle.get_attribute("data-llmviz-frame")
        before_vis = handle.evaluate(_VISIBLE)
        rail.scroll_into_view_if_needed()
        box = rail.bounding_box()
        # The far right of the rail is the last step; if the slider already sits there (a
        # control with 2 values whose default is the last), the far left moves it instead.
        for frac in (0.985, 0.015):
            page.mouse.click(box["x"] + frac * box["width"], box["y"] + box["height"] / 2)
            try:  # the slider script sets the attribute when it switches frames
                page.wait_for_function(
                    "([el, before]) => el.getAttribute('data-llmviz-frame') !== before",
                    arg=[handle, before_frame], timeout=5_000,
                )
            except PlaywrightTimeoutError:
                pass  # that end of the rail was the current step: try the other end
            after_frame = handle.get_attribute("data-llmviz-frame")
            if after_frame is not None and after_frame != before_frame:
                break
        after_vis = handle.evaluate(_VISIBLE)
        where = f"{label}, slider {k + 1} of {len(rails)}"
        if after_frame is None or after_frame == before_frame:
            problems.append(f"{where}: moving it left data-llmviz-frame at {before_frame!r}")
        elif after_frame in seen:
            problems.append(f"{where}: moving it went back to an earlier frame {after_frame}")
        seen.add(after_frame)
        if after_vis == before_vis:
            problems.append(f"{where}: moving it did not change the visible traces")
        if sum(after_vis) == 0:
            problems.append(f"{where}: no trace visible after moving it")
    return problems


# ----------------------------------------------------------------------------- layout
#: Measured in the page: figures wider than their column, clipped titles, sliders over x-axis
#: titles, colour bars over tick labels. Returns one line per problem.
LAYOUT_JS = """
() => {
  const out = [];
  const inter = (a, b) => Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left)) *
                          Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
  // Images (matplotlib figures): either inside their column, or in an output that scrolls
  // sideways and itself fits the column; never squashed out of proportion.
  const scroller = (el) => {
    for (let e = el.parentElement; e && !e.classList.contains('bd-content'); e = e.parentElement) {
      const o = getComputedStyle(e).overflowX;
      if (o === 'auto' || o === 'scroll') { return e; }
    }
    return null;
  };
  document.querySelectorAll('.cell_output img').forEach((img, i) => {
    const r = img.getBoundingClientRect();
    if (!r.width || !img.naturalWidth) { return; }
    const col = img.closest('.cell_output').getBoundingClientRect();
    if (r.right > col.right + 1 || r.left < col.left - 1) {
      const sc = scroller(img);
      const s = sc ? sc.getBoundingClientRect() : null;
      if (!s || s.right > col.right + 1 || s.left < col.left - 1) {
        out.push(`image ${i}: ${Math.round(r.width)} px wide overflows a ${Math.round(col.width)} px column`);
      }
    }
    const cs = getComputedStyle(img);  // the dark theme pads images on a light card
    const px = (k) => parseFloat(cs[k]) || 0;
    const w = r.width - px('paddingLeft') - px('paddingRight') - px('borderLeftWidth') - px('borderRightWidth');
    const h = r.height - px('paddingTop') - px('paddingBottom') - px('borderTopWidth') - px('borderBottomWidth');
    const ratio = (w / h) / (img.naturalWidth / img.naturalHeight);
    if (Math.abs(ratio - 1) > 0.03) {
      out.push(`image ${i}: drawn ${Math.round(w)}x${Math.round(h)}, out of proportion`);
    }
  });
  if (document.documentElement.scrollWidth > window.innerWidth + 1) {
    out.push(`the page scrolls sideways (${document.documentElement.scrollWidth} px wide in a ` +
             `${window.innerWidth} px window)`);
  }
  document.querySelectorAll('.js-plotly-plot').forEach((gd, i) => {
    const name = `figure ${i} (${gd.id})`;
    const fig = gd.getBoundingClientRect();
    if (fig.width === 0) { return; }
    const col = (gd.closest('.cell_output') || gd.parentElement).getBoundingClientRect();
    if (fig.width > col.width + 1 || fig.right > col.right + 1 || fig.left < col.left - 1) {
      out.push(`${name}: ${Math.round(fig.width)} px wide in a ${Math.round(col.width)} px column`);
    }
    const svg = gd.querySelector('.main-svg');
    const s = svg ? svg.getBoundingClientRect() : fig;
    gd.querySelectorAll('.gtitle').forEach(t => {
      const r = t.getBoundingClientRect();
      if (r.width && (r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 1)) {
        out.push(`${name}: title "${t.textContent.slice(0, 40)}" clipped ` +
                 `(${Math.round(r.left - s.left)}..${Math.round(r.right - s.left)} of ` +
                 `${Math.round(s.width)} px)`);
      }
    });
    const sliders = [...gd.querySelectorAll('.slider-container')].map(e => e.getBoundingClientRect());
    gd.querySelectorAll('[class^="g-x"][class$="title"]').forEach(t => {
      const r = t.getBoundingClientRect();
      if (r.width && sliders.some(sl => inter(sl, r) > 4)) {
        out.push(`${name}: a slider covers the x-axis title "${t.textContent.slice(0, 30)}"`);
      }
    });
    const ticks = [...gd.querySelectorAll('.ytick text, .xtick text')].map(e => e.getBoundingClientRect());
    gd.querySelectorAll('.colorbar').forEach(cb => {
      const r = cb.getBoundingClientRect();
      if (r.width && ticks.some(t => inter(t, r) > 4)) {
        out.push(`${name}: a colour bar covers tick labels`);
      }
    });
  });
  return out;
}
"""


#: Dark mode, measured in the page for every plotly figure: light backgrounds (the card around
#: it, the paper, plot areas, legend and annotation boxes, colour bars, 3-D walls, polar
#: areas; colours composited over the page's own background) and text hard to read on the
#: page (contrast ratio under 3). Returns one line per problem.
DARK_JS = r"""
() => {
  // Every plotly figure in dark mode: no light card, paper, plot area or legend behind it, and
  // its text readable on the dark page. Colours are composited (alpha, fill-opacity) over the
  // page's own background before they are judged.
  const out = [];
  const probe = document.createElement('span');
  document.body.appendChild(probe);
  const parse = (c) => {
    if (!c) { return null; }
    probe.style.color = '';
    probe.style.color = c;  // named and hex colours, as the browser reads them
    c = probe.style.color ? getComputedStyle(probe).color : c;
    const m = /rgba?\(([^)]+)\)/.exec(c || '');
    if (!m) { return null; }
    const p = m[1].split(',').map(parseFloat);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const lum = (rgb) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]);
  };
  const over = (c, a, base) => [0, 1, 2].map(i => c[i] * a + base[i] * (1 - a));
  const pageBg = parse(getComputedStyle(document.body).backgroundColor) || [0, 0, 0, 1];
  const base = pageBg.slice(0, 3);
  const LIGHT = 0.2;  // relative luminance of a background that reads as a light card (#7c7c7c)
  const light = (css, alpha) => {
    const c = parse(css);
    if (!c) { return false; }
    const a = c[3] * (alpha === undefined ? 1 : alpha);
    return a > 0.05 && lum(over(c, a, base)) > LIGHT;
  };
  const contrast = (a, b) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  const hex = (c) => `rgba(${c.map(v => Math.round(v * 100) / 100).join(',')})`;
  const figs = [...document.querySelectorAll('.js-plotly-plot')];
  figs.forEach((gd, i) => {
    const name = `figure ${i} (${gd.id})`;
    if (!gd._fullLayout) { out.push(`${name}: not drawn`); return; }
    // 1. The card: any element between the figure and the article with a light background.
    for (let e = gd; e && !e.classList.contains('bd-article'); e = e.parentElement) {
      const bg = getComputedStyle(e).backgroundColor;
      if (light(bg)) {
        out.push(`${name}: a light card behind it (${bg} on <${e.tagName.toLowerCase()} ` +
                 `class="${String(e.className).slice(0, 60)}">)`);
        break;
      }
    }
    // 2. Backgrounds drawn by plotly: the paper, plot areas, legends, colour bars, polar areas.
    const svgBg = gd.querySelector('.main-svg');
    if (svgBg && light(getComputedStyle(svgBg).backgroundColor)) {
      out.push(`${name}: light paper ${getComputedStyle(svgBg).backgroundColor}`);
    }
    gd.querySelectorAll('.main-svg .bg, .main-svg .cbbg, .main-svg .legend .bg').forEach(el => {
      const cs = getComputedStyle(el);
      if (cs.display === 'none' || cs.visibility === 'hidden') { return; }
      const r = el.getBoundingClientRect();
      if (r.width < 4 || r.height < 4) { return; }
      const a = parseFloat(cs.fillOpacity) * parseFloat(cs.opacity);
      if (light(cs.fill, a)) {
        const where = el.closest('.legend') ? 'legend' : el.classList.contains('cbbg') ? 'colour bar'
          : el.closest('.annotation') ? 'annotation' : 'plot area';
        out.push(`${name}: light ${where} background ${cs.fill} (opacity ${a})`);
      }
    });
    const fl = gd._fullLayout;
    Object.keys(fl).filter(k => /^(scene|polar|ternary|geo)\d*$/.test(k)).forEach(k => {
      const sub = fl[k] || {};
      if (sub.bgcolor && light(sub.bgcolor)) {
        out.push(`${name}: light ${k} background ${sub.bgcolor}`);
      }
      ['xaxis', 'yaxis', 'zaxis'].forEach(ax => {
        const a = sub[ax];
        if (!a || a.visible === false) { return; }
        const wall = parse(a.backgroundcolor);  // WebGL draws the wall opaque, whatever its alpha
        if (a.showbackground && wall && light(`rgb(${wall[0]},${wall[1]},${wall[2]})`)) {
          out.push(`${name}: light ${k}.${ax} background ${a.backgroundcolor}`);
        }
        const c = parse(a.tickfont && a.tickfont.color || a.color);  // drawn in WebGL: read the layout
        if (a.showticklabels !== false && c && contrast(lum(c), lum(base)) < 3) {
          out.push(`${name}: ${k}.${ax} labels hard to read (${a.tickfont && a.tickfont.color || a.color})`);
        }
      });
    });
    // 3. Text: titles, axis titles and ticks, legend, colour bar, sliders, free annotations.
    const TEXT = '.gtitle, .g-gtitle text, [class^="g-x"][class$="title"] text, [class^="g-y"][class$="title"] text, ' +
      '.xtitle, .ytitle, .xtick text, .ytick text, .legendtext, .legendtitletext, .cbaxis text, ' +
      '.cbtitle text, .slider-label, .slider-container text, .annotation-text';
    const bad = new Set();
    gd.querySelectorAll(TEXT).forEach(t => {
      const r = t.getBoundingClientRect();
      if (!r.width || !t.textContent.trim()) { return; }
      const ann = t.closest('.annotation');
      if (ann) {  // an annotation on its own opaque box is judged against that box
        const box = ann.querySelector('.bg');
        const b = box && parse(getComputedStyle(box).fill);
        if (b && parseFloat(getComputedStyle(box).fillOpacity) > 0.5) { return; }
      }
      const c = parse(getComputedStyle(t).fill);
      if (!c) { return; }
      const a = c[3] * parseFloat(getComputedStyle(t).fillOpacity || 1);
      const ratio = contrast(lum(over(c, a, base)), lum(base));
      if (ratio < 3) { bad.add(`"${t.textContent.trim().slice(0, 24)}" in ${hex(c)} (contrast ${ratio.toFixed(1)})`); }
    });
    if (bad.size) {
      out.push(`${name}: text hard to read on the dark page: ${[...bad].slice(0, 4).join('; ')}` +
               (bad.size > 4 ? ` and ${bad.size - 4} more` : ''));
    }
  });
  probe.remove();
  return out;
}
"""


def _layout_problems(page, *, dark: bool = False) -> list[str]:
    for fig in page.query_selector_all(".js-plotly-plot"):  # draw every figure first
        fig.scroll_into_view_if_needed()
    page.wait_for_timeout(500)  # the theme script's relayouts and title fitting
    problems = page.evaluate(LAYOUT_JS)
    if dark:
        themes = page.evaluate(
            "() => [...document.querySelectorAll('.js-plotly-plot')]"
            ".map(g => g.getAttribute('data-llmviz-theme'))"
        )
        light = [i for i, t in enumerate(themes) if t != "dark"]
        if light:
            problems.append(f"plotly figures {light} kept their light colours in dark mode")
        problems += [f"dark mode: {p}" for p in page.evaluate(DARK_JS)]
    return problems


def _move_last_slider(page, handle) -> bool:
    """Click the far end of an explorer's last slider (the near end if it sits there already);
    True once the figure shows another frame."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    rails = handle.query_selector_all("g.slider-container rect.slider-rail-touch-rect")
    if not rails:
        return False
    before = handle.get_attribute("data-llmviz-frame")
    rails[-1].scroll_into_view_if_needed()
    box = rails[-1].bounding_box()
    for frac in (0.985, 0.015):
        page.mouse.click(box["x"] + frac * box["width"], box["y"] + box["height"] / 2)
        try:
            page.wait_for_function(
                "([el, before]) => el.getAttribute('data-llmviz-frame') !== before",
                arg=[handle, before], timeout=5_000,
            )
            return True
        except PlaywrightTimeoutError:
            continue
    return False


# ----------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("doc", PAGES + EXTRA_PAGES)
def test_page(doc: str, browser, server) -> None:
    visit = Visit(browser, server, f"{doc}.html")
    problems: list[str] = []
    try:
        visit.open()
        figures = visit.page.query_selector_all(".plotly-graph-div")
        for i, fig in enumerate(figures):
            try:
                fig.scroll_into_view_if_needed()
                fig.wait_for_selector(".main-svg", timeout=60_000, state="attached")
            except Exception:  # noqa: BLE001 - reported below with the page's name
                problems.append(f"plotly figure {i} ({fig.get_attribute('id')}) was not drawn")
        explorers = visit.page.query_selector_all("[data-llmviz-explorer]")
        source = (HTML / f"{doc}.html").read_text(encoding="utf-8")
        expected = source.count("gd.setAttribute('data-llmviz-explorer'")
        if len(explorers) != expected:
            problems.append(f"{expected} explorers in the page source, {len(explorers)} set up in "
                            "the browser (the slider script did not run)")
        problems += [f"at 1280 px: {p}" for p in _layout_problems(visit.page)]
        for i, handle in enumerate(explorers):
            problems += _check_explorer(visit.page, handle, f"explorer {i}")
        problems += visit.errors
        problems += [f"request left the machine (aborted): {u}" for u in visit.foreign]
        problems += [f"local request failed: {u}" for u in visit.failed]
        if problems:
            shot = visit.screenshot(doc)
            pytest.fail(f"{doc}: " + "\n  ".join(problems) + f"\nscreenshot: {shot}", pytrace=False)
    finally:
        visit.close()


@pytest.mark.parametrize("width,dark", [(420, False), (1280, True)], ids=["420px", "dark"])
@pytest.mark.parametrize("doc", PAGES)
def test_page_narrow_and_dark(doc: str, width: int, dark: bool, browser, server) -> None:
    """Each chapter on a phone-wide screen and in dark mode: nothing clipped or overflowing,
    figures in the page's colours, no console error."""
    visit = Visit(browser, server, f"{doc}.html", width=width, dark=dark)
    try:
        visit.open()
        if dark:
            assert visit.page.evaluate("document.documentElement.dataset.theme") == "dark"
        problems = _layout_problems(visit.page, dark=dark)
        if dark:
            explorers = visit.page.query_selector_all("[data-llmviz-explorer]")
            moved = [i for i, h in enumerate(explorers) if _move_last_slider(visit.page, h)]
            if len(moved) != len(explorers):
                problems.append(f"dark mode: explorers {sorted(set(range(len(explorers))) - set(moved))}"
                                " did not change frame when their last slider moved")
            if moved:
                visit.page.wait_for_timeout(500)  # the theme's answer to the frames' relayouts
                problems += [f"after the sliders moved: {p}"
                             for p in visit.page.evaluate(DARK_JS)]
        problems += visit.errors
        problems += [f"local request failed: {u}" for u in visit.failed]
        if problems:
            shot = visit.screenshot(f"{doc}-{width}{'-dark' if dark else ''}")
            pytest.fail(f"{doc} at {width} px{' dark' if dark else ''}: "
                        + "\n  ".join(problems) + f"\nscreenshot: {shot}", pytrace=False)
    finally:
        visit.close()


#: A page of its own for the theme script (no book needed): a 2-D figure with a legend and an
#: annotation on light boxes, and a 3-D figure (whose walls WebGL draws opaque).
_THEME_PAGE = """<!doctype html><html data-theme="light"><head><meta charset="utf-8">
<style>html[data-theme=dark] body {background: #121212; color: #ced6dd}</style></head><body>
<div id="flat" style="width:600px;height:400px"></div><div id="solid" style="width:600px;height:400px"></div>
<script>__PLOTLY__</script>
<script>
Plotly.newPlot('flat', [{x: [1, 2, 3], y: [2, 1, 3], name: 'a'}, {x: [1, 2, 3], y: [1, 3, 2], name: 'b'}],
  {template: {layout: {paper_bgcolor: 'white', plot_bgcolor: 'white'}}, title: {text: 'flat'},
   legend: {bgcolor: 'rgba(255,255,255,0.6)'},
   annotations: [{x: 2, y: 2, text: 'note', bgcolor: 'white', font: {color: '#222'}}]});
Plotly.newPlot('solid', [{type: 'scatter3d', x: [0, 1], y: [0, 1], z: [0, 1]}],
  {title: {text: 'solid'}, scene: {xaxis: {backgroundcolor: 'white', showbackground: true},
   yaxis: {backgroundcolor: 'white', showbackground: true},
   zaxis: {backgroundcolor: 'white', showbackground: true}}});
</script><script>__THEME__</script></body></html>"""


def test_theme_script_on_its_own_page(browser) -> None:
    """The theme script, on a page of its own: dark mode leaves no light box and no unreadable
    text (measured as on the site); an explorer-like relayout that puts a light annotation back
    is answered once and settles (no endless redraw); light mode restores the figure's colours."""
    import plotly

    plotly_js = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    theme_js = (ROOT / "_static" / "llmviz-theme.js").read_text()
    html = _THEME_PAGE.replace("__PLOTLY__", plotly_js).replace("__THEME__", theme_js)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.set_content(html, wait_until="load")
        page.wait_for_timeout(300)
        light = page.evaluate(DARK_JS)  # the light figures fail the dark check: it can fail
        assert any("legend" in p for p in light) and any("scene" in p for p in light), light
        page.evaluate("document.documentElement.setAttribute('data-theme', 'dark')")
        page.wait_for_timeout(500)
        assert page.evaluate(DARK_JS) == []
        # A frame's relayout (as an explorer's slider does) brings a light annotation back.
        page.evaluate("""() => {
            const gd = document.getElementById('flat');
            window.__draws = 0;
            gd.on('plotly_afterplot', () => { window.__draws += 1; });
            return Plotly.relayout(gd, {annotations: [{x: 2, y: 2, text: 'again', bgcolor: 'white',
                                                      font: {color: '#222'}}]});
        }""")
        page.wait_for_timeout(800)
        assert page.evaluate(DARK_JS) == []
        settled = page.evaluate("window.__draws")
        page.wait_for_timeout(800)
        assert page.evaluate("window.__draws") == settled, "the theme keeps redrawing the figure"
        assert settled <= 3, f"{settled} redraws after one relayout"
        page.evaluate("document.documentElement.setAttribute('data-theme', 'light')")
        page.wait_for_timeout(500)
        back = page.evaluate("""() => [document.getElementById('flat').layout.legend.bgcolor,
            document.getElementById('flat').layout.annotations[0].bgcolor,
            document.getElementById('solid').layout.scene.xaxis.backgroundcolor]""")
        assert back == ["rgba(255,255,255,0.6)", "white", "white"], back
        assert not errors, errors
    finally:
        context.close()


def test_favicon_and_metadata(site) -> None:
    """Every page names the favicon (no 404 for /favicon.ico) and carries a description."""
    assert (site / "_static" / "favicon.svg").is_file()
    for doc in PAGES:
        text = (site / f"{doc}.html").read_text(encoding="utf-8")
        assert 'rel="icon"' in text, f"{doc}.html has no favicon link"
        assert '<meta name="description"' in text and 'property="og:title"' in text, doc


def test_every_page_has_content(site) -> None:
    """Each toc page was written and has its title (a placeholder still has one)."""
    for doc in PAGES:
        html = (site / f"{doc}.html").read_text(encoding="utf-8")
        assert "<h1" in html, f"{doc}.html has no title"
    assert not list(site.rglob("*.ipynb_checkpoints*"))


def test_assets_are_served_locally(site) -> None:
    """plotly.js and MathJax are in the build, and no page names a CDN script."""
    assert (site / "_static" / "llmviz" / "plotly.min.js").stat().st_size > 1_000_000
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file()
    assert list((site / "_static" / "mathjax").rglob("*.woff"))
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for cdn in ("cdn.jsdelivr", "unpkg.com", "cdn.plot.ly", "cdnjs", "fonts.googleapis"):
            assert cdn not in text, f"{page.relative_to(site)} refers to {cdn}"


def test_dark_check_reaches_every_page_with_plotly(site) -> None:
    """The dark-mode check runs on the toc's pages: every built page that draws a plotly
    figure must be one of them."""
    with_plotly = {str(f.relative_to(site).with_suffix("")) for f in site.rglob("*.html")
                   if "plotly-graph-div" in f.read_text(encoding="utf-8")}
    assert with_plotly, "no page of the site draws a plotly figure"
    assert with_plotly <= set(PAGES), f"pages with plotly outside the dark check: {with_plotly - set(PAGES)}"


def test_plotly_js_only_where_needed(site) -> None:
    for doc in PAGES:
        html = (site / f"{doc}.html").read_text(encoding="utf-8")
        has_fig = "plotly-graph-div" in html
        has_js = "_static/llmviz/plotly.min.js" in html
        assert has_fig == has_js, f"{doc}: figure present={has_fig}, plotly.js loaded={has_js}"


def test_page_weights(browser, server, capsys) -> None:
    """Weigh every page as a browser loads it; write _build/site_report.json and print it."""
    report: dict = {"pages": {}, "site_bytes": 0, "site_files": 0}
    shared_assets: dict[str, int] = {}
    for doc in PAGES:
        visit = Visit(browser, server, f"{doc}.html")
        try:
            visit.open()
            total = own = 0
            for url in visit.responses:
                f = _local_file(url)
                if f is None:
                    continue
                size = f.stat().st_size
                total += size
                if "/_static/" in url:
                    shared_assets[urlparse(url).path] = size
                else:
                    own += size
            report["pages"][doc] = {
                "html_bytes": (HTML / f"{doc}.html").stat().st_size,
                "page_bytes_excluding_shared_static": own,
                "total_bytes_loaded": total,
                "requests": len(visit.responses),
            }
            assert not visit.foreign, f"{doc}: requests left the machine: {visit.foreign}"
        finally:
            visit.close()
    files = [f for f in HTML.rglob("*") if f.is_file()]
    report["site_bytes"] = sum(f.stat().st_size for f in files)
    report["site_files"] = len(files)
    report["shared_static_bytes"] = sum(shared_assets.values())
    (BUILD / "site_report.json").write_text(json.dumps(report, indent=2))
    lines = [f"{'page':45s} {'html KB':>8s} {'own KB':>8s} {'loaded KB':>10s} {'reqs':>5s}",
             "(own = the page's HTML and images; loaded = everything incl. shared _static assets,"
             " which a browser caches across pages)"]
    for doc, w in report["pages"].items():
        lines.append(
            f"{doc:45s} {w['html_bytes'] / 1024:8.0f} "
            f"{w['page_bytes_excluding_shared_static'] / 1024:8.0f} "
            f"{w['total_bytes_loaded'] / 1024:10.0f} {w['requests']:5d}"
        )
    lines.append(f"shared _static assets loaded by some page: "
                 f"{report['shared_static_bytes'] / 2**20:.1f} MiB")
    lines.append(f"site: {report['site_bytes'] / 2**20:.1f} MiB in {report['site_files']} files")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    # Budgets: a chapter's own HTML (figures and explorer grids included) stays light.
    heavy = {d: w["html_bytes"] for d, w in report["pages"].items() if w["html_bytes"] > 12 * 2**20}
    assert not heavy, f"pages over 12 MiB of HTML: {heavy}"
