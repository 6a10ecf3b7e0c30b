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
* Writes a ``<meta name="description">`` and Open Graph tags (``og:title``,
  ``og:description``, ``og:type``, ``og:site_name``) into every page, from the
  ``llmviz_description`` setting in ``_config.yml`` and the page's title.
* Collects every claim under test into the claims page (``book/claims.md`` holds the
  ``{llmviz-claims}`` directive). Each claim box (``llmviz.evidence.Claim``) carries its record
  in its HTML (``data-llmviz-record``). The records are read from each document's doctree when
  the document is read and kept in the build environment per document, so a notebook served
  from the execution cache, or not re-read at all, still contributes its claims; the table is
  filled in ``doctree-resolved``, after every document has been read, and the page is
  rewritten on every build. The kernels also get ``LLMVIZ_CLAIMS_DIR`` (``_build/claims``) and
  ``LLMVIZ_CHAPTER`` (the document being read): a claim registered by a notebook that ran in
  this build but shown in no box is a warning (an error under ``-W``).

No request from a built page leaves the site; ``tests/test_site.py`` checks that in a browser.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import time
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

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


def _meta_tags(app: Sphinx, context: dict) -> str:
    esc = html.escape
    title = re.sub(r"<[^>]+>", "", context.get("title") or "")
    site = context.get("docstitle") or app.config.html_title or ""
    desc = " ".join(str(app.config.llmviz_description or "").split())
    tags = [("name", "description", desc), ("property", "og:type", "website"),
            ("property", "og:site_name", site), ("property", "og:title", html.unescape(title)),
            ("property", "og:description", desc)]
    return "".join(f'<meta {k}="{v}" content="{esc(c)}" />\n' for k, v, c in tags if c)


def _on_page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    context["metatags"] = context.get("metatags", "") + _meta_tags(app, context)
    # Sphinx resets the script list after every page, so this adds plotly.js to this page only.
    # It goes in <head> without defer: each figure's inline script calls Plotly right away.
    body = context.get("body") or ""
    if PLOTLY_MARKER in body:
        app.add_js_file(PLOTLY_JS, priority=200)


def _on_build_finished(app: Sphinx, exception: Exception | None) -> None:
    # Sphinx's static-file copy may run after builder-inited; make sure the assets are there.
    if exception is None and app.builder.format == "html":
        _copy_assets(Path(app.outdir) / "_static")
    if exception is None:
        _check_registered_claims(app)


# ----------------------------------------------------------------------------- claims page
#: A claim box's record, HTML-escaped JSON in an attribute (see llmviz.evidence.claims).
CLAIM_RECORD = re.compile(r'data-llmviz-record="([^"]*)"')
#: Verdict -> colour (r, g, b) of the badge, as in the claim boxes.
VERDICT_RGB = {"holds": "46,160,67", "does not hold": "207,34,46",
               "cannot decide at this size": "120,120,120"}
UNRESOLVED_RGB = "191,135,0"


class claims_table(nodes.General, nodes.Element):
    """Placeholder for the claims table; replaced in ``doctree-resolved``."""


def _skip(self, node) -> None:
    raise nodes.SkipNode


class ClaimsDirective(SphinxDirective):
    """``{llmviz-claims}``: the table of every claim under test in this build."""

    def run(self) -> list[nodes.Node]:
        _pages(self.env).add(self.env.docname)
        return [claims_table()]


def _claims(env) -> dict[str, list[dict]]:
    """docname -> the claim records of its boxes (kept in the pickled environment)."""
    if not hasattr(env, "llmviz_claims"):
        env.llmviz_claims = {}
    return env.llmviz_claims


def _pages(env) -> set[str]:
    """The documents that hold a claims table."""
    if not hasattr(env, "llmviz_claims_pages"):
        env.llmviz_claims_pages = set()
    return env.llmviz_claims_pages


def _on_doctree_read(app: Sphinx, doctree) -> None:
    records = []
    for raw in doctree.findall(nodes.raw):
        if "llmviz-claim" not in raw.astext():
            continue
        for match in CLAIM_RECORD.finditer(raw.astext()):
            records.append(json.loads(html.unescape(match.group(1))))
    claims = _claims(app.env)
    if records:
        claims[app.env.docname] = records
    else:
        claims.pop(app.env.docname, None)


def _on_purge(app: Sphinx, env, docname: str) -> None:
    _claims(env).pop(docname, None)
    _pages(env).discard(docname)


def _on_merge(app: Sphinx, env, docnames, other) -> None:
    _claims(env).update(
        {d: r for d, r in _claims(other).items() if d in docnames}
    )
    _pages(env).update(_pages(other) & set(docnames))


def _on_env_get_updated(app: Sphinx, env) -> list[str]:
    # Rewrite the claims page on every build: any document may have changed its claims.
    return sorted(_pages(env))


def _toc_order(env) -> dict[str, int]:
    order: dict[str, int] = {}

    def walk(doc: str) -> None:
        if doc in order:
            return
        order[doc] = len(order)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(env.config.root_doc)
    return order


def claim_rows(env) -> list[tuple[str, dict]]:
    """(docname, record) for every claim of the build, in table-of-contents order."""
    if not _claims(env):
        return []
    order = _toc_order(env)
    docs = sorted(_claims(env), key=lambda d: (order.get(d, len(order)), d))
    return [(d, rec) for d in docs for rec in _claims(env)[d]]


def _table_html(app: Sphinx, docname: str) -> str:
    esc = html.escape
    rows = claim_rows(app.env)
    if not rows:
        return '<p class="llmviz-claims-empty">No claim under test in this build.</p>'
    counts = {}
    for _, rec in rows:
        counts[rec["verdict"]] = counts.get(rec["verdict"], 0) + 1
    summary = "; ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    out = [
        f'<p class="llmviz-claims-summary">{len(rows)} claims in this build: {esc(summary)}.</p>',
        '<table class="table llmviz-claims"><thead><tr><th>Chapter</th><th>Claim</th>'
        "<th>Verdict</th><th>Effect</th><th>95% interval</th><th>Smallest detectable (80% power)</th>"
        "<th>Seeds</th><th>Size (live or record)</th><th>Validity checks</th><th>Device</th>"
        "</tr></thead><tbody>",
    ]
    for doc, rec in rows:
        title = app.env.titles[doc].astext() if doc in app.env.titles else doc
        uri = app.builder.get_relative_uri(docname, doc) + f"#claim-{rec['id']}"
        rgb = VERDICT_RGB.get(rec["verdict"], UNRESOLVED_RGB)
        seeds = "computed" if rec.get("interval", "").startswith("exact") else rec["n"]
        out.append(
            f'<tr data-llmviz-claim-row="{esc(rec["id"])}"><td><a href="{esc(uri)}">'
            f"{esc(title)}</a></td><td>{esc(rec['text'])}<br><code>{esc(rec['test'])}</code>"
            f'</td><td><span style="font-weight:600;padding:0 0.3em;border-radius:4px;'
            f'background:rgba({rgb},0.22)">{esc(rec["verdict"])}</span></td>'
            f"<td>{esc(rec['effect'])}</td><td>{esc(rec['interval'])}</td>"
            f"<td>{esc(rec.get('min_detectable', 'not recorded'))}</td><td>{esc(str(seeds))}"
            f"</td><td>{esc(rec['size'])}</td><td>{_checks_cell(rec)}</td>"
            f"<td>{esc(rec['device'])}</td></tr>"
        )
    out.append("</tbody></table>")
    return "".join(out)


def _checks_cell(rec: dict) -> str:
    """The claim's validity checks, one per line ("passed: beats the bigram (...)")."""
    checks = rec.get("checks") or []
    if not checks:
        return "none declared"
    lines = []
    for c in checks:
        mark = "passed" if c["passed"] else "<b>FAILED</b>"
        detail = f" ({html.escape(c['detail'])})" if c.get("detail") else ""
        lines.append(f'<span class="llmviz-check">{mark}: {html.escape(c["name"])}{detail}</span>')
    return "<br>".join(lines)


def _on_doctree_resolved(app: Sphinx, doctree, docname: str) -> None:
    for node in list(doctree.findall(claims_table)):
        if app.builder.format == "html":
            node.replace_self(nodes.raw("", _table_html(app, docname), format="html"))
        else:
            text = f"{len(claim_rows(app.env))} claims: see the HTML edition for the table."
            node.replace_self(nodes.paragraph(text=text))


def _on_source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    # A notebook's kernel starts while its document is parsed, just after this event: it
    # inherits the document's name, which names its claims file.
    os.environ["LLMVIZ_CHAPTER"] = docname


def _check_registered_claims(app: Sphinx) -> None:
    """Warn about claims a notebook registered in this build but never showed as a box."""
    folder = Path(os.environ["LLMVIZ_CLAIMS_DIR"])
    shown = {(d, r["id"]) for d, recs in _claims(app.env).items() for r in recs}
    shown_ids = {i for _, i in shown}
    for path in sorted(folder.glob("*.jsonl")):
        if path.stat().st_mtime < app.llmviz_build_started:  # from an earlier build
            continue
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec["chapter"] in app.env.found_docs:
                missing = (rec["chapter"], rec["id"]) not in shown
            else:  # an explicit chapter= that is not a document name
                missing = rec["id"] not in shown_ids
            if missing:
                logger.warning(
                    f"claim {rec['id']!r} of {rec['chapter']} was registered (glued or "
                    "register()-ed) but not shown as a box, so the claims page cannot list it; "
                    "display the Claim in a cell", location=rec["chapter"],
                )


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
    # Claim records from the kernels: one file per notebook under the build folder, kept
    # across builds (a cached notebook does not run again; see the module docstring).
    claims_dir = Path(app.outdir).parent / "claims"
    os.environ.setdefault("LLMVIZ_CLAIMS_DIR", str(claims_dir))
    app.llmviz_build_started = time.time()
    app.add_config_value("llmviz_description", "", "html")
    app.add_node(claims_table, html=(_skip, None), latex=(_skip, None), text=(_skip, None))
    app.add_directive("llmviz-claims", ClaimsDirective)
    app.connect("builder-inited", _on_builder_inited)
    app.connect("source-read", _on_source_read)
    app.connect("doctree-read", _on_doctree_read)
    app.connect("env-purge-doc", _on_purge)
    app.connect("env-merge-info", _on_merge)
    app.connect("env-get-updated", _on_env_get_updated)
    app.connect("doctree-resolved", _on_doctree_resolved)
    app.connect("html-page-context", _on_page_context)
    app.connect("build-finished", _on_build_finished)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
