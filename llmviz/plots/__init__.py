from .._lazy import lazy_submodules

"""llmviz figures: matplotlib/seaborn (axes-level: ``ax=None`` in, ``Axes`` out) and plotly.

Names: ``plot_*`` draws with matplotlib, ``plot_*_plotly`` with plotly. Shared keywords:
``ax=``, ``log_y=`` (logarithmic y axis), ``panel_size=`` (one panel of a grid, in inches: a
number or ``(width, height)``), ``vmax=``, and ``layer=``/``batch=``/``head=`` selectors for
attention weights (:func:`select_weights`). Plots draw; the numbers come from the library.
"""


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


# ``llmviz.plots.<submodule>`` without importing it by hand: imported on first access.
__getattr__, __dir__ = lazy_submodules(__name__, __path__, globals())
