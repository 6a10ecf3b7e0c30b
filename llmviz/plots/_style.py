"""Shared look of every llmviz figure: colour-blind-safe palettes, provenance footnotes, export.

Plot functions follow seaborn's contract: axes-level functions take ``ax=None`` and return the
``Axes``; figure-level functions return the ``Figure``. Nothing here calls ``plt.show()``.
"""

from __future__ import annotations

import pathlib
from typing import Any

import matplotlib.pyplot as plt
import torch

__all__ = [
    "PALETTE",
    "SEQUENTIAL",
    "DIVERGING",
    "PLOTLY_SEQUENTIAL",
    "PLOTLY_DIVERGING",
    "get_ax",
    "provenance",
    "footnote",
    "save",
]

#: Okabe-Ito: distinguishable under the common colour-vision deficiencies.
PALETTE = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
]
#: Sequential colour map for weights/probabilities (perceptually uniform, CVD-safe).
SEQUENTIAL = "viridis"
#: Diverging colour map for signed quantities (biases, scores), centred on zero by the caller.
DIVERGING = "RdBu_r"
#: The same scales for plotly figures.
PLOTLY_SEQUENTIAL = "Viridis"
PLOTLY_DIVERGING = "RdBu_r"


def get_ax(ax: Any = None, *, figsize: tuple[float, float] = (6.0, 4.0)):
    """Return ``ax`` or a fresh Axes on a new figure of ``figsize`` inches."""
    if ax is None:
        if (not isinstance(figsize, (tuple, list)) or len(figsize) != 2
                or not all(isinstance(v, (int, float)) and 0 < v < 1000 for v in figsize)):
            raise ValueError(f"figsize must be a (width, height) pair of positive inches, got {figsize!r}")
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def provenance(device: torch.device | str | None = None, **size: Any) -> str:
    """One line saying where a figure came from: device, torch version and the sizes used.

    >>> provenance("cpu", d_model=64, steps=400)  # doctest: +SKIP
    'cpu · torch 2.13.0 · d_model=64, steps=400'
    """
    if device is None:
        from .. import runtime

        device = runtime.device()
    dev = torch.device(device)
    name = str(dev)
    if dev.type == "cuda" and torch.cuda.is_available():
        name = torch.cuda.get_device_name(dev)
    parts = [name, f"torch {torch.__version__.split('+')[0]}"]
    if size:
        parts.append(", ".join(f"{k}={v}" for k, v in size.items()))
    return " · ".join(parts)


def footnote(target: Any, text: str) -> Any:
    """Write ``text`` small in the bottom-right corner of a matplotlib Figure (or an Axes' figure)
    or under a plotly figure; returns ``target``."""
    if hasattr(target, "update_layout"):  # plotly
        target.add_annotation(
            text=text, xref="paper", yref="paper", x=1, y=-0.12, showarrow=False,
            xanchor="right", yanchor="top", font={"size": 10, "color": "#666"},
        )
        return target
    fig = target.figure if hasattr(target, "figure") and not hasattr(target, "savefig") else target
    fig.text(0.995, 0.005, text, ha="right", va="bottom", fontsize=7, color="#666")
    engine = fig.get_layout_engine()
    if engine is not None and hasattr(engine, "set"):
        # Keep the axes (and their tick labels) clear of the footnote: reserve a strip about
        # two text lines high at the bottom of the layout.
        strip = min(0.2, 2.2 * 7 / 72 / fig.get_figheight())
        try:
            engine.set(rect=(0, strip, 1, 1 - strip))  # (left, bottom, width, height)
        except TypeError:  # pragma: no cover - a layout engine without rect
            pass
    return target


def save(fig: Any, path: str | pathlib.Path, **kwargs: Any) -> pathlib.Path:
    """Save a figure in one call: matplotlib to .png/.svg/.pdf, plotly to standalone .html.

    The plotly HTML embeds plotly.js, so it opens offline.
    """
    path = pathlib.Path(path)
    suffix = path.suffix.lower()
    if hasattr(fig, "to_html"):  # plotly figure
        if suffix != ".html":
            raise ValueError(
                f"plotly figures save to .html (standalone, works offline), got {path.name!r}; "
                "draw the matplotlib version for .png/.svg"
            )
        path.write_text(fig.to_html(include_plotlyjs=True, full_html=True), encoding="utf-8")
        return path
    if hasattr(fig, "figure") and not hasattr(fig, "savefig"):  # an Axes
        fig = fig.figure
    if suffix not in (".png", ".svg", ".pdf"):
        raise ValueError(
            f"matplotlib figures save to .png, .svg or .pdf, got {path.name!r}"
        )
    kwargs.setdefault("dpi", 150)
    kwargs.setdefault("bbox_inches", "tight")
    fig.savefig(path, **kwargs)
    return path
