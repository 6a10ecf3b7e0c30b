"""``llmviz.plots``: submodules reachable as attributes without importing them by hand."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_submodules_load_on_attribute_access():
    run = _fresh(
        "import llmviz as lv\n"
        "import sys\n"
        "assert 'llmviz.plots.attention' not in sys.modules\n"
        "f = lv.plots.attention.plot_attention_heatmap\n"
        "print(f.__module__, lv.plots.norms.__name__, 'attention' in dir(lv.plots))\n"
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["llmviz.plots.attention", "llmviz.plots.norms", "True"]


def test_unknown_attribute_is_an_attribute_error():
    import llmviz.plots as plots

    with pytest.raises(AttributeError, match="has no attribute 'heatmaps'"):
        plots.heatmaps
    with pytest.raises(AttributeError, match="has no attribute '_data_x'"):
        plots._data_x
