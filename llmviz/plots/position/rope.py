"""Figures for RoPE (chapter 7): clock hands, the helix of one pair, wavelengths, decay.

Axes-level functions take ``ax=None`` and return the Axes; figure-level ones return the Figure;
``*_plotly`` functions return a ``plotly.graph_objects.Figure``. The frequencies and scores
come from :mod:`llmviz.position.rope` and :mod:`llmviz.position.rope_decay`.

Shapes: R rotary dim (R/2 pairs).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..._checks import check_flag, check_int_in
from .._data import curve, to_numpy
from .._style import PALETTE, SEQUENTIAL, get_ax

__all__ = [
    "plot_rope_clock_hands",
    "clock_positions",
    "plot_rope_spiral",
    "plot_rope_spiral_plotly",
    "plot_rope_spectrum",
    "plot_rope_decay",
]


# ----------------------------------------------------------------------------- RoPE pictures
def _wavelength_text(wavelength: float) -> str:
    # pair 0 turns once per 2π ≈ 6.28 positions: keep the decimals while they matter
    return f"{wavelength:,.2f}" if wavelength < 100 else f"{wavelength:,.0f}"


def plot_rope_clock_hands(
    inv_freq: Any,
    positions: Sequence[int] | Mapping[int, Sequence[int]],
    pairs: Sequence[int],
    *,
    vector: Sequence[float] = (1.0, 0.0),
):
    """Each feature pair as a clock: the hand is the pair's 2-D vector rotated to each position.

    Args:
        inv_freq: (R/2,) radians per position of every pair.
        positions: the positions drawn as hands (darker = later): one sequence for every
            panel, or a mapping ``pair -> positions`` so that a slow pair can be shown over a
            range in which it actually turns (see :func:`clock_positions`).
        pairs: which pairs get a panel (e.g. the fastest and the slowest, side by side).
        vector: the (x, y) the pair holds before rotation.

    Returns:
        Figure with one polar-style panel per pair.
    """
    freqs = to_numpy(inv_freq)
    if isinstance(positions, Mapping):
        missing = [p for p in pairs if p not in positions]
        if missing:
            raise ValueError(f"positions has no entry for pair(s) {missing}; give one per pair")
    fig, axes = plt.subplots(1, len(pairs), figsize=(3.2 * len(pairs), 3.4),
                             layout="constrained", squeeze=False)
    x0, y0 = float(vector[0]), float(vector[1])
    radius = math.hypot(x0, y0) or 1.0
    cmap = plt.get_cmap(SEQUENTIAL)
    for ax, p in zip(axes[0], pairs):
        if not 0 <= p < freqs.size:
            raise ValueError(f"pair {p} is out of range: there are {freqs.size} pairs")
        pos = np.asarray(list(positions[p] if isinstance(positions, Mapping) else positions),
                         dtype=float)
        circle = np.linspace(0, 2 * np.pi, 200)
        ax.plot(radius * np.cos(circle), radius * np.sin(circle), color="#bbb", lw=0.8)
        for k, m in enumerate(pos):
            a = freqs[p] * m
            x = x0 * math.cos(a) - y0 * math.sin(a)
            y = x0 * math.sin(a) + y0 * math.cos(a)
            colour = cmap(k / max(len(pos) - 1, 1))
            ax.annotate("", xy=(x, y), xytext=(0, 0),
                        arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.5})
            ax.text(1.14 * x, 1.14 * y, f"{int(m):,}", fontsize=7, ha="center", va="center",
                    color=colour)
        ax.set_xlim(-1.4 * radius, 1.4 * radius)
        ax.set_ylim(-1.4 * radius, 1.4 * radius)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        wavelength = 2 * math.pi / freqs[p]
        span = f"positions {int(pos.min()):,}..{int(pos.max()):,}" if pos.size else "no positions"
        ax.set_title(f"pair {p}: {freqs[p]:.3g} rad/pos, wavelength "
                     f"{_wavelength_text(wavelength)}\n{span}", fontsize=9)
    return fig


def clock_positions(inv_freq: Any, pairs: Sequence[int], *, n_hands: int = 8) -> dict[int, list[int]]:
    """Positions at which each pair's hand visibly moves: ``n_hands`` evenly spaced positions
    over about one turn, step ``max(1, round(wavelength / n_hands))``.

    A slow pair drawn at positions 0..7 shows ``n_hands`` arrows on top of each other; over its
    own wavelength it turns like the fast one.
    """
    freqs = to_numpy(inv_freq)
    if isinstance(n_hands, bool) or not isinstance(n_hands, int) or n_hands < 2:
        raise ValueError(f"n_hands must be an int >= 2, got {n_hands!r}")
    out = {}
    for p in pairs:
        if not 0 <= p < freqs.size:
            raise ValueError(f"pair {p} is out of range: there are {freqs.size} pairs")
        step = max(1, round(2 * math.pi / float(freqs[p]) / n_hands))
        out[int(p)] = [step * k for k in range(n_hands)]
    return out


def _spiral_points(inv_freq: Any, pair: int, positions: Any) -> tuple[np.ndarray, ...]:
    freqs = curve(inv_freq, "inv_freq")
    check_int_in(pair, "pair", 0)
    if not 0 <= pair < freqs.size:
        raise ValueError(f"pair {pair} is out of range: there are {freqs.size} pairs")
    pos = to_numpy(positions)
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
    ax.set_title(f"pair {pair}: a helix, one turn every {2 * math.pi / to_numpy(inv_freq)[pair]:.3g} "
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
    if not isinstance(wavelengths, Mapping) or not wavelengths:
        raise TypeError(
            "wavelengths must be a non-empty {label: (R/2,) wavelengths} dict, got "
            f"{type(wavelengths).__name__} {wavelengths!r}; e.g. {{'base 1e4': wavelengths}}"
        )
    ax = get_ax(ax, figsize=(7.0, 3.8))
    for k, (label, w) in enumerate(wavelengths.items()):
        w = to_numpy(w)
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
    normalise = check_flag(normalise, "normalise")
    x = curve(offsets, "offsets")
    actual_list = list(actual) if isinstance(actual, (list, tuple)) else [actual]
    curve(bound, "bound", len(x))
    for y in actual_list:
        curve(y, "actual", len(x))
    ax = get_ax(ax, figsize=(7.0, 3.8))

    def prep(y: Any) -> np.ndarray:
        y = curve(y, "curve")
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
