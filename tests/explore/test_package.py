"""``llmviz.explore``: submodules reachable as attributes without importing them by hand."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_submodules_load_on_attribute_access():
    code = (
        "import llmviz as lv\n"
        "import sys\n"
        "assert 'llmviz.explore.position' not in sys.modules\n"
        "print(lv.explore.position.__name__, 'attention' in dir(lv.explore))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["llmviz.explore.position", "True"]


def test_unknown_attribute_is_an_attribute_error():
    import llmviz.explore as explore

    with pytest.raises(AttributeError, match="has no attribute 'rope'"):
        explore.rope
