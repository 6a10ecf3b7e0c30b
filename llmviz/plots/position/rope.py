"""Figures for the position chapters (5-8).

Axes-level functions take ``ax=None`` and return the Axes; figure-level ones (several panels)
return the Figure; ``*_plotly`` functions return a ``plotly.graph_objects.Figure``. Everything
accepts torch tensors or numpy arrays and draws exactly what it is given: the numbers come from
``llmviz.position``.

Panels that are meant to be compared (bias maps per head, score maps for shifted positions)
share ONE colour scale and one colour bar.

Shapes: H heads, T query positions, S key positions, C model dim, R rotary dim.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from ._style import (
    DIVERGING,
    PALETTE,
    SEQUENTIAL,
    get_ax,
)

__all__ = [
    "plot_sinusoidal_heatmap",
    "plot_sinusoidal_waves",
    "plot_score_vs_offset",
    "plot_rope_clock_hands",
    "plot_rope_spiral",
    "plot_rope_spiral_plotly",
    "plot_rope_spectrum",
    "plot_rope_decay",
    "plot_shared_heatmaps",
    "plot_alibi_slopes",
    "plot_alibi_bias",
    "mass_by_distance",
    "plot_attention_mass_vs_distance",
    "plot_t5_buckets",
    "plot_t5_bias",
]


def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().to(torch.float64).cpu().numpy()
    return np.asarray(x, dtype=float)


def _symmetric_limit(*arrays: np.ndarray) -> float:
    finite = [np.abs(a[np.isfinite(a)]) for a in arrays]
    peak = max((float(f.max()) for f in finite if f.size), default=1.0)
    return peak or 1.0


# ----------------------------------------------------------------------------- sinusoidal
def plot_sinusoidal_heatmap(pe: Any, *, ax=None, title: str | None = None):
    """Encoding table as an image: position down, dimension across, colour -1..1.

    Args:
        pe: (T, C) encodings, e.g. ``sinusoidal_encoding(T, C)``.
    """
    ax = get_ax(ax, figsize=(7.0, 4.0))
    table = _np(pe)
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
    table = _np(pe)
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
    x = _np(offsets)
    if isinstance(scores, (list, tuple)):
        curves = list(scores)
    else:
        arr = _np(scores)
        curves = [arr] if arr.ndim == 1 else list(arr)  # (N,) or (K, N): K curves
    for k, y in enumerate(curves):
        label = labels[k] if labels else None
        ax.plot(x, _np(y), color=PALETTE[k % len(PALETTE)], label=label, lw=1.4)
    ax.axhline(0, color="#999", lw=0.6)
    ax.set_xlabel("offset")
    ax.set_ylabel(ylabel)
    if labels:
        ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return ax


# ----------------------------------------------------------------------------- RoPE pictures
def plot_rope_clock_hands(
    inv_freq: Any,
    positions: Sequence[int],
    pairs: Sequence[int],
    *,
    vector: Sequence[float] = (1.0, 0.0),
):
    """Each feature pair as a clock: the hand is the pair's 2-D vector rotated to each position.

    Args:
        inv_freq: (R/2,) radians per position of every pair.
        positions: the positions drawn as hands (darker = later).
        pairs: which pairs get a panel (e.g. the fastest and the slowest, side by side).
        vector: the (x, y) the pair holds before rotation.

    Returns:
        Figure with one polar-style panel per pair.
    """
    freqs = _np(inv_freq)
    fig, axes = plt.subplots(1, len(pairs), figsize=(3.2 * len(pairs), 3.4),
                             layout="constrained", squeeze=False)
    x0, y0 = float(vector[0]), float(vector[1])
    radius = math.hypot(x0, y0) or 1.0
    cmap = plt.get_cmap(SEQUENTIAL)
    pos = np.asarray(list(positions), dtype=float)
    for ax, p in zip(axes[0], pairs):
        if not 0 <= p < freqs.size:
            raise ValueError(f"pair {p} is out of range: there are {freqs.size} pairs")
        circle = np.linspace(0, 2 * np.pi, 200)
        ax.plot(radius * np.cos(circle), radius * np.sin(circle), color="#bbb", lw=0.8)
        for k, m in enumerate(pos):
            a = freqs[p] * m
            x = x0 * math.cos(a) - y0 * math.sin(a)
            y = x0 * math.sin(a) + y0 * math.cos(a)
            colour = cmap(k / max(len(pos) - 1, 1))
            ax.annotate("", xy=(x, y), xytext=(0, 0),
                        arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.5})
            ax.text(1.12 * x, 1.12 * y, f"{int(m)}", fontsize=7, ha="center", va="center",
                    color=colour)
        ax.set_xlim(-1.35 * radius, 1.35 * radius)
        ax.set_ylim(-1.35 * radius, 1.35 * radius)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        wavelength = 2 * math.pi / freqs[p]
        ax.set_title(f"pair {p}: {freqs[p]:.3g} rad/pos\nwavelength {wavelength:,.0f} tokens",
                     fontsize=9)
    return fig


def _spiral_points(inv_freq: Any, pair: int, positions: Any) -> tuple[np.ndarray, ...]:
    freqs = _np(inv_freq)
    if not 0 <= pair < freqs.size:
        raise ValueError(f"pair {pair} is out of range: there are {freqs.size} pairs")
    pos = _np(positions)
    angle = freqs[pair] * pos
    return np.cos(angle), np.sin(angle), pos


def plot_rope_spiral(inv_freq: Any, pair: int, positions: Any, *, ax=None):
    """The true RoPE helix of one pair: (cos, sin) of its angle against position, in 3-D.

    Both plotted coordinates belong to the SAME pair (one rotation plane); the third axis is
    the position itself.
    """
    c, s, pos = _spiral_points(inv_freq, pair, positions)
    if ax is None:
        fig = plt.figure(figsize=(5.0, 4.5), layout="constrained")
        ax = fig.add_subplot(projection="3d")
    ax.plot(c, s, pos, color=PALETTE[0], lw=1.2)
    ax.scatter(c, s, pos, c=pos, cmap=SEQUENTIAL, s=8)
    ax.set_xlabel(f"cos(m θ_{pair})")
    ax.set_ylabel(f"sin(m θ_{pair})")
    ax.set_zlabel("position m")
    ax.set_title(f"pair {pair}: a helix, one turn every {2 * math.pi / _np(inv_freq)[pair]:.3g} "
                 "positions", fontsize=9)
    return ax


def plot_rope_spiral_plotly(inv_freq: Any, pair: int, positions: Any):
    """Interactive version of :func:`plot_rope_spiral` (rotate it with the mouse)."""
    import plotly.graph_objects as go

    c, s, pos = _spiral_points(inv_freq, pair, positions)
    fig = go.Figure(go.Scatter3d(
        x=c, y=s, z=pos, mode="lines+markers",
        marker={"size": 2.5, "color": pos, "colorscale": "Viridis"},
        line={"color": PALETTE[0], "width": 3}, name=f"pair {pair}",
    ))
    fig.update_layout(
        template="plotly_white", height=480, margin={"l": 0, "r": 0, "t": 40, "b": 0},
        title=f"RoPE pair {pair}: (cos, sin) of the angle vs position",
        scene={"xaxis_title": "cos", "yaxis_title": "sin", "zaxis_title": "position",
               "xaxis": {"range": [-1.1, 1.1]}, "yaxis": {"range": [-1.1, 1.1]}},
    )
    return fig


def plot_rope_spectrum(
    wavelengths: dict[str, Any], *, context: int | None = None, ax=None
):
    """Wavelength (tokens per full turn) of every pair, log scale, one line per setting.

    Args:
        wavelengths: ``{label: (R/2,) wavelengths}``, e.g. one per base.
        context: optional training length drawn as a horizontal line: pairs above it never
            complete a turn inside the context.
    """
    ax = get_ax(ax, figsize=(7.0, 3.8))
    for k, (label, w) in enumerate(wavelengths.items()):
        w = _np(w)
        ax.plot(np.arange(w.size), w, marker="o", ms=2.5, color=PALETTE[k % len(PALETTE)],
                label=label)
    if context is not None:
        ax.axhline(context, color="#555", ls="--", lw=1)
        ax.text(0, context * 1.15, f"context {context}", fontsize=8, color="#555")
    ax.set_yscale("log")
    ax.set_xlabel("pair index i")
    ax.set_ylabel("wavelength 2π/θ_i (tokens)")
    ax.legend(fontsize=8)
    return ax


def plot_rope_decay(offsets: Any, bound: Any, actual: Any | Sequence[Any], *, ax=None,
                    labels: Sequence[str] | None = None, normalise: bool = False):
    """RoFormer's long-term-decay *upper bound* against actual q.k curves (which oscillate).

    ``normalise=True`` divides every curve by its own largest absolute value, so the *shapes*
    can be compared when the bound is far above the scores (it usually is).
    """
    ax = get_ax(ax, figsize=(7.0, 3.8))
    x = _np(offsets)
    actual_list = list(actual) if isinstance(actual, (list, tuple)) else [actual]

    def prep(y: Any) -> np.ndarray:
        y = _np(y)
        return y / (np.abs(y).max() or 1.0) if normalise else y

    for k, y in enumerate(actual_list):
        lab = labels[k] if labels else ("actual q·k" if k == 0 else None)
        ax.plot(x, prep(y), color=PALETTE[(k + 1) % len(PALETTE)], lw=0.9, alpha=0.85, label=lab)
    ax.plot(x, prep(bound), color="black", lw=1.8, label="upper bound")
    ax.set_xscale("symlog", linthresh=10)
    ax.axhline(0, color="#999", lw=0.6)
    ax.set_xlabel("relative distance m - n")
    ax.set_ylabel("value / its largest |value|" if normalise else "value")
    ax.legend(fontsize=8)
    return ax


# ----------------------------------------------------------------------------- heatmap grids
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
):
    """Several (T, S) matrices on ONE colour scale with one colour bar (NaN cells left blank).

    ``symmetric``: the scale is ``[-max|v|, max|v|]`` over all panels (diverging quantities);
    otherwise ``[min, max]`` over all panels.
    """
    arrays = [_np(m) for m in maps]
    if len(arrays) != len(titles):
        raise ValueError(f"got {len(arrays)} maps but {len(titles)} titles")
    if symmetric:
        lim = _symmetric_limit(*arrays)
        vmin, vmax = -lim, lim
    else:
        finite = np.concatenate([a[np.isfinite(a)] for a in arrays])
        vmin, vmax = float(finite.min()), float(finite.max())
    ncols = ncols or min(len(arrays), 4)
    nrows = math.ceil(len(arrays) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.9 * ncols + 0.8, 2.8 * nrows),
                             layout="constrained", squeeze=False)
    im = None
    for ax, a, t in zip(axes.flat, arrays, titles):
        im = ax.imshow(a, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest",
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
    ax = get_ax(ax, figsize=(6.0, 3.5))
    series = slopes if isinstance(slopes, dict) else {"slopes": slopes}
    for k, (label, s) in enumerate(series.items()):
        s = _np(s)
        ax.plot(np.arange(s.size), s, marker="o", color=PALETTE[k % len(PALETTE)], label=label)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("head h")
    ax.set_ylabel("slope m_h")
    if len(series) > 1:
        ax.legend(fontsize=8)
    return ax


def plot_alibi_bias(
    bias: Any, *, heads: Sequence[int] | None = None, mask_future: bool = True,
    slopes: Any | None = None, ncols: int | None = None,
):
    """Per-head ALiBi bias maps (H, T, S) on one shared colour scale.

    ``mask_future`` blanks keys after the query (what the causal mask removes), assuming the
    queries are the last T of S positions.
    """
    b = _np(bias)
    if b.ndim != 3:
        raise ValueError(f"bias must be (H, T, S), got shape {b.shape}")
    H, T, S = b.shape
    heads = list(range(H)) if heads is None else list(heads)
    if mask_future:
        future = np.arange(S)[None, :] > (np.arange(S - T, S)[:, None])
        b = np.where(future[None], np.nan, b)
    s = _np(slopes) if slopes is not None else None
    titles = [f"head {h}" + (f" (m={s[h]:.3g})" if s is not None else "") for h in heads]
    return plot_shared_heatmaps([b[h] for h in heads], titles, cmap="viridis", symmetric=False,
                                ncols=ncols, colorbar_label="bias")


def mass_by_distance(weights: Any) -> np.ndarray:
    """Attention mass at each backward distance, averaged over the queries.

    Args:
        weights: (H, T, S) attention weights, queries the last T of S.

    Returns:
        (H, S) array: entry [h, d] is the mean over queries i of ``w[h, i, i - d]`` (0 where
        ``d > i``), so each head's row sums to its average row mass (1 for causal weights).
    """
    w = _np(weights)
    if w.ndim != 3:
        raise ValueError(f"weights must be (H, T, S), got shape {w.shape}")
    H, T, S = w.shape
    out = np.zeros((H, S))
    for t in range(T):
        i = S - T + t
        out[:, : i + 1] += w[:, t, i::-1]  # distances 0 .. i
    return out / max(T, 1)


def plot_attention_mass_vs_distance(
    weights: Any, *, cumulative: bool = True, ax=None, labels: Sequence[str] | None = None
):
    """Per head: how much attention lands within distance d (cumulative) or at d."""
    ax = get_ax(ax, figsize=(7.0, 3.8))
    mass = mass_by_distance(weights)
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
    x = _np(relative_position)
    series = buckets if isinstance(buckets, dict) else {"buckets": buckets}
    for k, (label, b) in enumerate(series.items()):
        ax.step(x, _np(b), where="mid", color=PALETTE[k % len(PALETTE)], label=label)
    ax.set_xlabel("relative position j - i")
    ax.set_ylabel("bucket")
    if len(series) > 1:
        ax.legend(fontsize=8)
    return ax


def plot_t5_bias(bias: Any, *, heads: Sequence[int] | None = None, ncols: int | None = None):
    """T5 learned bias per head (H, T, S) on one shared, zero-centred colour scale."""
    b = _np(bias)
    if b.ndim != 3:
        raise ValueError(f"bias must be (H, T, S), got shape {b.shape}")
    heads = list(range(b.shape[0])) if heads is None else list(heads)
    return plot_shared_heatmaps([b[h] for h in heads], [f"head {h}" for h in heads],
                                ncols=ncols, colorbar_label="bias")
