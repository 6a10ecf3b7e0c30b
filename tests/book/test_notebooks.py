"""Chapter notebooks: present, committed clean, and shaped like the book's template.

Structure only (fast): the notebooks are *executed* by the book build (tests/test_site.py) and by
``pytest --nbmake notebooks/``. Chapters that are still placeholders (written by
``tools/sync_notebooks.py --create-missing``, flagged in their metadata) are skipped by the
structure checks, and the skip reason lists every chapter that is still a placeholder.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import sync_notebooks as sync  # noqa: E402

CHAPTERS = sync.chapter_paths(ROOT)
ALL_NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
GALLERY = "00_demo_gallery"
EXPECTED = [
    "01_self_attention", "02_multi_head_attention", "03_gqa_kv_cache", "04_attention_at_scale",
    "05_absolute_position", "06_relative_position", "07_rope", "08_alibi",
    "09_length_extrapolation", "10_normalisation", "11_residual_and_norm_placement",
    "12_feed_forward", "13_depth_vs_width", "14_architecture_zoo", "15_small_llama",
    "16_mixture_of_experts", "17_latent_attention", "18_windows_sinks", "19_linear_attention",
]


def _read(path: Path):
    return nbformat.read(path, as_version=4)


def _placeholders() -> list[str]:
    return [p.stem for p in CHAPTERS if p.exists() and sync.is_placeholder(_read(p))]


def _ids(paths):
    return [p.stem for p in paths]


def _tags(cell) -> list[str]:
    return list(cell.metadata.get("tags", []))


def _headings(nb) -> list[str]:
    out = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            out += [m.group(1).strip() for m in re.finditer(r"^#{1,6}\s+(.*)$", cell.source, re.M)]
    return out


# ----------------------------------------------------------------------------- the toc
def test_toc_lists_every_chapter_in_order():
    stems = [p.stem for p in CHAPTERS]
    assert [s for s in stems if s != GALLERY] == EXPECTED
    assert GALLERY in stems


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_chapter_exists(path: Path):
    assert path.is_file(), f"{path.relative_to(ROOT)} is in _toc.yml but missing"


def test_toc_pages_exist():
    for f in sync.toc_files(ROOT):
        assert (ROOT / f"{f}.md").is_file() or (ROOT / f"{f}.ipynb").is_file(), f


# ----------------------------------------------------------------------------- committed clean
@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=_ids(ALL_NOTEBOOKS))
def test_committed_without_outputs(path: Path):
    nb = _read(path)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.outputs, f"cell {i} has outputs: run tools/sync_notebooks.py"
            assert cell.execution_count is None, f"cell {i} has an execution count"
    assert "widgets" not in nb.metadata, "saved widget state: run tools/sync_notebooks.py"


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=_ids(ALL_NOTEBOOKS))
def test_colab_cell_comes_from_config(path: Path):
    """Cell 1 is the Colab cell, generated from _config.yml's repository URL (one place)."""
    url, branch = sync.repository(ROOT)
    first = _read(path).cells[0]
    assert first.cell_type == "code"
    assert first.source == sync.colab_cell_source(url, branch), (
        "cell 1 is not the generated Colab cell: run tools/sync_notebooks.py")
    assert sync.COLAB_TAG in _tags(first)
    assert f"git+{url}@{branch}" in first.source
    assert 'if "google.colab" in sys.modules:' in first.source


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=_ids(ALL_NOTEBOOKS))
def test_setup_cell_second(path: Path):
    second = _read(path).cells[1]
    assert second.cell_type == "code" and "lv.setup_notebook(" in second.source, (
        "cell 2 must be the set-up cell: import llmviz as lv; lv.setup_notebook()")


def test_sync_tool_check_passes_on_the_repo():
    assert sync.main(["--check"]) == 0


def test_sync_tool_strips_and_rewrites(tmp_path: Path, capsys):
    url, branch = sync.repository(ROOT)
    nb = nbformat.v4.new_notebook()
    old = nbformat.v4.new_code_cell('# Colab only: old\nimport sys\nif "google.colab" in sys.modules:\n    pass')
    work = nbformat.v4.new_code_cell("1 + 1")
    work.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "2"}, execution_count=3)]
    work.execution_count = 3
    nb.cells = [nbformat.v4.new_markdown_cell("<!-- template note -->"), old, work]
    nb.metadata["widgets"] = {"state": {}}
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    assert sync.main(["--check", str(path)]) == 1
    assert "would change" in capsys.readouterr().out
    assert sync.main([str(path)]) == 0
    fixed = _read(path)
    assert fixed.cells[0].source == sync.colab_cell_source(url, branch)
    assert [c.cell_type for c in fixed.cells] == ["code", "markdown", "code"]
    assert fixed.cells[2].outputs == [] and fixed.cells[2].execution_count is None
    assert "widgets" not in fixed.metadata
    assert sync.main(["--check", str(path)]) == 0  # idempotent


def test_repository_url_must_be_https(tmp_path: Path):
    (tmp_path / "_config.yml").write_text("repository:\n  url: git@github.com:x/y\n")
    with pytest.raises(ValueError, match=r"repository.url must be an https URL, got 'git@github.com:x/y'"):
        sync.repository(tmp_path)


# ----------------------------------------------------------------------------- chapter shape
@pytest.mark.parametrize("path", [p for p in CHAPTERS if p.stem != GALLERY],
                         ids=[p.stem for p in CHAPTERS if p.stem != GALLERY])
def test_chapter_structure(path: Path):
    if not path.exists():
        pytest.fail(f"{path.name} missing")
    nb = _read(path)
    if sync.is_placeholder(nb):
        now = [s for s in _placeholders() if s != GALLERY]
        pytest.skip(f"{path.stem} is still a placeholder; chapters still placeholders "
                    f"({len(now)}): {', '.join(s[:2] for s in now)}")
    heads = [h.lower() for h in _headings(nb)]
    code = [c for c in nb.cells if c.cell_type == "code"]
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown").lower()
    problems = []
    first_md = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    number = int(path.stem[:2])
    if first_md is None or not re.search(rf"^# {number}\. \S", first_md.source, re.M):
        problems.append(f"the first markdown cell must hold the title '# {number}. ...' "
                        "(chapters carry their number; the toc does not number)")
    if "learning goals" not in markdown:
        problems.append("no learning goals")
    if not any("show_source(" in c.source for c in code):
        problems.append("no lv.show_source(...) of a library function")
    if not any("explore" in c.source for c in code):
        problems.append("no explorer (llmviz.explore)")
    if not any(h.startswith("exercise") for h in heads):
        problems.append("no 'Exercises' heading")
    solutions = [c for c in code if "hide-cell" in _tags(c) and re.search(r"^\s*assert\b", c.source, re.M)]
    if len(solutions) < 2:
        problems.append(f"{len(solutions)} exercise solution(s) in hide-cell code cells with an "
                        "assert; want 2-4")
    if not any(h.startswith(("summary", "recap")) for h in heads):
        problems.append("no 'Summary' heading")
    if any("%pip" in c.source for c in code[1:]):
        problems.append("%pip outside the Colab cell")
    if any(re.search(r"\bplt\.show\(\)", c.source) for c in code):
        problems.append("plt.show() (the figure is the cell's value)")
    assert not problems, f"{path.name}: " + "; ".join(problems)


def test_placeholders_are_flagged():
    """A notebook saying 'being written' must carry the placeholder flag, and vice versa."""
    for path in CHAPTERS:
        if not path.exists():
            continue
        nb = _read(path)
        says = any(sync.PLACEHOLDER_TEXT in c.source for c in nb.cells if c.cell_type == "markdown")
        assert says == sync.is_placeholder(nb), path.name
