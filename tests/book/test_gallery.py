"""The gallery (notebooks/00_demo_gallery.ipynb) draws every public figure function and explorer.

Its first paragraph says so; this test holds it to that: every public ``plot_*``, ``*_traces``
and ``*_explorer`` function of ``llmviz.plots`` and ``llmviz.explore`` (found by walking the
packages, not from a list typed here) must be called somewhere in the gallery's code cells.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import nbformat

import llmviz.explore
import llmviz.plots

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "notebooks" / "00_demo_gallery.ipynb"
DRAWS = re.compile(r"^(plot_\w+|\w+_traces|\w+_explorer)$")


def _public_drawing_functions() -> dict[str, str]:
    """{name: module} of every public drawing function in llmviz.plots and llmviz.explore."""
    found: dict[str, str] = {}
    for package in (llmviz.plots, llmviz.explore):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            module = importlib.import_module(info.name)
            for name, obj in vars(module).items():
                if (DRAWS.match(name) and inspect.isfunction(obj)
                        and obj.__module__ == module.__name__):
                    found[name] = module.__name__
    return found


def _gallery_calls() -> set[str]:
    nb = nbformat.read(GALLERY, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    return set(re.findall(r"\b(\w+)\s*\(", code))


def test_the_walk_finds_the_known_families():
    found = _public_drawing_functions()
    # a walk that found nothing would make the next test pass vacuously
    for name in ("plot_attention_heatmap", "plot_anatomy", "rope_explorer", "length_traces"):
        assert name in found, f"{name} not found by the walk: {sorted(found)}"


def test_gallery_calls_every_public_drawing_function():
    found = _public_drawing_functions()
    called = _gallery_calls()
    missing = sorted(f"{module}.{name}" for name, module in found.items() if name not in called)
    assert not missing, (
        "the gallery says it draws every figure function and explorer, but never calls: "
        + ", ".join(missing) + " (add a cell to notebooks/00_demo_gallery.ipynb)"
    )
