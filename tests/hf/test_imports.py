"""The bridge sits below the drawing layers: no module of ``llmviz.hf`` imports from
``llmviz.plots``, ``llmviz.explore`` or ``llmviz.analysis``, not even inside a function, so the
``hf/anatomy <-> plots/anatomy`` circle cannot come back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HF = Path(__file__).resolve().parents[2] / "llmviz" / "hf"
ABOVE = ("plots", "explore", "analysis")


def _imported(path: Path) -> set[str]:
    """Top-level llmviz subpackages ``path`` imports (relative imports resolved)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").startswith("llmviz."):
                out.add(node.module.split(".")[1])
            elif node.level == 2 and node.module:  # from ..plots.x import y
                out.add(node.module.split(".")[0])
            elif node.level == 2:  # from .. import plots
                out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("llmviz."))
    return out


@pytest.mark.parametrize("path", sorted(HF.glob("*.py")), ids=lambda p: p.name)
def test_hf_imports_nothing_above_it(path):
    bad = sorted(_imported(path) & set(ABOVE))
    assert not bad, f"llmviz/hf/{path.name} imports llmviz.{bad}; those layers depend on hf, not the reverse"


def test_the_check_sees_a_lazy_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..plots.anatomy import plot_anatomy\n")
    assert _imported(probe) == {"plots"}
