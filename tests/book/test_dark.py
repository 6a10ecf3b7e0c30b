"""Dark mode for every plotly figure: the colours each figure ends with, not a flag.

Two tests:

* ``test_theme_script_on_late_and_redrawn_figures`` needs no book: a page with plotly.js (from
  the plotly package) and the site's ``_static/llmviz-theme.js`` draws one figure before the
  page loads, one after (as a script waiting for plotly.js does), and draws one again with
  ``Plotly.newPlot`` after it was themed (which resets its colours). In dark mode every one
  must end with the dark paper and plot colours, and light again when the page goes light.
* ``test_dark_mode_on_every_plotly_page`` opens every page of the built site that holds a
  plotly figure (found in the site itself, whatever its table of contents) in dark mode and
  checks each figure's paper and plot colours and the background behind it (no white card).
"""

from __future__ import annotations

import http.server
import shutil
from pathlib import Path

import pytest

from tests.book.test_site import Visit, browser, server, site  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.site]
try:
    import xdist  # noqa: F401
    pytestmark.append(pytest.mark.xdist_group("site"))
except ImportError:  # pragma: no cover
    pass

#: Paper/plot colours a dark figure may have: transparent, or dark (luminance below 0.35).
_COLOURS_JS = """() => {
  function lum(c) {
    const m = (c || '').match(/rgba?\\(([^)]+)\\)/);
    if (!m) { return c === 'transparent' ? 0 : (c && c[0] === '#' ?
      (parseInt(c.slice(1, 3), 16) * 0.299 + parseInt(c.slice(3, 5), 16) * 0.587 +
       parseInt(c.slice(5, 7), 16) * 0.114) / 255 : 1); }
    const p = m[1].split(',').map(Number);
    if (p.length === 4 && p[3] === 0) { return 0; }
    return (p[0] * 0.299 + p[1] * 0.587 + p[2] * 0.114) / 255;
  }
  function behind(el) {  // the first opaque background behind the figure
    for (let e = el.parentElement; e; e = e.parentElement) {
      const c = getComputedStyle(e).backgroundColor;
      if (c && c !== 'transparent' && !/rgba\\([^)]*,\\s*0\\)$/.test(c)) { return c; }
    }
    return 'transparent';
  }
  return [...document.querySelectorAll('.js-plotly-plot')].map((gd, i) => {
    const f = gd._fullLayout || {};
    return {i, id: gd.id, paper: f.paper_bgcolor, plot: f.plot_bgcolor,
            paperLum: lum(f.paper_bgcolor), plotLum: lum(f.plot_bgcolor),
            behind: behind(gd), behindLum: lum(behind(gd))};
  });
}"""


def _light_cards(page) -> list[dict]:
    """Figures (or what is behind them) that stay light in dark mode."""
    return [f for f in page.evaluate(_COLOURS_JS)
            if f["paperLum"] > 0.35 or f["plotLum"] > 0.35 or f["behindLum"] > 0.35]


_PAGE = """<!doctype html><html data-theme="dark"><head>
<script src="plotly.min.js"></script><script src="llmviz-theme.js"></script></head><body>
<div id="early"></div><div id="late"></div><div id="again"></div>
<script>
const fig = () => ({data: [{y: [1, 3, 2]}], layout: {template: {layout: {
  paper_bgcolor: 'white', plot_bgcolor: '#E5ECF6'}}, title: {text: 't'}}});
Plotly.newPlot('early', fig().data, fig().layout);
Plotly.newPlot('again', fig().data, fig().layout);
window.addEventListener('load', () => setTimeout(() => {
  Plotly.newPlot('late', fig().data, fig().layout);
  setTimeout(() => Plotly.newPlot('again', fig().data, fig().layout), 300);
}, 300));
</script></body></html>"""


def test_theme_script_on_late_and_redrawn_figures(browser, tmp_path):  # noqa: F811
    import plotly

    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", tmp_path)
    shutil.copy(ROOT / "_static" / "llmviz-theme.js", tmp_path)
    (tmp_path / "index.html").write_text(_PAGE)
    import functools
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/index.html")
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length === 3")
        page.wait_for_timeout(1500)  # the redraw of 'again' and the theme's relayouts
        figs = page.evaluate(_COLOURS_JS)
        assert [f["id"] for f in figs] == ["early", "late", "again"]
        assert not [f for f in figs if f["paperLum"] > 0.35 or f["plotLum"] > 0.35], figs
        page.evaluate("document.documentElement.setAttribute('data-theme', 'light')")
        page.wait_for_timeout(800)
        light = page.evaluate(_COLOURS_JS)
        assert all(f["paper"] == "white" and f["plot"] == "#E5ECF6" for f in light), light
        page.close()
    finally:
        httpd.shutdown()
        httpd.server_close()


def _plotly_pages(site: Path) -> list[str]:
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html")
                  if "plotly-graph-div" in p.read_text(errors="ignore"))


def test_dark_mode_on_every_plotly_page(site, browser, server):  # noqa: F811
    pages = _plotly_pages(site)
    assert pages, f"no page of {site} holds a plotly figure"
    problems = []
    for path in pages:
        visit = Visit(browser, server, path, dark=True)
        try:
            visit.open()
            for fig in visit.page.query_selector_all(".js-plotly-plot"):
                fig.scroll_into_view_if_needed()
            visit.page.wait_for_timeout(800)
            assert visit.page.evaluate("document.documentElement.dataset.theme") == "dark"
            for f in _light_cards(visit.page):
                problems.append(f"{path}: figure {f['i']} ({f['id']}): paper {f['paper']}, "
                                f"plot {f['plot']}, behind it {f['behind']}")
        finally:
            visit.close()
    print(f"dark mode checked on {len(pages)} pages with plotly figures")
    assert not problems, "light cards in dark mode:\n" + "\n".join(problems)
