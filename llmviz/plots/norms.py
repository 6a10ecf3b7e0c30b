"""Figures for normalisation and feed-forward chapters.

* :func:`plot_distribution` / :func:`plot_norm_distributions`: histograms before and after a
  norm on a log-count axis whose x-limits always include the most extreme value, with the
  outliers marked individually (a rug), so nothing is clipped away.
* :func:`plot_norm_axes`: the (B, T, D) cube with the cells that share one mean/variance
  highlighted, for each norm (the cells are :func:`llmviz.norm.reduction_mask`).
* :func:`plot_activations`: activation curves and their derivatives
  (:func:`llmviz.ffn.activation_curve`).
* :func:`plot_depth_profile`: a per-layer quantity (gradient norm, residual-stream norm) vs
  depth, one line per variant, log scale.
* :func:`plot_stability_map`: final loss over a grid of two hyper-parameters (LR x warmup),
  diverged runs drawn as hatched cells.

Axes-level functions take ``ax=None`` and return the Axes; figure-level ones return the Figure.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from .._checks import check_flag, check_int_in, check_positive, check_real, check_real_in
from ..ffn import activation_curve
from ..norm.reduction import reduction_mask
from ._data import to_numpy
from ._style import PALETTE, SEQUENTIAL, footnote, get_ax

__all__ = [
    "plot_distribution",
    "plot_norm_distributions",
    "plot_norm_axes",
    "plot_activations",
    "plot_depth_profile",
    "plot_stability_map",
]

_HIGHLIGHT = PALETTE[3]  # vermillion: the cells reduced together
_OTHER = "#d9d9d9"


# ----------------------------------------------------------------------------- distributions
def plot_distribution(
    values: Any,
    *,
    ax=None,
    bins: int = 80,
    color: str = PALETTE[0],
    label: str | None = None,
    outlier_sigma: float = 4.0,
    title: str | None = None,
):
    """Histogram of all ``values`` on a log-count axis; nothing is clipped.

    The bins span ``[min, max]`` of the data, so the x-limits always include the largest
    outlier, and the log count keeps a single extreme value visible as a bar. Values further
    than ``outlier_sigma`` robust standard deviations (1.4826 * MAD) from the median are also
    drawn as a rug of ticks under the axis and the maximum |value| is annotated.

    Args:
        values: tensor or array of any shape (flattened).
        ax: where to draw.
        bins: number of equal-width bins between min and max.
        outlier_sigma: threshold for the rug, in robust standard deviations.

    Returns:
        The Axes.
    """
    check_int_in(bins, "bins", 1)
    check_real_in(outlier_sigma, "outlier_sigma", 0.0)
    v = to_numpy(values).ravel()
    if v.size == 0:
        raise ValueError("values is empty: nothing to draw")
    if not np.isfinite(v).all():
        raise ValueError(
            f"values hold {int((~np.isfinite(v)).sum())} NaN/inf entries; a histogram needs "
            "finite numbers: drop them first (e.g. values[torch.isfinite(values)])"
        )
    ax = get_ax(ax)
    lo, hi = float(v.min()), float(v.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    ax.hist(v, bins=np.linspace(lo, hi, bins + 1), color=color, alpha=0.8, label=label, log=True)
    med = float(np.median(v))
    robust = 1.4826 * float(np.median(np.abs(v - med))) or float(v.std()) or 1.0
    outliers = v[np.abs(v - med) > outlier_sigma * robust]
    if outliers.size:
        ax.plot(outliers, np.zeros_like(outliers), "|", color=_HIGHLIGHT, markersize=14,
                markeredgewidth=1.5, transform=ax.get_xaxis_transform(), clip_on=False,
                label=f"{outliers.size} beyond {outlier_sigma:g}σ")
    extreme = v[np.argmax(np.abs(v))]
    ax.annotate(f"max |x| = {abs(extreme):.3g}", xy=(extreme, 1), xytext=(0, 18),
                textcoords="offset points", ha="center", fontsize=8, color=_HIGHLIGHT,
                arrowprops={"arrowstyle": "->", "color": _HIGHLIGHT})
    pad = 0.03 * (hi - lo)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_xlabel("value")
    ax.set_ylabel("count (log)")
    if title:
        ax.set_title(title)
    if label or outliers.size:
        ax.legend(fontsize=8, loc="upper left")
    return ax


def plot_norm_distributions(
    before: Any, after: Mapping[str, Any], *, note: str | None = None, bins: int = 80
):
    """One panel for the raw values and one per normalised version, side by side.

    Args:
        before: the input activations.
        after: ``{"LayerNorm": y1, "RMSNorm": y2, ...}``.
        note: footnote text (use :func:`llmviz.plots.provenance`).

    Returns:
        The Figure (``len(after) + 1`` axes).
    """
    n = 1 + len(after)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.4), layout="constrained")
    axes = np.atleast_1d(axes)
    plot_distribution(before, ax=axes[0], bins=bins, color=PALETTE[7], title="before")
    for i, (name, y) in enumerate(after.items(), start=1):
        plot_distribution(y, ax=axes[i], bins=bins, color=PALETTE[i % 7], title=name)
    if note:
        footnote(fig, note)
    return fig


# ----------------------------------------------------------------------------- axes cube
_TITLES = {"batch": "BatchNorm", "layer": "LayerNorm / RMSNorm", "rms": "RMSNorm",
           "instance": "InstanceNorm", "group": "GroupNorm"}


def plot_norm_axes(
    kinds: Sequence[str] = ("batch", "layer", "instance", "group"),
    *, shape: tuple[int, int, int] = (3, 4, 6), n_groups: int = 2,
):
    """The ``(B, T, D)`` cube once per norm: highlighted cells are normalised together
    (one mean and variance).

    Returns:
        The Figure, one 3D axes per kind; each Axes has ``llmviz_mask`` set to the mask drawn.
    """
    if isinstance(kinds, str) or not isinstance(kinds, Sequence) or not kinds:
        raise TypeError(f"kinds must be a non-empty sequence of norm kinds, got {kinds!r}")
    if not isinstance(shape, (tuple, list)) or len(shape) != 3:
        raise TypeError(f"shape must be a (B, T, D) triple of sizes, got {shape!r}")
    for size in shape:
        check_int_in(size, "shape", 1, 12)
    n = len(kinds)
    fig = plt.figure(figsize=(3.2 * n, 3.4), layout="constrained")
    for i, kind in enumerate(kinds):
        ax = fig.add_subplot(1, n, i + 1, projection="3d")
        mask = reduction_mask(kind, shape, n_groups=n_groups).numpy()  # (B, T, D) bool
        colors = np.empty(mask.shape, dtype=object)
        colors[mask] = _HIGHLIGHT
        colors[~mask] = _OTHER
        # voxels index (x, y, z): put D along x, T along y, B along z.
        filled = np.ones(mask.shape, dtype=bool).transpose(2, 1, 0)  # (D, T, B)
        ax.voxels(filled, facecolors=colors.transpose(2, 1, 0), edgecolor="#555555",
                  linewidth=0.3, alpha=0.9)
        ax.set_xlabel("D (features)", fontsize=8, labelpad=-10)
        ax.set_ylabel("T (tokens)", fontsize=8, labelpad=-10)
        ax.set_zlabel("B (batch)", fontsize=8, labelpad=-10)
        ax.set_xticks([]), ax.set_yticks([]), ax.set_zticks([])
        ax.set_box_aspect(shape[::-1], zoom=0.8)
        ax.view_init(elev=22, azim=-58)
        title = _TITLES.get(kind, kind) + (f" (G={n_groups})" if kind == "group" else "")
        ax.set_title(f"{title}\n{int(mask.sum())} cells share one mean/var", fontsize=9)
        ax.llmviz_mask = mask
    return fig


# ----------------------------------------------------------------------------- activations
def plot_activations(
    names: Sequence[str] = ("relu", "gelu", "silu", "relu2"),
    *, x_range: tuple[float, float] = (-4.0, 4.0), n: int = 401, derivative: bool = True,
    beta: float = 1.0,
):
    """Activation curves (and their derivatives, by autograd) on a shared x grid.

    Args:
        names: activation names from :data:`llmviz.ffn.ACTIVATION_FNS` (``"swish"`` uses ``beta``).
        x_range: input range.
        derivative: add a second panel with d act / dx.

    Returns:
        The Figure (1 or 2 axes, one line per activation on each).
    """
    derivative = check_flag(derivative, "derivative")
    check_int_in(n, "n", 2)
    check_positive(beta, "beta")
    if not isinstance(x_range, (tuple, list)) or len(x_range) != 2:
        raise TypeError(f"x_range must be a (low, high) pair of numbers, got {x_range!r}")
    low, high = (check_real(v, "x_range") for v in x_range)
    if not low < high:
        raise ValueError(f"x_range must be (low, high) with low < high, got {tuple(x_range)}")
    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        raise TypeError(
            f"names must be a non-empty sequence of activation names, got {names!r}; "
            "e.g. ('relu', 'gelu')"
        )
    x = torch.linspace(low, high, n, dtype=torch.float64)
    fig, axes = plt.subplots(1, 2 if derivative else 1, figsize=(10 if derivative else 5.5, 3.6),
                             layout="constrained")
    axes = np.atleast_1d(axes)
    for i, name in enumerate(names):
        y, g = activation_curve(name, x, beta=beta)
        label = f"swish β={beta:g}" if name == "swish" else name
        axes[0].plot(x, y, color=PALETTE[i % 8], label=label)
        if derivative:
            axes[1].plot(x, g, color=PALETTE[i % 8], label=label)
    axes[0].set(xlabel="x", ylabel="act(x)", title="activation")
    axes[0].axhline(0, color="#999", lw=0.5)
    axes[0].legend(fontsize=8)
    if derivative:
        axes[1].set(xlabel="x", ylabel="d act / dx", title="derivative")
        axes[1].axhline(0, color="#999", lw=0.5)
    return fig


# ----------------------------------------------------------------------------- depth profiles
def plot_depth_profile(
    values: Mapping[str, Any], *, ax=None, ylabel: str = "gradient norm", log_y: bool = True,
    title: str | None = None,
):
    """One line per variant of a per-layer quantity vs layer index (0 = closest to the input).

    Args:
        values: ``{"pre-norm": [g_0, g_1, ...], "post-norm": [...]}``.
        ylabel: what the values are ("gradient norm", "residual-stream RMS", ...).
        log_y: logarithmic y axis (ratios across depth are what matters).

    Returns:
        The Axes.
    """
    log_y = check_flag(log_y, "log_y")
    ax = get_ax(ax)
    if not values:
        raise ValueError("values is empty: pass {label: per-layer sequence}")
    for i, (name, v) in enumerate(values.items()):
        v = to_numpy(v).ravel()
        ax.plot(np.arange(len(v)), v, marker="o", ms=3, color=PALETTE[i % 8], label=name)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def plot_stability_map(
    loss: Any, *, rows: Sequence[Any], cols: Sequence[Any], ax=None,
    row_label: str = "peak learning rate", col_label: str = "warmup steps",
    diverged: Any = None, vmin: float | None = None, vmax: float | None = None,
    title: str | None = None, value_label: str = "final loss", labels: Any = None,
    missing: Any = None,
):
    """Heatmap of one number per training run (final loss, worst loss spike, ...) over a grid
    of two hyper-parameters; diverged runs (NaN/inf or flagged in ``diverged``) are hatched and
    labelled "div".

    Pass the same ``vmin``/``vmax`` to every panel you compare.

    Args:
        loss: ``(len(rows), len(cols))`` values, one per run.
        rows, cols: the grid values (tick labels).
        diverged: optional bool array of the same shape.
        value_label: what the values are (colour-bar label).
        labels: optional ``(len(rows), len(cols))`` texts written in the cells instead of the
            values (e.g. a mean over seeds with its interval); diverged cells keep "div".
        missing: optional bool array of the same shape: cells that were not run, left blank
            and labelled "not run" (their values are ignored).

    Returns:
        The Axes (its first image is the heatmap).
    """
    ax = get_ax(ax)
    L = to_numpy(loss)
    if L.shape != (len(rows), len(cols)):
        raise ValueError(f"loss has shape {L.shape}, expected (len(rows), len(cols)) = "
                         f"({len(rows)}, {len(cols)})")
    if labels is not None:
        labels = np.asarray(labels, dtype=object)
        if labels.shape != L.shape:
            raise ValueError(f"labels has shape {labels.shape}, expected the shape of loss {L.shape}")
    skipped = np.zeros(L.shape, bool) if missing is None else np.asarray(missing, bool)
    if skipped.shape != L.shape:
        raise ValueError(f"missing has shape {skipped.shape}, expected the shape of loss {L.shape}")
    bad = ~np.isfinite(L) if diverged is None else (np.asarray(diverged, bool) | ~np.isfinite(L))
    bad &= ~skipped
    shown = np.ma.masked_where(bad | skipped, L)
    im = ax.imshow(shown, cmap=SEQUENTIAL, vmin=vmin, vmax=vmax, aspect="auto", origin="lower")
    for r, c in zip(*np.nonzero(bad)):
        ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="///",
                                   edgecolor=_HIGHLIGHT, lw=0))
        ax.text(c, r, "div", ha="center", va="center", fontsize=8, color=_HIGHLIGHT)
    for r, c in zip(*np.nonzero(skipped)):
        ax.text(c, r, "not run", ha="center", va="center", fontsize=7, color="#777777")
    ok = ~bad & ~skipped
    lo = np.nanmin(L[ok]) if vmin is None and ok.any() else (vmin or 0.0)
    hi = np.nanmax(L[ok]) if vmax is None and ok.any() else (vmax or 1.0)
    for r, c in zip(*np.nonzero(ok)):
        light = (L[r, c] - lo) / max(hi - lo, 1e-12) > 0.6  # viridis is light at the top
        text = f"{L[r, c]:.2f}" if labels is None else str(labels[r, c])
        ax.text(c, r, text, ha="center", va="center", fontsize=7,
                color="black" if light else "white")
    ax.set_xticks(range(len(cols)), [str(c) for c in cols])
    ax.set_yticks(range(len(rows)), [f"{r:g}" if isinstance(r, float) else str(r) for r in rows])
    ax.set_xlabel(col_label)
    ax.set_ylabel(row_label)
    if title:
        ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, label=value_label)
    return ax
