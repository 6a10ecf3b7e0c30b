"""tools/gpu_check.py decides pass/fail as it says: a raised cell, the Colab block, and a chapter
that trains without touching the GPU on a machine that has one (told here: CI has none)."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gpu_check  # noqa: E402


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return path


def test_a_chapter_that_trains_on_the_cpu_fails_on_a_gpu_machine_and_a_blocked_import_fails(tmp_path):
    cpu_trainer = _notebook(tmp_path / "98_cpu.ipynb", "import torch",
                            "m = torch.nn.Linear(2, 2)\nm(torch.ones(1, 2)).sum().backward()")
    colab = _notebook(tmp_path / "99_colab.ipynb", "x = 1", "from myst_nb import glue")
    failed = tmp_path / "failed"
    rows = [gpu_check.run_chapter(cpu_trainer, "cpu", limit=300, colab=True, gpu=True, failed_dir=failed),
            gpu_check.run_chapter(colab, "cpu", limit=300, colab=True, gpu=False, failed_dir=failed)]
    trainer, blocked = rows
    assert trainer["trains"] and trainer["peak_bytes"] == 0 and not trainer["cuda_initialised"]
    assert not trainer["ok"] and "allocated nothing on the GPU" in trainer["error"]
    assert not blocked["ok"] and "ModuleNotFoundError" in blocked["error"]
    assert blocked["error"].startswith("cell 2:")  # after the added blocker cell and `x = 1`
    assert sorted(p.name for p in failed.iterdir()) == ["98_cpu.cpu.ipynb", "99_colab.cpu.ipynb"]
    table = gpu_check.report(rows, "a test")
    assert "| 98_cpu | cpu |" in table and "FAIL: trains, yet allocated nothing" in table
    assert table.endswith("0 of 2 passed.")

