"""The package's layout rules, checked on the source itself.

* every module is at most 350 lines (a hard 400 where the file states its reason);
* no module imports a private name from another module (shared helpers live in ``_``-modules);
* ``plots/`` and ``explore/`` draw: they train nothing and call no optimiser;
* notebooks contain no optimiser loop, no timing harness and no thread calls: the library's
  ``train``, ``llmviz.training.bench`` and ``setup_notebook``/``llmviz.threads`` do that;
* tests mirror the package: each subpackage has its own test folder.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "llmviz"
MODULES = sorted(p for p in PKG.rglob("*.py"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_module_size(path):
    n = len(path.read_text().splitlines())
    text = path.read_text()
    limit = 400 if "line budget:" in text else 350  # a file over 350 says why, in those words
    assert n <= limit, f"{_rel(path)} has {n} lines (limit {limit}); split it by concept"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    pkg = _module_name(path).split(".")
    if path.name != "__init__.py":
        pkg = pkg[:-1]
    base = pkg[: len(pkg) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_private_module(dotted: str) -> bool:
    return any(part.startswith("_") and part != "__init__" for part in dotted.split("."))


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_no_private_name_imported_from_another_module(path):
    tree = ast.parse(path.read_text())
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = _resolve(path, node)
        if not source.startswith("llmviz") or _is_private_module(source):
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                bad.append(f"{alias.name} from {source}")
    assert not bad, f"{_rel(path)} imports private names: {bad}; move the helper to a _-module"


DRAWING = [p for p in MODULES if p.relative_to(PKG).parts[0] in ("plots", "explore")]
TRAINING = re.compile(r"\.backward\(|torch\.optim|\boptimizer\b|\blv\.train\(|\btrain\(")


@pytest.mark.parametrize("path", DRAWING, ids=_rel)
def test_plots_and_explorers_train_nothing(path):
    hits = [line.strip() for line in path.read_text().splitlines() if TRAINING.search(line)]
    assert not hits, f"{_rel(path)} trains or optimises: {hits}"


def _code_cells(nb_path: Path):
    nb = json.loads(nb_path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            yield "".join(cell["source"])


NOTEBOOK_RULES = {
    # a gradient probe (loss.backward() to read gradient norms) is a measurement, not a loop
    "an optimiser": re.compile(r"torch\.optim|\.zero_grad\(|\b(opt|optim|optimizer)\.step\("),
    "a timing harness": re.compile(r"time\.perf_counter|time\.time\(|timeit|benchmark\.Timer"),
    "a thread call": re.compile(r"set_num_threads|set_num_interop_threads"),
}


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_leave_loops_timing_and_threads_to_the_library(nb_path):
    found = []
    for source in _code_cells(nb_path):
        for what, pattern in NOTEBOOK_RULES.items():
            for line in source.splitlines():
                if pattern.search(line) and not line.lstrip().startswith("#"):
                    found.append(f"{what}: {line.strip()}")
    assert not found, f"{nb_path.name} holds {found}; use lv.train / llmviz.training.bench / lv.threads"


def test_tests_mirror_the_package():
    subpackages = sorted(
        p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    )
    missing = [name for name in subpackages if not (ROOT / "tests" / name).is_dir()]
    assert not missing, f"no tests/<name>/ folder for subpackages {missing}"
