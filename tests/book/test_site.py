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
  at 420 px (a phone) and in dark mode, where every plotly figure must have taken the dark
  colours (``_static/llmviz-theme.js``).

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
    return problems


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
        problems = _layout_problems(visit.page, dark=dark) + visit.errors
        problems += [f"local request failed: {u}" for u in visit.failed]
        if problems:
            shot = visit.screenshot(f"{doc}-{width}{'-dark' if dark else ''}")
            pytest.fail(f"{doc} at {width} px{' dark' if dark else ''}: "
                        + "\n  ".join(problems) + f"\nscreenshot: {shot}", pytrace=False)
    finally:
        visit.close()


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
