"""Glue for the prose: numbers and phrases the text shows exactly as code formatted them.

Re-exported by :mod:`llmviz.evidence.claims` (``glue_number``, ``glue_text``); a claim glues its
parts through :func:`_glue`.
"""

from __future__ import annotations

import re

import torch

__all__ = ["glue_number", "glue_text"]


class _Text:
    """Text to glue exactly as written.

    ``{glue:text}`` passes the glued ``text/plain`` through ``ast.literal_eval``: a bare
    ``+0.042`` would come out as ``0.042`` and ``3e-04`` as ``0.0003``. The quoted form
    evaluates to the string itself, so the prose shows what was formatted here.
    """

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return repr(self.text)

    def _repr_markdown_(self) -> str:
        return self.text


def _glue(name: str, text: str) -> None:
    """Glue for the book (myst-nb present); without myst-nb (Colab) print ``name = text``."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    if get_ipython() is None:  # outside a kernel IPython's display would print instead
        return
    try:
        from myst_nb import glue
    except Exception:  # not installed (Colab, plain Jupyter) or broken: the reader reads it here
        print(f"{name} = {text}")
        return
    glue(name, _Text(text), display=False)


def glue_number(name: str, value: float, fmt: str = ".3g") -> str:
    """Glue ``format(value, fmt)`` under ``name`` for ``{glue:text}`name``` in the prose.

    Returns the text glued. In a kernel without myst-nb (Colab) it prints ``name = text``;
    outside a kernel it only returns it.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w.-]*", name):
        raise ValueError(f"glue name must be an identifier-like str, got {name!r}")
    if isinstance(value, torch.Tensor):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"value must be a number, got {type(value).__name__} {value!r:.60}")
    text = format(value, fmt)
    _glue(name, text)
    return text


def glue_text(name: str, text: str) -> str:
    """Glue ``text`` (a number already formatted, or a phrase chosen by code from the data, such
    as "more than" / "fewer than") under ``name`` for ``{glue:text}`name``` in the prose.

    Returns the text. In a kernel without myst-nb (Colab) it prints ``name = text``; outside a
    kernel it only returns it.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w.-]*", name):
        raise ValueError(f"glue name must be an identifier-like str, got {name!r}")
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__} {text!r:.60}; "
                        "use glue_number for numbers")
    _glue(name, text)
    return text
