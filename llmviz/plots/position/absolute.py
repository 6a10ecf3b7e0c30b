"""Figures for absolute positions (chapter 5): the sinusoidal table and scores against offset.

Axes-level functions take ``ax=None`` and return the Axes. Inputs are torch tensors or numpy
arrays, drawn exactly as given: the numbers come from :mod:`llmviz.position.sinusoidal`.

Shapes: T positions, C model dim.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..._checks import check_int_in
from .._data import curve, to_numpy
from .._style import DIVERGING, PALETTE, get_ax

__all__ = [
    "plot_sinusoidal_heatmap",
    "plot_sinusoidal_waves",
    "plot_score_vs_offset",
    "binary_counter_waves",
    "plot_binary_counter",
]


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
    table = to_numpy(pe)
    if table.ndim != 2:
        raise ValueError(f"pe must be a (T, C) table, got shape {table.shape}")
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or not dims:
        raise TypeError(f"dims must be a non-empty sequence of feature indices, got {dims!r}")
    ax = get_ax(ax, figsize=(7.0, 3.5))
    for k, d in enumerate(dims):
        check_int_in(d, "dims[k]", 0)
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
    x = curve(offsets, "offsets")
    if isinstance(scores, (list, tuple)):
        curves = list(scores)
    else:
        arr = to_numpy(scores)
        curves = [arr] if arr.ndim == 1 else list(arr)  # (N,) or (K, N): K curves
    curves = [curve(y, "scores", len(x)) for y in curves]
    ax = get_ax(ax, figsize=(7.0, 3.5))
    for k, y in enumerate(curves):
        label = labels[k] if labels else None
        ax.plot(x, y, color=PALETTE[k % len(PALETTE)], label=label, lw=1.4)
    ax.axhline(0, color="#999", lw=0.6)
    ax.set_xlabel("offset")
    ax.set_ylabel(ylabel)
    if labels:
        ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return ax


# ----------------------------------------------------------------------------- binary counter
def binary_counter_waves(positions: Any, n_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Bits of a binary counter and their smooth counterparts, at (possibly fractional) positions.

    Bit k of p flips every 2^k positions: a square wave of wavelength 2^(k+1). Its smooth
    counterpart is the cosine of the same wavelength, shifted so that it is 0 at the middle of
    each run of zeros and 1 at the middle of each run of ones:
    ``0.5 - 0.5 cos(pi (p - (2^k - 1) / 2) / 2^k)``. Any such phase is a fixed mix of one
    (sin, cos) pair, which is what a sinusoidal encoding holds per frequency.

    Args:
        positions: (N,) positions (integers give the counter exactly).
        n_bits: number of bits K (>= 1).

    Returns:
        ``(bits, waves)``, both (N, K): ``floor(p / 2^k) mod 2`` and the smooth wave.
    """
    if isinstance(n_bits, bool) or not isinstance(n_bits, int) or n_bits < 1:
        raise ValueError(f"n_bits must be an int >= 1, got {n_bits!r}")
    p = np.asarray(to_numpy(positions), dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"positions must be 1-D (N,), got shape {p.shape}")
    if p.size and p.min() < 0:
        raise ValueError(f"positions must be >= 0 for a counter, got min {p.min():g}")
    scale = 2.0 ** np.arange(n_bits)  # (K,) run length of each bit
    bits = np.floor(p[:, None] / scale) % 2
    waves = 0.5 - 0.5 * np.cos(np.pi * (p[:, None] - (scale - 1) / 2) / scale)
    return bits, waves


def plot_binary_counter(n_positions: int, n_bits: int = 4, *, ax=None):
    """A binary counter's bits (steps) with their smooth waves, one lane per bit.

    Lane k shows bit k of positions ``0 .. n_positions - 1`` as a step line and the cosine of
    the same wavelength 2^(k+1) as a smooth line (see :func:`binary_counter_waves`).
    """
    if isinstance(n_positions, bool) or not isinstance(n_positions, int) or n_positions < 2:
        raise ValueError(f"n_positions must be an int >= 2, got {n_positions!r}")
    check_int_in(n_bits, "n_bits", 1, 16)
    ax = get_ax(ax, figsize=(7.0, 0.9 + 0.8 * n_bits))
    ints = np.arange(n_positions)
    fine = np.linspace(0, n_positions - 1, 40 * n_positions)
    bits, _ = binary_counter_waves(ints, n_bits)
    _, waves = binary_counter_waves(fine, n_bits)
    for k in range(n_bits):
        lane = 1.4 * k
        colour = PALETTE[k % len(PALETTE)]
        ax.step(ints, bits[:, k] + lane, where="mid", color=colour, lw=1.2,
                label="bit (steps)" if k == 0 else None)
        ax.plot(fine, waves[:, k] + lane, color=colour, lw=1.0, ls="--", alpha=0.8,
                label="smooth wave, same wavelength" if k == 0 else None)
    ax.set_yticks([1.4 * k + 0.5 for k in range(n_bits)],
                  [f"bit {k}: wavelength {2 ** (k + 1)}" for k in range(n_bits)], fontsize=8)
    ax.set_xlabel("position")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("a binary counter and its continuous version")
    return ax
