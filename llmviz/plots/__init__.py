"""llmviz figures: matplotlib/seaborn (axes-level: ``ax=None`` in, ``Axes`` out) and plotly."""

from ._style import (
    DIVERGING,
    PALETTE,
    SEQUENTIAL,
    footnote,
    get_ax,
    provenance,
    save,
)

__all__ = ["PALETTE", "SEQUENTIAL", "DIVERGING", "get_ax", "provenance", "footnote", "save"]
