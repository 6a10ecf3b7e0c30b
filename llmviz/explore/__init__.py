"""Explorers: live ipywidgets in a kernel, plotly sliders on the static site (see ``_core``)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
from typing import Callable

from .._lazy import lazy_submodules
from ._core import (
    Control,
    Explorer,
    Frame,
    face,
)

__all__ = ["Control", "Explorer", "Frame", "face", "factories"]


def factories() -> list[tuple[str, Callable[..., Explorer], tuple[str, ...]]]:
    """Every public ``*_explorer`` factory of the ``llmviz.explore`` submodules.

    Returns ``(qualified name, factory, required parameter names)`` triples, e.g.
    ``("position.rope_explorer", rope_explorer, ())``; a factory that needs data (such as a
    model's attention weights) lists the parameters it cannot be called without.
    """
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for name in getattr(module, "__all__", []):
            fn = getattr(module, name)
            if not (name.endswith("_explorer") and inspect.isfunction(fn)):
                continue
            needs = tuple(
                p.name for p in inspect.signature(fn).parameters.values()
                if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            )
            found.append((f"{info.name}.{name}", fn, needs))
    return found


# ``llmviz.explore.<submodule>`` without importing it by hand: imported on first access.
__getattr__, __dir__ = lazy_submodules(__name__, __path__, globals())
