"""Multi-panel figures: no two titles or axis labels overlap inside the drawn image, and token
labels of large attention maps are thinned so that neighbours do not overlap either.

The browser tests measure the page's boxes but cannot see inside a matplotlib PNG; this draws
each figure at its inline size and compares the text extents in display pixels.
"""

from __future__ import annotations

import itertools

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from llmviz.attention.masks import causal_mask  # noqa: E402
from llmviz.plots import attention as pa  # noqa: E402
from llmviz.plots import norms as pn  # noqa: E402
from llmviz.runtime import FIGURE_DPI  # noqa: E402


def _labels(fig) -> list[tuple[str, object]]:
    """(name, artist) for every visible title, axis label, annotation and legend."""
    out = []
    if fig._suptitle is not None and fig._suptitle.get_text():
        out.append(("suptitle", fig._suptitle))
    for i, ax in enumerate(fig.axes):
        texts = {"title": ax.title, "left title": ax._left_title, "right title": ax._right_title,
                 "x label": ax.xaxis.label, "y label": ax.yaxis.label}
        if hasattr(ax, "zaxis"):
            texts["z label"] = ax.zaxis.label
        for k, t in enumerate(ax.texts):  # annotations ("max |x| = ...") and notes
            texts[f"text {k}"] = t
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            out.append((f"axes {i} legend", legend))
        for name, t in texts.items():
            if t.get_visible() and t.get_text().strip():
                out.append((f"axes {i} {name} {t.get_text()!r}", t))
    return out


def overlapping_labels(fig) -> list[str]:
    """Pairs of titles, axis labels, annotations and legends whose drawn extents overlap (by
    more than a pixel each way)."""
    fig.set_dpi(FIGURE_DPI)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [(name, t.get_window_extent(renderer)) for name, t in _labels(fig)]
    bad = []
    for (n1, b1), (n2, b2) in itertools.combinations(boxes, 2):
        dx = min(b1.x1, b2.x1) - max(b1.x0, b2.x0)
        dy = min(b1.y1, b2.y1) - max(b1.y0, b2.y0)
        if dx > 1 and dy > 1:
            bad.append(f"{n1} overlaps {n2}")
    return bad


def _weights(heads=8, n=12):
    g = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(1, heads, n, n, generator=g), -1)


def _acts():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(256, 64, generator=g)
    h[::16, 7] = 60.0
    return h


MULTI_PANEL = {
    "attention_heads": lambda: pa.plot_attention_heads(_weights(), tokens=[f"t{i}" for i in range(12)]),
    "attention_heads_no_tokens": lambda: pa.plot_attention_heads(_weights(12), ncols=6),
    "attention_heads_layer": lambda: pa.plot_attention_heads([_weights(4)] * 2, layer=1),
    "model_view": lambda: pa.plot_model_view([_weights(4)] * 3),
    "mask_gallery": lambda: pa.plot_mask_gallery({f"mask {i}": causal_mask(8, 8) for i in range(5)},
                                                 ncols=3),
    "head_metrics": lambda: pa.plot_head_metrics(
        {k: torch.rand(2, 8, generator=torch.Generator().manual_seed(1))
         for k in ("entropy", "local share", "first token")}),
    "norm_distributions": lambda: pn.plot_norm_distributions(
        _acts(), {"LayerNorm": _acts() * 0.1, "RMSNorm": _acts() * 0.2}, note="cpu · test"),
    "norm_axes": lambda: pn.plot_norm_axes(),
    "activations": lambda: pn.plot_activations(("relu", "gelu", "silu")),
}


@pytest.mark.parametrize("name", sorted(MULTI_PANEL))
def test_multi_panel_titles_and_labels_do_not_overlap(name):
    fig = MULTI_PANEL[name]()
    try:
        assert overlapping_labels(fig) == []
    finally:
        plt.close(fig)


def test_overlap_check_catches_overlapping_titles():
    """The check itself: two panels forced together so their long titles collide."""
    fig, axes = plt.subplots(1, 2, figsize=(3, 2))
    fig.subplots_adjust(wspace=0)
    for ax in axes:
        ax.set_title("a very long panel title that runs over")
    try:
        assert overlapping_labels(fig)
    finally:
        plt.close(fig)


def _tick_overlaps(ax, axis: str) -> int:
    ax.figure.canvas.draw()
    r = ax.figure.canvas.get_renderer()
    ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    boxes = [t.get_window_extent(r) for t in ticks if t.get_text()]
    return sum(1 for a, b in zip(boxes, boxes[1:]) if a.overlaps(b))


@pytest.mark.parametrize("n", [12, 33, 100])
def test_many_token_labels_are_thinned_and_readable(n):
    tokens = [f"tok{i}" for i in range(n)]
    ax = pa.plot_attention_heatmap(_weights(1, n)[0, 0], tokens=tokens)
    try:
        shown = [t.get_text() for t in ax.get_xticklabels()]
        k = pa.label_every(n)
        assert shown == tokens[::k]
        assert len(shown) <= pa.MAX_TOKEN_LABELS
        assert all(t.get_rotation() == 90 for t in ax.get_xticklabels())
        assert _tick_overlaps(ax, "x") == 0 and _tick_overlaps(ax, "y") == 0
        assert ax.figure.get_figwidth() <= 1.0 + 7.0 + 1e-9  # fits a page at any length
    finally:
        plt.close(ax.figure)


def test_label_every():
    assert [pa.label_every(n) for n in (0, 1, 32, 33, 64, 65, 128)] == [1, 1, 1, 2, 2, 3, 4]
    assert pa.label_every(10, max_labels=3) == 4
    with pytest.raises(ValueError, match="n must be a non-negative int"):
        pa.label_every(-1)
    with pytest.raises((ValueError, TypeError), match="max_labels"):
        pa.label_every(10, max_labels=0)


@pytest.mark.parametrize("n", [12, 32])
def test_head_grid_token_labels_do_not_overlap(n):
    fig = pa.plot_attention_heads(_weights(4, n), tokens=[f"tok{i}" for i in range(n)])
    try:
        for ax in fig.axes[:4]:
            assert _tick_overlaps(ax, "x") == 0 and _tick_overlaps(ax, "y") == 0
        assert fig.get_figwidth() <= 8.0  # four panels and the colour bar: about a page wide
    finally:
        plt.close(fig)
