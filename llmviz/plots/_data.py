"""What the plot functions accept, brought to one form before anything is drawn.

* :func:`to_numpy`: a torch tensor (any dtype, any device) or array-like -> float64 ``ndarray``.
* :func:`select_weights`: attention weights in every layout the library and Hugging Face produce
  (``(T, S)``, ``(H, T, S)``, ``(B, H, T, S)`` or a per-layer list) -> ``(H, T, S)`` or ``(T, S)``.
* :func:`query_key_labels`: token labels of the rows (queries) and columns (keys) of a map.
* :func:`color_limit`: the top of a shared colour scale (given, or the largest value shown).
* :func:`color_range`: ``(vmin, vmax)``: 0 up for weights, symmetric about 0 for raw scores.
* :func:`panel_inches`: ``panel_size=`` (one number or ``(width, height)``) as a pair.

Shape letters: B batch, H heads, T queries, S keys. Queries are the last T of the S keys
(:func:`llmviz.attention.masks.query_positions`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from .._checks import check_int_in
from ..attention.masks import query_positions

__all__ = ["curve", "to_numpy", "select_weights", "query_key_labels", "color_limit", "color_range",
           "panel_inches"]


def to_numpy(x: Any) -> np.ndarray:
    """``x`` as a float64 numpy array (tensors are detached and moved to the CPU first)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().to(torch.float64).cpu().numpy()
    return np.asarray(x, dtype=float)


def select_weights(
    weights: Any, *, layer: int | None = None, batch: int = 0, head: int | None = None
) -> np.ndarray:
    """Reduce any accepted input to ``(H, T, S)`` (``head=None``) or ``(T, S)``.

    Args:
        weights: ``(T, S)``, ``(H, T, S)``, ``(B, H, T, S)`` or a per-layer list of those.
        layer: which layer of a list (required when the list has several layers).
        batch: which batch element of a 4-D input.
        head: which head; None keeps all heads.

    Returns:
        float64 ``(H, T, S)`` or ``(T, S)`` array.
    """
    if isinstance(weights, (list, tuple)):
        if not weights:
            raise ValueError("weights is an empty list; expected one (B, H, T, S) per layer")
        if layer is None:
            if len(weights) > 1:
                raise ValueError(
                    f"weights is a list of {len(weights)} layers; pick one with "
                    f"layer=0..{len(weights) - 1}"
                )
            layer = 0
        check_int_in(layer, "layer", -len(weights))
        if not -len(weights) <= layer < len(weights):
            raise ValueError(f"layer={layer} is out of range for {len(weights)} layers")
        weights = weights[layer]
    elif layer not in (None, 0):
        raise ValueError(
            f"layer={layer} given, but weights is a single tensor, not a per-layer list"
        )
    w = to_numpy(weights)
    if w.ndim == 4:
        check_int_in(batch, "batch", -w.shape[0])
        if not -w.shape[0] <= batch < w.shape[0]:
            raise ValueError(f"batch={batch} is out of range for batch size {w.shape[0]}")
        w = w[batch]
    if w.ndim == 2:
        if head not in (None, 0):
            raise ValueError(
                f"head={head} given, but the weights have no head axis (shape (T, S))"
            )
        return w
    if w.ndim != 3:
        raise ValueError(
            "weights must be (T, S), (H, T, S), (B, H, T, S) or a per-layer list; got shape "
            f"{tuple(to_numpy(weights).shape)}"
        )
    if head is None:
        return w
    if not -w.shape[0] <= head < w.shape[0]:
        raise ValueError(f"head={head} is out of range for {w.shape[0]} heads")
    return w[head]


def query_key_labels(
    tokens: Sequence[Any] | None, T: int, S: int
) -> tuple[list[str] | None, list[str] | None]:
    """``(query labels, key labels)`` for a ``(T, S)`` map: one token per key, and the queries'
    tokens are those of the last T keys. ``(None, None)`` without tokens."""
    if tokens is None:
        return None, None
    keys = [str(t) for t in tokens]
    if len(keys) != S:
        raise ValueError(
            f"tokens has {len(keys)} entries but the weights have S={S} keys; "
            "pass one label per key"
        )
    return [keys[i] for i in query_positions(T, S).tolist()], keys


def color_limit(values: np.ndarray, vmax: float | None) -> float:
    """Top of a colour scale that starts at 0: ``vmax`` if given (must be > 0), else the largest
    value shown (1 when there is nothing positive), so no panel of a comparison is clipped."""
    if vmax is not None:
        if vmax <= 0:
            raise ValueError(f"vmax must be positive, got {vmax}")
        return float(vmax)
    top = float(np.nanmax(values)) if values.size else 1.0
    return top if top > 0 else 1.0


def color_range(values: np.ndarray, vmax: float | None) -> tuple[float, float]:
    """``(vmin, vmax)`` of a shared colour scale that clips nothing.

    Weights (no negative value): ``(0, color_limit(values, vmax))``. Raw scores (a negative
    finite value): symmetric about 0, ``(-top, top)`` with ``top`` = ``vmax`` or the largest
    finite ``|score|``; masked ``-inf`` scores do not set the scale.
    """
    finite = values[np.isfinite(values)]
    if finite.size and float(finite.min()) < 0:
        top = color_limit(finite, vmax) if vmax is not None else float(np.abs(finite).max())
        return -top, top
    return 0.0, color_limit(finite, vmax)


def curve(values: Any, name: str, length: int | None = None) -> np.ndarray:
    """``values`` as a non-empty 1-D float array (of ``length`` points when given): the x or
    y values of one line, checked so that matplotlib never sees mismatched shapes."""
    a = np.asarray(to_numpy(values), dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence (N,), got shape {a.shape}")
    if length is not None and a.size != length:
        raise ValueError(f"{name} has {a.size} points but the offsets have {length}; pass one "
                         "value per offset")
    return a


def panel_inches(panel_size: float | tuple[float, float]) -> tuple[float, float]:
    """``(width, height)`` of one panel from ``panel_size``: a number (square) or a pair."""
    if isinstance(panel_size, (int, float)) and not isinstance(panel_size, bool):
        width = height = float(panel_size)
    elif isinstance(panel_size, (tuple, list)) and len(panel_size) == 2:
        width, height = (float(v) for v in panel_size)
    else:
        raise TypeError(
            f"panel_size must be a number of inches or a (width, height) pair, got {panel_size!r}"
        )
    if not (0 < width < 1000 and 0 < height < 1000):  # also refuses NaN and inf
        raise ValueError(f"panel_size must be a positive finite number of inches, got {panel_size!r}")
    return width, height
