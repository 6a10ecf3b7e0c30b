"""Figures for absolute positions (chapter 5): the sinusoidal table and scores against offset.

Axes-level functions take ``ax=None`` and return the Axes. Inputs are torch tensors or numpy
arrays, drawn exactly as given: the numbers come from :mod:`llmviz.position.sinusoidal`.

Shapes: T positions, C model dim.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .._data import to_numpy
from .._style import DIVERGING, PALETTE, get_ax

__all__ = ["plot_sinusoidal_heatmap", "plot_sinusoidal_waves", "plot_score_vs_offset"]


# ----------------------------------------------------------------------------- sinusoidal
def plot_sinusoidal_heatmap(pe: Any, *, ax=None, title: str | None = None):
    """Encoding table as an image: position down, dimension across, colour -1..1.

    Args:
        pe: (T, C) encodings, e.g. ``sinusoidal_encoding(T, C)``.
    """
    ax = get_ax(ax, figsize=(7.0, 4.0))
    table = to_numpy(pe)
    if table.ndim != 2:
        raise ValueError(f"pe must be (T, C), got shape {table.shape}")
    im = ax.imshow(table, aspect="auto", cmap=DIVERGING, vmin=-1.0, vmax=1.0,
                   interpolation="nearest")
    ax.figure.colorbar(im, ax=ax, label="value")
    ax.set_xlabel("dimension (C)")
    ax.set_ylabel("position (T)")
    ax.set_title(title or f"sinusoidal encoding, T={table.shape[0]}, C={table.shape[1]}")
    return ax


def plot_sinusoidal_waves(
    pe: Any, dims: Sequence[int], *, ax=None, title: str | None = None
):
    """Selected columns of the encoding against position, one line per dimension."""
    ax = get_ax(ax, figsize=(7.0, 3.5))
    table = to_numpy(pe)
    for k, d in enumerate(dims):
        if not 0 <= d < table.shape[1]:
            raise ValueError(f"dimension {d} is out of range for C={table.shape[1]}")
        ax.plot(np.arange(table.shape[0]), table[:, d], color=PALETTE[k % len(PALETTE)],
                label=f"dim {d}")
    ax.set_xlabel("position")
    ax.set_ylabel("PE(position, dim)")
    ax.set_ylim(-1.1, 1.1)
    ax.legend(loc="upper right", fontsize=8, ncol=min(len(dims), 4))
    ax.set_title(title or "one wave per dimension")
    return ax


def plot_score_vs_offset(
    offsets: Any,
    scores: Any | Sequence[Any],
    *,
    labels: Sequence[str] | None = None,
    ax=None,
    title: str | None = None,
    ylabel: str = "score",
):
    """One or more score curves against the offset.

    Args:
        offsets: (N,) x values.
        scores: (N,), (K, N) or a list of K (N,) curves.
        labels: K legend labels.
    """
    ax = get_ax(ax, figsize=(7.0, 3.5))
    x = to_numpy(offsets)
    if isinstance(scores, (list, tuple)):
        curves = list(scores)
    else:
        arr = to_numpy(scores)
        curves = [arr] if arr.ndim == 1 else list(arr)  # (N,) or (K, N): K curves
    for k, y in enumerate(curves):
        label = labels[k] if labels else None
        ax.plot(x, to_numpy(y), color=PALETTE[k % len(PALETTE)], label=label, lw=1.4)
    ax.axhline(0, color="#999", lw=0.6)
    ax.set_xlabel("offset")
    ax.set_ylabel(ylabel)
    if labels:
        ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return ax
