"""``glue(name, value, display=False)``: a drop-in for ``myst_nb.glue`` that needs no myst-nb.

A chapter imports ``from llmviz.evidence import glue`` instead of ``from myst_nb import glue``:
in the book build the value is glued for ``{glue:text}`name``` exactly as
:func:`~llmviz.evidence.glue_text` and :func:`~llmviz.evidence.glue_number` glue it; on Colab,
where myst-nb is not installed, the reader sees ``name = value`` printed under the cell instead
of a ``ModuleNotFoundError``.
"""

from __future__ import annotations

from typing import Any

import torch

from .claims import glue_number, glue_text

__all__ = ["glue"]


def glue(name: str, value: Any, display: bool = True) -> str:
    """Glue a str (as written) or a number (``format(value, ".3g")``) under ``name``.

    ``display=True`` also shows the text under the cell, as ``myst_nb.glue`` does. Returns the
    text glued. Figures and tables are not glued here: show them in their cell.

    Raises:
        TypeError: ``value`` is neither a str nor a number, or ``display`` is not a bool.
        ValueError: ``name`` is not identifier-like.
    """
    if not isinstance(display, bool):
        raise TypeError(f"display must be True or False, got {display!r}")
    if isinstance(value, str):
        text = glue_text(name, value)
    elif isinstance(value, (int, float, torch.Tensor)) and not isinstance(value, bool):
        text = glue_number(name, value)
    else:
        raise TypeError(
            f"glue({name!r}, ...) takes a str or a number, got {type(value).__name__}; "
            "format it first (glue_text) or show the object in its cell"
        )
    if display:
        print(text)
    return text
