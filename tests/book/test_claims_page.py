"""The claims page lists every claim box of the book, also after a cached rebuild.

Two levels:

* a throwaway Sphinx project (myst-nb, the book's extension, two notebooks whose outputs hold
  claim boxes made by ``llmviz.evidence.Claim``; nothing executes) is built, changed and
  rebuilt incrementally: the page must list every box of every chapter each time, including the
  chapter that was not read again;
* on the built book (marked ``site``): the boxes in the chapter pages and the rows of
  ``book/claims.html`` must match one to one.
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import re
import sys
from pathlib import Path

import pytest

from llmviz.evidence import Claim, Estimate, beats_baseline, summarize

ROOT = Path(__file__).resolve().parents[2]
BOX = re.compile(r'<div class="llmviz-claim" id="claim-(\w+)"')
ROW = re.compile(r'<tr data-llmviz-claim-row="(\w+)"><td><a href="([^"]+)"')


def _box(claim: Claim) -> dict:
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {"text/html": claim._repr_html_(), "text/plain": str(claim)},
    }


def _notebook(path: Path, title: str, claims: list[Claim]) -> None:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells.append(nbformat.v4.new_markdown_cell(f"# {title}"))
    cell = nbformat.v4.new_code_cell("claim")
    cell.outputs = [nbformat.from_dict(_box(c)) for c in claims]
    nb.cells.append(cell)
    nbformat.write(nb, path)


def _build(src: Path, out: Path) -> str:
    """Build ``src`` into ``out`` as ``sphinx -b html -W -q`` does; return the claims page.

    The build runs in this process (``sphinx.cmd.build.build_main``, what the command line
    calls): sphinx, myst-nb and nbformat are imported once for every build of the file, where a
    fresh interpreter per build paid seconds of imports each time. Kernels are still real
    processes. What a build changes in this process is put back: the environment variables the
    extension sets for its kernels, and the ``sys.path`` entry its ``conf.py`` adds.
    """
    from sphinx.cmd.build import build_main

    environ, path = dict(os.environ), list(sys.path)
    os.environ["LLMVIZ_CLAIMS_DIR"] = str(src / "_claims")
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            code = build_main(["-b", "html", "-W", "-q", str(src), str(out)])
    finally:
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
    assert code == 0, log.getvalue()
    return (out / "claims.html").read_text()


def _claims(*spec: tuple[str, float]) -> list[Claim]:
    return [Claim(f"claim {i}", summarize([m - 0.1, m, m + 0.1]), id=i, device="cpu", size="cpu")
            for i, m in spec]


def _project(tmp_path: Path, chapters: list[str], conf: str) -> tuple[Path, Path]:
    """A Sphinx project with the book's extension: ``chapters`` then the claims page in its
    table of contents, ``conf`` added to its conf.py; returns (source, output) folders."""
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / '_ext')!r})\n"
        "extensions = ['myst_nb', 'llmviz_book']\nexclude_patterns = ['_claims']\n" + conf
    )
    toc = "\n".join([*chapters, "claims"])
    (src / "index.md").write_text(f"# Book\n\n```{{toctree}}\n{toc}\n```\n")
    (src / "claims.md").write_text("# Claims\n\n```{llmviz-claims}\n```\n")
    return src, out


def test_claims_page_lists_every_box_also_after_an_incremental_rebuild(tmp_path):
    pytest.importorskip("myst_nb")
    src, out = _project(tmp_path, ["ch1", "ch2"], "nb_execution_mode = 'off'\n")
    _notebook(src / "ch1.ipynb", "One", _claims(("a", 1.0), ("b", -1.0)))
    slow = beats_baseline([2.0, 2.1], 1.5, name="beats the naive loop")  # fails: 2.05 > 1.5
    ratio = Claim("ours is faster", Estimate(0.5, 0.1, 5, 0.4, 0.6, kind="ratio"),
                  threshold=1.0, direction="<", id="fast", device="cpu",
                  size="long record: 20 steps", checks=[slow])
    _notebook(src / "ch2.ipynb", "Two", _claims(("c", 0.0)) + [ratio])

    page = _build(src, out)
    rows = ROW.findall(page)
    assert [r[0] for r in rows] == ["a", "b", "c", "fast"]  # table-of-contents order
    assert rows[0][1] == "ch1.html#claim-a" and rows[3][1] == "ch2.html#claim-fast"
    for doc, ids in (("ch1", ["a", "b"]), ("ch2", ["c", "fast"])):
        assert BOX.findall((out / f"{doc}.html").read_text()) == ids
    for text in ("holds", "does not hold", "not resolved at this size", "0.5x",
                 "cannot decide at this size", "long record: 20 steps", "Validity checks",
                 "<b>FAILED</b>: beats the naive loop (model 2.05 vs baseline 1.5",
                 "Smallest detectable", "none declared"):
        assert text in page
    assert "4 claims in this build" in page

    # Chapter 1 changes (one claim flips, one is added); chapter 2 is not read again.
    _notebook(src / "ch1.ipynb", "One", _claims(("a", -1.0), ("d", 2.0)))
    page = _build(src, out)
    assert [r[0] for r in ROW.findall(page)] == ["a", "d", "c", "fast"]
    row_a = page[page.index('data-llmviz-claim-row="a"'):]
    assert "does not hold" in row_a[: row_a.index("</tr>")]


def _code_notebook(path: Path, title: str, code: str, prose: str = "") -> None:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}"), nbformat.v4.new_code_cell(code),
                nbformat.v4.new_markdown_cell(prose or "The end.")]
    nbformat.write(nb, path)


def test_executed_notebook_registers_its_claims_and_survives_the_execution_cache(tmp_path):
    """A kernel run by the build writes its records; a cache hit keeps the page complete."""
    pytest.importorskip("myst_nb")
    pytest.importorskip("jupyter_cache")
    src, out = _project(tmp_path, ["ch"], "nb_execution_mode = 'cache'\n"
                        f"nb_execution_cache_path = {str(tmp_path / 'cache')!r}\n")
    code = (
        "from llmviz.evidence import Claim, glue_number, paired, summarize\n"
        "c = Claim('x is positive', paired([2.0, 2.2, 1.9], [1.0, 1.0, 1.0]), id='x', "
        "device='cpu')\nc.glue('ch_x')\nglue_number('ch_x_lr', 3e-4, '.0e')\nc"
    )
    prose = ("Verdict: {glue:text}`ch_x_verdict`; effect {glue:text}`ch_x_effect`; "
             "interval {glue:text}`ch_x_interval`; learning rate {glue:text}`ch_x_lr`.")
    _code_notebook(src / "ch.ipynb", "Chapter", code, prose)
    page = _build(src, out)
    chapter = re.sub(r"<[^>]+>", "", (out / "ch.html").read_text())
    # glued exactly as formatted: no quotes, the sign and the exponent kept
    assert "Verdict: holds; effect +1.03; interval [" in chapter
    assert "; learning rate 3e-04." in chapter
    assert [r[0] for r in ROW.findall(page)] == ["x"]
    record_file = src / "_claims" / "ch.jsonl"
    record = json.loads(record_file.read_text())
    assert (record["chapter"], record["id"], record["verdict"]) == ("ch", "x", "holds")
    written = record_file.stat().st_mtime_ns

    # Only the prose changes: the notebook is read again but its outputs come from the cache.
    _code_notebook(src / "ch.ipynb", "Chapter, revised", code, prose)
    page = _build(src, out)
    assert record_file.stat().st_mtime_ns == written  # the kernel did not run again
    assert [r[0] for r in ROW.findall(page)] == ["x"]
    assert "Chapter, revised" in page

    # A claim that is glued but never shown as a box cannot reach the page: the build says so.
    glued_only = "Claim('y', summarize([1.0, 2.0]), id='y', device='cpu').glue('ch_y')\n"
    first, rest = code.split("\n", 1)
    _code_notebook(src / "ch.ipynb", "Chapter", f"{first}\n{glued_only}{rest}", prose)
    with pytest.raises(AssertionError, match=r"claim 'y' of ch was registered .* not shown"):
        _build(src, out)


def test_claims_page_when_no_chapter_has_a_claim():
    sys.path.insert(0, str(ROOT / "_ext"))
    try:
        import llmviz_book
    finally:
        sys.path.remove(str(ROOT / "_ext"))

    class Env:
        llmviz_claims: dict = {}

    class App:
        env = Env()

    assert llmviz_book.claim_rows(App.env) == []
    assert "No claim under test in this build." in llmviz_book._table_html(App(), "claims")


# ----------------------------------------------------------------------------- built book
# The book is built once per test run by the site tests' ``site`` fixture (or taken as built
# with LLMVIZ_SITE_PREBUILT=1; a second request in the same run reuses the build).
from .test_site import pytestmark as _site_marks  # noqa: E402
from .test_site import site  # noqa: F401, E402


def _on_the_site_worker(test):
    """The site tests' marks (``site`` and, under xdist, the group that builds the book once),
    so this test waits for the build on the worker that makes it, not on the other one."""
    for mark in _site_marks:
        test = mark(test)
    return test


@_on_the_site_worker
def test_built_claims_page_lists_every_claim_box(site):  # noqa: F811 - the fixture
    boxes = []
    for page in sorted(site.rglob("*.html")):
        if page.name == "claims.html" or "_static" in page.parts:
            continue
        for claim_id in BOX.findall(page.read_text()):
            boxes.append((page.relative_to(site).as_posix(), claim_id))
    claims_page = (site / "book" / "claims.html").read_text()
    rows = []
    for claim_id, href in ROW.findall(claims_page):
        target = (site / "book" / html.unescape(href).split("#")[0]).resolve()
        rows.append((target.relative_to(site.resolve()).as_posix(), claim_id))
    assert len(rows) == len(set(rows)), "a claim is listed twice"
    assert sorted(rows) == sorted(boxes)
