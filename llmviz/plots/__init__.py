"""llmviz figures: matplotlib/seaborn (axes-level: ``ax=None`` in, ``Axes`` out) and plotly.

Names: ``plot_*`` draws with matplotlib, ``plot_*_plotly`` with plotly. Shared keywords:
``ax=``, ``log_y=`` (logarithmic y axis), ``panel_size=`` (one panel of a grid, in inches: a
number or ``(width, height)``), ``vmax=``, and ``layer=``/``batch=``/``head=`` selectors for
attention weights (:func:`select_weights`). Plots draw; the numbers come from the library.
"""

import importlib
import importlib.util
import pkgutil

from ._data import select_weights
from ._style import (
    DIVERGING,
    PALETTE,
    PLOTLY_DIVERGING,
    PLOTLY_SEQUENTIAL,
    SEQUENTIAL,
    footnote,
    get_ax,
    provenance,
    save,
)

__all__ = [
    "PALETTE", "SEQUENTIAL", "DIVERGING", "get_ax", "provenance", "footnote", "save",
    "PLOTLY_SEQUENTIAL", "PLOTLY_DIVERGING", "select_weights",
]


def __getattr__(name: str):
    """``llmviz.plots.<submodule>`` without importing it by hand: imported on first access."""
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    subs = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
    return sorted(set(globals()) | set(subs))
