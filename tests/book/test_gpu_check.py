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



def test_jobs_run_chapters_side_by_side_and_stop_ends_the_unfinished_one(tmp_path):
    folder = tmp_path / "nbs"
    folder.mkdir()
    _notebook(folder / "01_quick.ipynb", "x = 1")
    _notebook(folder / "02_slow.ipynb", "import time\ntime.sleep(120)")
    out = tmp_path / "out"
    code = gpu_check.main(["--only", "chapters", "--sizes", "cpu", "--jobs", "2", "--stop", "25",
                           "--notebooks", str(folder), "--out", str(out)])
    assert code == 1  # one chapter did not finish
    rows = {r["chapter"]: r for r in map(__import__("json").loads,
                                          (out / "chapters.jsonl").read_text().splitlines())}
    assert rows["01_quick"]["ok"] and rows["01_quick"]["size"] == "cpu"
    slow = rows["02_slow"]
    assert not slow["ok"] and slow["error"].startswith("not finished: stopped after")
    assert 15 < slow["seconds"] < 60  # stopped near --stop, not after the cell's 120 s
    report = (out / "report.md").read_text()
    assert "2 chapters at a time" in report and report.rstrip().endswith("1 of 2 passed.")
    with __import__("pytest").raises(ValueError, match="--jobs must be at least 1, got 0"):
        gpu_check.main(["--only", "chapters", "--jobs", "0", "--notebooks", str(folder), "--out", str(out)])
