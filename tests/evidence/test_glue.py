"""Glue without myst-nb: the book build glues, a Colab kernel prints, a script stays quiet."""

from __future__ import annotations

import sys
import types

import pytest
import torch

import IPython
from llmviz.evidence import Claim, glue, glue_number, glue_text, summarize


@pytest.fixture
def kernel(monkeypatch):
    """Pretend to run inside an IPython kernel."""
    shell = types.SimpleNamespace(user_ns={})
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)


@pytest.fixture
def no_myst(monkeypatch):
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # `import myst_nb` now raises ImportError


@pytest.fixture
def fake_myst(monkeypatch):
    glued = {}
    module = types.ModuleType("myst_nb")
    module.glue = lambda name, value, display=True: glued.setdefault(name, (repr(value), display))
    monkeypatch.setitem(sys.modules, "myst_nb", module)
    return glued


def test_colab_kernel_prints_every_glued_value(kernel, no_myst, capsys):
    assert glue_number("ch_x", 0.123456) == "0.123"
    assert glue_text("ch_y", "above") == "above"
    assert glue("ch_z", "below", display=False) == "below"
    assert glue("ch_n", torch.tensor(2.5), display=False) == "2.5"
    assert capsys.readouterr().out.splitlines() == [
        "ch_x = 0.123", "ch_y = above", "ch_z = below", "ch_n = 2.5",
    ]


def test_colab_kernel_prints_a_claims_verdict(kernel, no_myst, capsys):
    claim = Claim("x is above 0", summarize([1.0, 1.2, 0.9]), threshold=0.0)
    texts = claim.glue("ch_c")
    out = capsys.readouterr().out
    assert f"ch_c_verdict = {texts['ch_c_verdict']}" in out


def test_book_kernel_glues_through_myst_nb_and_prints_nothing(kernel, fake_myst, capsys):
    glue_number("ch_x", 3e-4, ".0e")
    glue("ch_y", "above", display=False)
    assert fake_myst == {"ch_x": ("'3e-04'", False), "ch_y": ("'above'", False)}
    assert capsys.readouterr().out == ""


def test_outside_a_kernel_glue_only_returns(no_myst, capsys):
    assert glue("ch_y", "above", display=False) == "above"
    assert capsys.readouterr().out == ""


def test_display_true_shows_the_text(fake_myst, capsys):
    glue("ch_y", "above")
    assert capsys.readouterr().out == "above\n"


def test_glue_refuses_what_it_cannot_glue():
    with pytest.raises(TypeError, match="show the object in its cell"):
        glue("ch_fig", [1, 2])
    with pytest.raises(TypeError, match="str or a number"):
        glue("ch_b", True)
    with pytest.raises(TypeError, match="display must be True or False"):
        glue("ch_y", "x", display="no")
    with pytest.raises(ValueError, match="identifier-like"):
        glue("not a name", "x")
