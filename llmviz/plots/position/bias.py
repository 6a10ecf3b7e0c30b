"""Figures for relative-position biases (chapters 6 and 8): ALiBi, T5 buckets, shared maps.

Panels that are meant to be compared (bias maps per head, score maps for shifted positions)
share ONE colour scale and one colour bar. The biases come from :mod:`llmviz.position.alibi`
and :mod:`llmviz.position.relative`; attention mass by distance from
:func:`llmviz.attention.metrics.mass_by_distance`.

Shapes: H heads, T query positions, S key positions (queries are the last T of S).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import SymLogNorm

from ...attention.masks import causal_mask
from ...attention.metrics import mass_by_distance
from .._data import to_numpy
from .._style import DIVERGING, PALETTE, SEQUENTIAL, get_ax
from ..._checks import check_flag

__all__ = [
    "plot_heatmap",
    "plot_shared_heatmaps",
    "plot_alibi_slopes",
    "plot_alibi_bias",
    "plot_attention_mass_vs_distance",
    "plot_t5_buckets",
    "plot_t5_bias",
]


def _symmetric_limit(*arrays: np.ndarray) -> float:
    finite = [np.abs(a[np.isfinite(a)]) for a in arrays]
    peak = max((float(f.max()) for f in finite if f.size), default=1.0)
    return peak or 1.0


# ----------------------------------------------------------------------------- heatmap grids
def plot_heatmap(
    matrix: Any,
    *,
    ax=None,
    title: str | None = None,
    cmap: str = DIVERGING,
    symmetric: bool = True,
    xlabel: str = "key position (S)",
    ylabel: str = "query position (T)",
    colorbar_label: str = "score",
):
    """One (T, S) matrix with its OWN colour bar, for quantities that must not share a scale
    (an index next to a score). ``symmetric``: scale ``[-max|v|, max|v|]``, else ``[min, max]``.
    """
    symmetric = check_flag(symmetric, "symmetric")
    a = to_numpy(matrix)
    if a.ndim != 2:
        raise ValueError(f"matrix must be (T, S), got shape {a.shape}")
    finite = a[np.isfinite(a)]
    if not finite.size:
        raise ValueError("matrix has no finite value to draw")
    if symmetric:
        lim = _symmetric_limit(a)
        vmin, vmax = -lim, lim
    else:
        vmin, vmax = float(finite.min()), float(finite.max())
    ax = get_ax(ax, figsize=(4.2, 3.4))
    im = ax.imshow(a, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest", aspect="auto")
    ax.figure.colorbar(im, ax=ax, label=colorbar_label, shrink=0.85)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    return ax


def plot_shared_heatmaps(
    maps: Sequence[Any],
    titles: Sequence[str],
    *,
    cmap: str = DIVERGING,
    symmetric: bool = True,
    ncols: int | None = None,
    xlabel: str = "key position (S)",
    ylabel: str = "query position (T)",
    colorbar_label: str = "score",
    log_scale: float | None = None,
):
    """Several (T, S) matrices on ONE colour scale with one colour bar (NaN cells left blank).

    ``symmetric``: the scale is ``[-max|v|, max|v|]`` over all panels (diverging quantities);
    otherwise ``[min, max]`` over all panels. ``log_scale``: a symmetric-log colour scale,
    linear within ``±log_scale`` and logarithmic beyond, still shared by every panel: values
    that differ by constant factors (ALiBi heads) then differ by constant colour steps.
    """
    symmetric = check_flag(symmetric, "symmetric")
    arrays = [to_numpy(m) for m in maps]
    if not arrays:
        raise ValueError("maps is empty; pass at least one (T, S) map and its title")
    if len(arrays) != len(titles):
        raise ValueError(f"got {len(arrays)} maps but {len(titles)} titles")
    if symmetric:
        lim = _symmetric_limit(*arrays)
        vmin, vmax = -lim, lim
    else:
        finite = np.concatenate([a[np.isfinite(a)] for a in arrays])
        vmin, vmax = float(finite.min()), float(finite.max())
    norm = None
    if log_scale is not None:
        if not isinstance(log_scale, (int, float)) or isinstance(log_scale, bool) or log_scale <= 0:
            raise ValueError(f"log_scale must be a positive number (the linear range), got {log_scale!r}")
        norm = SymLogNorm(linthresh=float(log_scale), vmin=vmin, vmax=vmax, base=10)
        vmin = vmax = None
    ncols = ncols or min(len(arrays), 4)
    nrows = math.ceil(len(arrays) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.9 * ncols + 0.8, 2.8 * nrows),
                             layout="constrained", squeeze=False)
    im = None
    for ax, a, t in zip(axes.flat, arrays, titles):
        im = ax.imshow(a, cmap=cmap, vmin=vmin, vmax=vmax, norm=norm, interpolation="nearest",
                       aspect="auto")
        ax.set_title(t, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
    for ax in list(axes.flat)[len(arrays):]:
        ax.axis("off")
    fig.colorbar(im, ax=axes, label=colorbar_label, shrink=0.85)
    return fig


# ----------------------------------------------------------------------------- ALiBi
def plot_alibi_slopes(slopes: Any | dict[str, Any], *, ax=None):
    """Slope per head on a log scale (a geometric sequence is a straight line)."""
    if slopes is None:
        raise TypeError("slopes must be the heads' slopes (a tensor, array or list, e.g. "
                        "alibi_slopes(8)) or a dict of them by label, got None")
    ax = get_ax(ax, figsize=(6.0, 3.5))
    series = slopes if isinstance(slopes, dict) else {"slopes": slopes}
    n = len(series)
    markers = "os^Dv"
    for k, (label, s) in enumerate(series.items()):
        s = to_numpy(s)
        # series that share values (12 heads start with the 8-head slopes) would hide each
        # other: earlier series are drawn on top, thinner and with smaller markers
        ax.plot(np.arange(s.size), s, marker=markers[k % len(markers)], color=PALETTE[k % len(PALETTE)],
                label=label, zorder=2 + n - k, lw=1.0 + 1.2 * k, markersize=4.0 + 2.5 * k,
                alpha=1.0 if k == 0 else 0.75)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("head h")
    ax.set_ylabel("slope m_h")
    if len(series) > 1:
        ax.legend(fontsize=8)
    return ax


def plot_alibi_bias(
    bias: Any, *, heads: Sequence[int] | None = None, mask_future: bool = True,
    slopes: Any | None = None, ncols: int | None = None, log_scale: float | None = None,
):
    """Per-head ALiBi bias maps (H, T, S) on one shared colour scale.

    ``mask_future`` blanks keys after the query (what the causal mask removes), assuming the
    queries are the last T of S positions. ``log_scale``: symmetric-log colour scale (see
    :func:`plot_shared_heatmaps`), so that heads whose slopes differ by factors of 2 all
    separate on one scale.
    """
    mask_future = check_flag(mask_future, "mask_future")
    b = to_numpy(bias)
    if b.ndim != 3:
        raise ValueError(f"bias must be (H, T, S), got shape {b.shape}")
    if b.size == 0 or np.isnan(b).all():
        raise ValueError(f"bias {b.shape} holds no number to draw (empty or all NaN)")
    H, T, S = b.shape
    heads = list(range(H)) if heads is None else list(heads)
    if mask_future:
        b = np.where(causal_mask(T, S).numpy()[None], b, np.nan)  # blank what the mask removes
    s = to_numpy(slopes) if slopes is not None else None
    titles = [f"head {h}" + (f" (m={s[h]:.3g})" if s is not None else "") for h in heads]
    return plot_shared_heatmaps([b[h] for h in heads], titles, cmap="viridis", symmetric=False,
                                ncols=ncols, colorbar_label="bias", log_scale=log_scale)


def plot_attention_mass_vs_distance(
    weights: Any, *, cumulative: bool = True, ax=None, labels: Sequence[str] | None = None
):
    """Per head: how much attention lands within distance d (cumulative) or at d."""
    cumulative = check_flag(cumulative, "cumulative")
    ax = get_ax(ax, figsize=(7.0, 3.8))
    mass = mass_by_distance(weights).double().numpy()  # (H, S)
    if cumulative:
        mass = np.cumsum(mass, axis=1)
    cmap = plt.get_cmap(SEQUENTIAL)
    H = mass.shape[0]
    for h in range(H):
        lab = labels[h] if labels else f"head {h}"
        ax.plot(np.arange(mass.shape[1]), mass[h], color=cmap(h / max(H - 1, 1)), label=lab)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("distance i - j")
    ax.set_ylabel("mass within distance" if cumulative else "mass at distance")
    ax.legend(fontsize=7, ncol=2)
    return ax


# ----------------------------------------------------------------------------- T5
def plot_t5_buckets(relative_position: Any, buckets: Any | dict[str, Any], *, ax=None):
    """Bucket index against relative position ``j - i`` (step plot, one line per setting)."""
    ax = get_ax(ax, figsize=(7.0, 3.5))
    x = to_numpy(relative_position)
    series = buckets if isinstance(buckets, dict) else {"buckets": buckets}
    for k, (label, b) in enumerate(series.items()):
        ax.step(x, to_numpy(b), where="mid", color=PALETTE[k % len(PALETTE)], label=label)
    ax.set_xlabel("relative position j - i")
    ax.set_ylabel("bucket")
    if len(series) > 1:
        ax.legend(fontsize=8)
    return ax


def plot_t5_bias(bias: Any, *, heads: Sequence[int] | None = None, ncols: int | None = None):
    """T5 learned bias per head (H, T, S) on one shared, zero-centred colour scale."""
    b = to_numpy(bias)
    if b.ndim != 3:
        raise ValueError(f"bias must be (H, T, S), got shape {b.shape}")
    heads = list(range(b.shape[0])) if heads is None else list(heads)
    return plot_shared_heatmaps([b[h] for h in heads], [f"head {h}" for h in heads],
                                ncols=ncols, colorbar_label="bias")
