"""Drawing attention: heatmaps, head grids, a model view, mask galleries and head metrics.

Every function accepts what :func:`llmviz.attention.scaled_dot_product_attention` and Hugging
Face (``output_attentions=True``) return: ``(T, S)``, ``(H, T, S)``, ``(B, H, T, S)`` or a
per-layer list of ``(B, H, T, S)``, as torch tensors or numpy arrays, with ``layer=``,
``batch=`` and ``head=`` selectors. Rows are queries (T), columns keys (S); queries are the
last T of the S key positions (:func:`llmviz.attention.masks.query_positions`), so the
query labels are the tokens of those keys. ``panel_size`` of a grid is one panel in inches.

Compared panels share one colour scale and nothing is clipped: weights run 0 to the largest
shown (or ``vmax``); raw scores (any negative) get a diverging map from -top to top.

line budget: every attention drawing shares the token-label and colour-scale rules above.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from .._checks import check_choice, check_flag, check_positive_int
from ..attention.masks import query_positions
from ._data import color_range, panel_inches, query_key_labels, select_weights, to_numpy
from ._style import DIVERGING, PALETTE, PLOTLY_DIVERGING, PLOTLY_SEQUENTIAL, SEQUENTIAL, get_ax

__all__ = [
    "plot_attention_heatmap",
    "plot_attention_heads",
    "plot_model_view",
    "plot_mask_gallery",
    "plot_head_metrics",
    "plot_attention_heads_plotly",
    "plot_group_mapping",
    "label_every",
    "MAX_TOKEN_LABELS",
]


def _scale(values: np.ndarray, vmax: float | None) -> tuple[str, float, float, str]:
    lo, hi = color_range(values, vmax)  # -> (cmap, vmin, vmax, colour-bar label)
    return (DIVERGING, lo, hi, "score") if lo < 0 else (SEQUENTIAL, lo, hi, "weight")


#: Most token labels an axis shows; beyond it every k-th token is labelled.
MAX_TOKEN_LABELS = 32
_LABELS_IN = 7.0  # inches the token labels of one heatmap axis take at most
_PANEL_LABEL_IN = 0.12  # inches per 7-point token label in a grid panel


def label_every(n: int, max_labels: int = MAX_TOKEN_LABELS) -> int:
    """The step k such that labelling every k-th of ``n`` tokens shows at most ``max_labels``."""
    check_positive_int(max_labels, "max_labels")
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative int (a token count), got {n!r}")
    return max(1, math.ceil(n / max_labels))


def _token_ticks(ax, q_labels: Sequence[str], k_labels: Sequence[str],
                 max_labels: int = MAX_TOKEN_LABELS) -> None:
    """Token labels on both axes: every one up to ``max_labels``, else every k-th
    (positions kept, so a label still sits on its own row/column). Key labels are vertical."""
    for labels, set_ticks, rotation in ((k_labels, ax.set_xticks, 90),
                                        (q_labels, ax.set_yticks, 0)):
        k = label_every(len(labels), max_labels)
        pos = range(0, len(labels), k)
        set_ticks(list(pos), [labels[i] for i in pos], rotation=rotation)


def _draw(ax, w: np.ndarray, tokens, scale: tuple[str, float, float, str], *, ticks: bool = True,
          max_labels: int = MAX_TOKEN_LABELS):
    T, S = w.shape
    im = ax.imshow(w, cmap=scale[0], vmin=scale[1], vmax=scale[2], aspect="auto",
                   interpolation="nearest")
    q_labels, k_labels = query_key_labels(tokens, T, S)
    if ticks and k_labels is not None:
        _token_ticks(ax, q_labels, k_labels, max_labels)
    elif not ticks:
        ax.set_xticks([])
        ax.set_yticks([])
    return im


def plot_attention_heatmap(
    weights: Any,
    *,
    tokens: Sequence[str] | None = None,
    layer: int | None = None,
    batch: int = 0,
    head: int | None = None,
    ax=None,
    vmax: float | None = None,
    colorbar: bool = True,
    title: str | None = None,
):
    """One attention map: queries down, keys across, token labels on the ticks.

    Weights run 0 to the largest (or ``vmax``); raw scores with a negative value get a diverging
    scale from -top to top, so nothing is clipped. Returns the matplotlib ``Axes``.
    """
    colorbar = check_flag(colorbar, "colorbar")
    w = select_weights(weights, layer=layer, batch=batch, head=head)
    if w.ndim == 3:
        if w.shape[0] != 1:
            raise ValueError(
                f"the weights have {w.shape[0]} heads; pick one with head=, or draw them all "
                "with plot_attention_heads()"
            )
        w = w[0]
    T, S = w.shape
    # 0.35 in per token label, at most 7 in across the labels (a page's width; past
    # MAX_TOKEN_LABELS tokens every k-th is labelled, so labels never get closer than 0.22 in)
    ax = get_ax(ax, figsize=(1.0 + min(0.35 * S, _LABELS_IN), 0.8 + min(0.35 * T, _LABELS_IN))
                if tokens is not None else (5, 4))
    im = _draw(ax, w, tokens, scale := _scale(w, vmax))
    ax.set_xlabel("key (S)")
    ax.set_ylabel("query (T)")
    if title is not None:
        ax.set_title(title)
    elif head is not None:
        ax.set_title(f"head {head}" if layer is None else f"layer {layer}, head {head}")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label=scale[3])
    return ax


def plot_attention_heads(
    weights: Any,
    *,
    tokens: Sequence[str] | None = None,
    layer: int | None = None,
    batch: int = 0,
    heads: Sequence[int] | None = None,
    ncols: int = 4,
    vmax: float | None = None,
    panel_size: float | tuple[float, float] = 1.7,
):
    """A grid of per-head heatmaps on one shared colour scale.

    ``panel_size`` is the size of one panel in inches: a number (square) or ``(width, height)``;
    the default keeps four panels and the colour bar about a page wide, so the labels are not
    shrunk on the site. Token labels are thinned to fit the panel (every k-th token).

    Returns:
        The matplotlib ``Figure`` (one image per head, one shared colour bar).
    """
    w = select_weights(weights, layer=layer, batch=batch)
    if w.ndim == 2:
        w = w[None]
    idx = list(range(w.shape[0])) if heads is None else list(heads)
    for h in idx:
        if not 0 <= h < w.shape[0]:
            raise ValueError(f"head {h} is out of range for {w.shape[0]} heads")
    check_positive_int(ncols, "ncols")
    shown = w[idx]
    scale = _scale(shown, vmax)
    ncols = min(ncols, len(idx))
    nrows = math.ceil(len(idx) / ncols)
    pw, ph = panel_inches(panel_size)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(pw * ncols + 1.0, ph * nrows + 0.3),
        squeeze=False, layout="constrained",
    )
    im = None
    for n, ax in enumerate(axes.flat):
        if n >= len(idx):
            ax.set_axis_off()
            continue
        im = _draw(ax, shown[n], tokens, scale, ticks=tokens is not None,
                   max_labels=max(2, int(min(pw, ph) / _PANEL_LABEL_IN)))
        ax.set_title(f"head {idx[n]}", fontsize=9)
        if tokens is not None:
            ax.tick_params(labelsize=7)
            if n % ncols:
                ax.tick_params(labelleft=False)
    fig.colorbar(im, ax=axes, label=scale[3], shrink=0.8)
    if layer is not None:
        fig.suptitle(f"layer {layer}")
    return fig


def plot_model_view(
    weights_per_layer: Sequence[Any],
    *,
    batch: int = 0,
    vmax: float | None = None,
    panel_size: float | tuple[float, float] = 1.1,
):
    """Layers x heads thumbnails of every attention map, on one shared colour scale.

    Args:
        weights_per_layer: per-layer list of ``(B, H, T, S)`` or ``(H, T, S)``.
        panel_size: one thumbnail in inches, a number (square) or ``(width, height)``.

    Returns:
        The matplotlib ``Figure``.
    """
    if not isinstance(weights_per_layer, (list, tuple)) or not weights_per_layer:
        raise TypeError(
            "plot_model_view needs a non-empty per-layer list of (B, H, T, S) weights "
            "(e.g. LMOutput.weights or HF outputs.attentions)"
        )
    maps = [select_weights(weights_per_layer, layer=l, batch=batch) for l in range(len(weights_per_layer))]
    maps = [m[None] if m.ndim == 2 else m for m in maps]
    H = max(m.shape[0] for m in maps)
    scale = _scale(np.concatenate([m.reshape(-1) for m in maps]), vmax)
    L = len(maps)
    pw, ph = panel_inches(panel_size)
    fig, axes = plt.subplots(L, H, figsize=(pw * H + 1.2, ph * L + 0.4), squeeze=False,
                             layout="constrained")
    im = None
    for l, m in enumerate(maps):
        for h in range(H):
            ax = axes[l, h]
            if h >= m.shape[0]:
                ax.set_axis_off()
                continue
            im = _draw(ax, m[h], None, scale, ticks=False)
            if l == 0:
                ax.set_title(f"head {h}", fontsize=8)
            if h == 0:
                ax.set_ylabel(f"layer {l}", fontsize=8)
    fig.colorbar(im, ax=axes, label=scale[3], shrink=0.8)
    return fig


def plot_mask_gallery(
    masks: Mapping[str, Any], *, ncols: int = 4, panel_size: float | tuple[float, float] = 2.2
):
    """Draw named ``(T, S)`` boolean masks side by side (dark = may attend).

    Each title gives the number of allowed query-key pairs. ``panel_size``: one panel in
    inches, a number (square) or ``(width, height)``.

    Returns:
        The matplotlib ``Figure``.
    """
    if not isinstance(masks, Mapping) or not masks:
        raise TypeError("masks must be a non-empty dict {name: (T, S) bool mask}")
    arrays = {}
    for name, m in masks.items():
        a = to_numpy(m)
        if a.ndim != 2:
            raise ValueError(f"mask {name!r} must be (T, S), got shape {a.shape}")
        arrays[name] = a
    ncols = max(1, min(ncols, len(arrays)))
    nrows = math.ceil(len(arrays) / ncols)
    pw, ph = panel_inches(panel_size)
    fig, axes = plt.subplots(nrows, ncols, figsize=(pw * ncols, ph * nrows + 0.4),
                             squeeze=False, layout="constrained")
    for n, ax in enumerate(axes.flat):
        if n >= len(arrays):
            ax.set_axis_off()
            continue
        name, a = list(arrays.items())[n]
        ax.imshow(a, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"{name}\n{int(a.sum())} of {a.size} pairs", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
    return fig


def plot_head_metrics(
    metrics: Mapping[str, Any],
    *,
    names: Sequence[str] | None = None,
    ncols: int | None = None,
    panel_size: float | tuple[float, float] = (3.0, 2.4),
):
    """Bar charts of per-head metrics (output of :func:`llmviz.attention.metrics.head_metrics`).

    One panel per metric (``ncols`` per row; default all in one row; ``panel_size`` inches
    each); one bar per head, coloured by layer when the metrics are ``(L, H)``.
    The y axis spans [0, 1], the full range of every metric.

    Returns:
        The matplotlib ``Figure``.
    """
    if not isinstance(metrics, Mapping) or not metrics:
        raise TypeError("metrics must be a non-empty dict {name: (H,) or (L, H) values}")
    names = list(metrics) if names is None else list(names)
    missing = [n for n in names if n not in metrics]
    if missing:
        raise ValueError(f"unknown metric(s) {missing}; available: {list(metrics)}")
    ncols = len(names) if ncols is None else max(1, min(ncols, len(names)))
    nrows = math.ceil(len(names) / ncols)
    pw, ph = panel_inches(panel_size)
    fig, axes = plt.subplots(nrows, ncols, figsize=(pw * ncols, ph * nrows),
                             squeeze=False, layout="constrained")
    for ax in list(axes.flat)[len(names):]:
        ax.set_axis_off()
    for ax, name in zip(axes.flat, names):
        v = to_numpy(metrics[name])
        if v.ndim == 1:
            v = v[None]
        L, H = v.shape
        x = np.arange(L * H)
        colours = [PALETTE[l % len(PALETTE)] for l in range(L) for _ in range(H)]
        ax.bar(x, v.reshape(-1), color=colours)
        ax.set_ylim(0, max(1.0, float(np.nanmax(v)) if v.size else 1.0))
        ax.set_title(name)
        labels = [f"{h}" if L == 1 else f"L{l}H{h}" for l in range(L) for h in range(H)]
        k = label_every(len(labels))  # many heads: every k-th labelled
        ax.set_xticks(x[::k], labels[::k], rotation=90 if L > 1 or k > 1 else 0, fontsize=8)
        ax.set_xlabel("head" if L == 1 else "layer, head")
    return fig


def plot_attention_heads_plotly(
    weights: Any,
    *,
    tokens: Sequence[str] | None = None,
    layer: int | None = None,
    batch: int = 0,
    vmax: float | None = None,
):
    """Interactive heatmap with a slider over heads (shared colour scale, hover shows tokens).

    Returns a plotly ``go.Figure``: one heatmap trace per head, one visible at a time.
    """
    import plotly.graph_objects as go

    w = select_weights(weights, layer=layer, batch=batch)
    if w.ndim == 2:
        w = w[None]
    H, T, S = w.shape
    lo, top = color_range(w, vmax)
    q_labels, k_labels = query_key_labels(tokens, T, S)
    q_pos = query_positions(T, S).tolist()
    x, y = list(range(S)), q_pos
    if k_labels is not None:  # repeated tokens would merge categories: make labels unique
        x = [f"{i}:{t}" for i, t in enumerate(k_labels)]
        y = [f"{i}:{t}" for i, t in zip(q_pos, q_labels)]
    fig = go.Figure()
    for h in range(H):
        fig.add_trace(go.Heatmap(
            z=w[h], x=x, y=y, zmin=lo, zmax=top, visible=h == 0,
            colorscale=PLOTLY_DIVERGING if lo < 0 else PLOTLY_SEQUENTIAL,
            name=f"head {h}", hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>",
        ))
    steps = [{"label": str(h), "method": "update",
              "args": [{"visible": [i == h for i in range(H)]}]} for h in range(H)]
    fig.update_layout(
        sliders=[{"active": 0, "currentvalue": {"prefix": "head = "}, "steps": steps}],
        xaxis_title="key (S)", yaxis_title="query (T)", yaxis_autorange="reversed",
        template="plotly_white", height=460,
    )
    return fig


def plot_group_mapping(n_heads: int, n_kv_heads: int, *, layout: str = "contiguous", ax=None):
    """Diagram of which key/value head each query head reads (GQA/MQA).

    Args:
        n_heads: query heads H.
        n_kv_heads: key/value heads G (``H % G == 0``).
        layout: ``"contiguous"`` (query head h reads kv head ``h // (H // G)``: Hugging Face
            ``repeat_kv``, Llama/Mistral checkpoints) or ``"interleaved"`` (``h % G``: the
            incompatible mapping of some from-scratch code).

    Returns the matplotlib ``Axes`` (one line per query head, coloured by kv head).
    """
    check_positive_int(n_heads, "n_heads")
    check_positive_int(n_kv_heads, "n_kv_heads")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv_heads})")
    check_choice(layout, "layout", ("contiguous", "interleaved"))
    ax = get_ax(ax, figsize=(max(4.0, 0.5 * n_heads), 2.2))
    rep = n_heads // n_kv_heads
    kv_x = [(g + 0.5) * n_heads / n_kv_heads - 0.5 for g in range(n_kv_heads)]
    for h in range(n_heads):
        g = h // rep if layout == "contiguous" else h % n_kv_heads
        colour = PALETTE[g % len(PALETTE)]
        ax.plot([h, kv_x[g]], [1, 0], color=colour, lw=1.5)
        ax.scatter([h], [1], s=120, color=colour, zorder=3, edgecolor="k")
    for g, x in enumerate(kv_x):
        ax.scatter([x], [0], s=260, marker="s", color=PALETTE[g % len(PALETTE)], zorder=3, edgecolor="k")
    ax.set_yticks([0, 1], ["kv heads (G)", "query heads (H)"])
    ax.set_xticks(range(n_heads))
    ax.set_ylim(-0.3, 1.3)
    ax.set_title(f"H={n_heads}, G={n_kv_heads}, {layout}")
    ax.spines[["top", "right", "bottom"]].set_visible(False)
    return ax
