"""Sphinx extension for the llmviz book: a static site that works offline.

What it does, and why:

* Sets ``LLMVIZ_BUILD=1`` in the builder's environment when it loads. The kernels myst-nb
  starts inherit it: ``llmviz.setup_notebook()`` then registers a plotly renderer that emits
  plain HTML (plotly's default MIME type is dropped by myst-nb), and explorers show their
  static face (plotly sliders over a precomputed grid) instead of ipywidgets.
* Sets ``OMP_NUM_THREADS=1`` for the kernels unless already set (see ``setup``).
* Serves plotly.js from the installed ``plotly`` package, copied into the *build's*
  ``_static`` (never the source tree), and adds it only to pages whose body holds a plotly
  figure: the other pages stay light.
* Serves MathJax 3 (``tex-chtml`` and its woff-v2 fonts) from the installed
  ``django-static-mathjax`` package, so ``mathjax_path`` in ``_config.yml`` points at the site.

No request from a built page leaves the site; ``tests/test_site.py`` checks that in a browser.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Where the plotly.js bundle lands under the build's ``_static``.
PLOTLY_JS = "llmviz/plotly.min.js"
#: Where MathJax lands under the build's ``_static`` (``mathjax_path`` in _config.yml).
MATHJAX_DIR = "mathjax"
#: A figure drawn by plotly.io.to_html carries this class.
PLOTLY_MARKER = "plotly-graph-div"


def plotly_js_source() -> Path:
    """The plotly.js bundle shipped inside the installed ``plotly`` package."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():  # pragma: no cover - a broken plotly install
        raise FileNotFoundError(f"plotly.js not found at {path}; reinstall plotly")
    return path


def mathjax_source() -> Path:
    """MathJax 3's ``es5`` folder from the ``django-static-mathjax`` package."""
    import mathjax  # django-static-mathjax

    base = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (base / "tex-chtml.js").is_file():  # pragma: no cover
        raise FileNotFoundError(
            f"MathJax 3 not found under {base}; pip install django-static-mathjax"
        )
    return base


def _copy_assets(static: Path) -> None:
    target = static / PLOTLY_JS
    target.parent.mkdir(parents=True, exist_ok=True)
    src = plotly_js_source()
    if not target.exists() or target.stat().st_size != src.stat().st_size:
        shutil.copyfile(src, target)
    # MathJax: only what tex-chtml needs (the component and the CHTML fonts), not all 24 MB.
    mj = mathjax_source()
    mj_target = static / MATHJAX_DIR
    mj_target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(mj / "tex-chtml.js", mj_target / "tex-chtml.js")
    fonts = Path("output") / "chtml" / "fonts" / "woff-v2"
    shutil.copytree(mj / fonts, mj_target / fonts, dirs_exist_ok=True)


def _on_builder_inited(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    _copy_assets(Path(app.outdir) / "_static")


def _on_page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    # Sphinx resets the script list after every page, so this adds plotly.js to this page only.
    # It goes in <head> without defer: each figure's inline script calls Plotly right away.
    body = context.get("body") or ""
    if PLOTLY_MARKER in body:
        app.add_js_file(PLOTLY_JS, priority=200)


def _on_build_finished(app: Sphinx, exception: Exception | None) -> None:
    # Sphinx's static-file copy may run after builder-inited; make sure the assets are there.
    if exception is None and app.builder.format == "html":
        _copy_assets(Path(app.outdir) / "_static")


def setup(app: Sphinx) -> dict:
    os.environ["LLMVIZ_BUILD"] = "1"  # inherited by every kernel this build starts
    # One BLAS/OpenMP thread per kernel unless the builder says otherwise: the chapters' CPU
    # sizes are small, and on a shared or 2-core machine (CI runs the unit tests beside the
    # build) more threads oversubscribe the cores and make cells many times slower.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # Jupyter Book always passes sphinx-comments' setting; that extension is left out (it would
    # load scripts from other sites), so the value is declared here to keep -W quiet.
    if "comments_config" not in app.config.values:
        app.add_config_value("comments_config", {}, "html")
    app.connect("builder-inited", _on_builder_inited)
    app.connect("html-page-context", _on_page_context)
    app.connect("build-finished", _on_build_finished)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
