"""Keep the chapter notebooks in the book's shape.

For every ``notebooks/*.ipynb`` this tool

* rewrites cell 1, the Colab install cell, from ``repository.url`` / ``repository.branch`` in
  ``_config.yml`` (the one place the URL lives);
* strips outputs, execution counts and saved widget state (notebooks are committed clean: the
  book build executes them);
* sets the Python 3 kernelspec when a notebook has none (jupytext conversions may lack it).

``--create-missing`` also writes a placeholder notebook for every chapter in ``_toc.yml`` that
does not exist yet, so the site builds while chapters are being written. Placeholders carry
``metadata.llmviz.placeholder = true``; an author overwrites the file (from
``tools/chapter_template.py``) and the flag goes with it.

Usage::

    python tools/sync_notebooks.py                  # rewrite in place
    python tools/sync_notebooks.py --check          # exit 1 if any notebook would change
    python tools/sync_notebooks.py notebooks/07_rope.ipynb   # just these files
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "COLAB_TAG",
    "SETUP_SOURCE",
    "repository",
    "colab_cell_source",
    "toc_files",
    "chapter_paths",
    "is_placeholder",
    "normalise",
    "placeholder_notebook",
    "main",
]

#: Tag of the Colab cell: the site does not show it (it is only for Colab), notebooks do.
COLAB_TAG = "remove-cell"
#: First line of the Colab cell: how the tools recognise it.
COLAB_MARKER = "# Colab only:"
#: The set-up cell every chapter starts with (cell 2).
SETUP_SOURCE = "import llmviz as lv\n\nlv.setup_notebook()"
PLACEHOLDER_TEXT = "This chapter is being written."


def repository(root: Path = ROOT) -> tuple[str, str]:
    """``(url, branch)`` from ``_config.yml``'s ``repository`` section."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    repo = config.get("repository") or {}
    url = str(repo.get("url", "")).rstrip("/")
    if not url.startswith("https://"):
        raise ValueError(
            f"_config.yml repository.url must be an https URL, got {url!r}; "
            "set it to the book's git repository"
        )
    return url, str(repo.get("branch") or "main")


def colab_cell_source(url: str, branch: str = "main") -> str:
    """The source of cell 1: installs llmviz on Colab, does nothing anywhere else."""
    return (
        f"{COLAB_MARKER} install llmviz from the book's repository. Elsewhere this cell does\n"
        "# nothing: install llmviz yourself (see the book's 'How to use this book' page).\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install -q "llmviz @ git+{url}@{branch}"'
    )


def toc_files(root: Path = ROOT) -> list[str]:
    """Every ``file:`` entry of ``_toc.yml`` (the root first), without extension."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc.get("parts", []))
    walk(toc.get("chapters", []))
    return files


def chapter_paths(root: Path = ROOT) -> list[Path]:
    """The notebooks the table of contents lists, in order (existing or not)."""
    return [root / f"{f}.ipynb" for f in toc_files(root) if f.startswith("notebooks/")]


def is_placeholder(nb) -> bool:
    return bool(nb.metadata.get("llmviz", {}).get("placeholder"))


def _colab_cell(url: str, branch: str, old=None):
    cell = nbformat.v4.new_code_cell(colab_cell_source(url, branch))
    cell.metadata["tags"] = [COLAB_TAG]
    if old is not None and "id" in old:
        cell["id"] = old["id"]
    else:
        cell["id"] = "colab-install"
    return cell


def normalise(nb, url: str, branch: str = "main"):
    """A copy of ``nb`` with the Colab cell rewritten and every output stripped."""
    nb = copy.deepcopy(nb)
    cells = nb.cells
    # The Colab cell is recognised by its marker among the first cells (a template comment cell
    # left in front of it does not hide it); it is moved to the front and rewritten.
    found = None
    for i, cell in enumerate(cells[:3]):
        if cell.cell_type == "code" and (COLAB_MARKER in cell.source or "google.colab" in cell.source):
            found = i
            break
    old = cells.pop(found) if found is not None else None
    cells.insert(0, _colab_cell(url, branch, old=old))
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
        cell.metadata.pop("collapsed", None)
    nb.metadata.pop("widgets", None)
    nb.metadata.setdefault(
        "kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"}
    )
    nb.metadata.setdefault("language_info", {"name": "python"})
    nb.nbformat, nb.nbformat_minor = 4, max(nb.get("nbformat_minor", 5), 5)
    return nb


def placeholder_notebook(title: str, url: str, branch: str = "main"):
    """A chapter that builds: title, the Colab and set-up cells, and one line of text."""
    nb = nbformat.v4.new_notebook()
    setup = nbformat.v4.new_code_cell(SETUP_SOURCE)
    setup["id"] = "setup"
    setup.metadata["tags"] = ["hide-cell"]
    text = nbformat.v4.new_markdown_cell(f"# {title}\n\n{PLACEHOLDER_TEXT}")
    text["id"] = "placeholder"
    nb.cells = [setup, text]
    nb.metadata["llmviz"] = {"placeholder": True}
    return normalise(nb, url, branch)


#: Chapter titles (SYLLABUS.md), used for placeholders only.
TITLES = {
    "00_demo_gallery": "Gallery of figures and explorers",
    "01_self_attention": "Self-attention from scratch",
    "02_multi_head_attention": "Multi-head attention",
    "03_gqa_kv_cache": "MQA, GQA and the KV cache",
    "04_attention_at_scale": "Attention at scale",
    "05_absolute_position": "Why position, and absolute encodings",
    "06_relative_position": "Relative position",
    "07_rope": "RoPE",
    "08_alibi": "ALiBi",
    "09_length_extrapolation": "Length extrapolation: the experiment",
    "10_normalisation": "Normalisation",
    "11_residual_and_norm_placement": "Residual stream and norm placement",
    "12_feed_forward": "Feed-forward networks and activations",
    "13_depth_vs_width": "Depth vs width",
    "14_architecture_zoo": "The architecture zoo",
    "15_small_llama": "A small Llama from scratch",
}


def _title_from_name(path: Path) -> str:
    """``"7. RoPE"``: chapters carry their number in the title (the toc does not number)."""
    title = TITLES.get(path.stem, path.stem.split("_", 1)[-1].replace("_", " ").capitalize())
    prefix = path.stem.split("_", 1)[0]
    return f"{int(prefix)}. {title}" if prefix.isdigit() and int(prefix) > 0 else title


def _dump(nb) -> str:
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: notebooks/*.ipynb)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook would change")
    parser.add_argument("--create-missing", action="store_true",
                        help="write placeholder notebooks for chapters in _toc.yml that do not exist")
    args = parser.parse_args(argv)

    url, branch = repository()
    if args.create_missing and not args.check:
        for path in chapter_paths():
            if not path.exists():
                path.write_text(_dump(placeholder_notebook(_title_from_name(path), url, branch)),
                                encoding="utf-8")
                print(f"created placeholder {path.relative_to(ROOT)}")

    paths = args.paths or sorted((ROOT / "notebooks").glob("*.ipynb"))
    stale = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        new = _dump(normalise(nb, url, branch))
        if new != text:
            stale.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    verb = "would change" if args.check else "rewrote"
    for path in stale:
        print(f"{verb} {path}")
    if args.check and stale:
        print("run `python tools/sync_notebooks.py` and commit the result", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
