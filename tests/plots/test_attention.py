"""Attention plots: inspect the drawn artists (images, colour limits, tick labels)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from llmviz.attention.masks import causal_mask, sliding_window_mask
from llmviz.attention.metrics import head_metrics
from llmviz.plots import select_weights
from llmviz.plots.attention import (
    plot_attention_heads,
    plot_attention_heads_plotly,
    plot_attention_heatmap,
    plot_head_metrics,
    plot_mask_gallery,
    plot_model_view,
)

TOKENS = ["the", "cat", "sat", "because", "it", "was"]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _weights(B=2, H=3, T=6, S=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, H, T, S, generator=g) * 2
    scores = scores.masked_fill(~causal_mask(T, S), float("-inf"))
    return torch.softmax(scores, -1)


def test_heatmap_ticks_are_tokens_and_clim_starts_at_zero():
    w = _weights()
    ax = plot_attention_heatmap(w, tokens=TOKENS, head=1, batch=1)
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS
    assert [t.get_text() for t in ax.get_yticklabels()] == TOKENS
    (im,) = ax.get_images()
    np.testing.assert_allclose(im.get_array(), w[1, 1].numpy())
    assert im.get_clim() == (0.0, pytest.approx(float(w[1, 1].max())))


def test_heatmap_query_labels_with_cache():
    w = _weights(T=2, S=6)
    ax = plot_attention_heatmap(w[0, 0], tokens=TOKENS, vmax=1.0)
    assert [t.get_text() for t in ax.get_yticklabels()] == TOKENS[-2:]
    assert ax.get_images()[0].get_clim() == (0.0, 1.0)


def test_heatmap_accepts_numpy_and_hf_layer_lists():
    per_layer = [_weights(B=1, seed=s) for s in range(3)]
    ax = plot_attention_heatmap(per_layer, layer=2, head=0)
    np.testing.assert_allclose(ax.get_images()[0].get_array(), per_layer[2][0, 0].numpy())
    ax2 = plot_attention_heatmap(per_layer[0][0, 0].numpy())
    assert len(ax2.get_images()) == 1


def test_heads_grid_rejects_a_bad_column_count():
    with pytest.raises(ValueError, match="ncols must be a positive int, got 0"):
        plot_attention_heads(_weights(H=2), ncols=0)
    with pytest.raises(TypeError, match="ncols must be an int, got float 2.5"):
        plot_attention_heads(_weights(H=2), ncols=2.5)


def test_heads_grid_shares_one_colour_scale():
    w = _weights(H=5)
    fig = plot_attention_heads(w, tokens=TOKENS, ncols=3)
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 5
    assert len({im.get_clim() for im in images}) == 1
    assert images[0].get_clim()[1] == pytest.approx(float(w[0].max()))
    labelled = [ax for ax in fig.axes if ax.get_images()]
    assert [t.get_text() for t in labelled[0].get_xticklabels()] == TOKENS


def test_model_view_layers_by_heads_shared_scale():
    per_layer = [_weights(B=1, H=4, seed=s) for s in range(3)]
    fig = plot_model_view(per_layer)
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 12
    assert len({im.get_clim() for im in images}) == 1
    top = max(float(w.max()) for w in per_layer)
    assert images[0].get_clim()[1] == pytest.approx(top)


def test_mask_gallery_one_panel_per_mask():
    masks = {"causal": causal_mask(8), "window 3": sliding_window_mask(8, window=3)}
    fig = plot_mask_gallery(masks)
    drawn = [ax for ax in fig.axes if ax.get_images()]
    assert len(drawn) == 2
    assert "36 of 64" in drawn[0].get_title()
    np.testing.assert_array_equal(drawn[1].get_images()[0].get_array(), masks["window 3"].numpy())


def test_head_metric_bars_one_bar_per_head():
    m = head_metrics(_weights(H=4))
    fig = plot_head_metrics(m, names=["entropy", "previous"])
    assert len(fig.axes) == 2
    assert len(fig.axes[0].patches) == 4
    heights = [p.get_height() for p in fig.axes[1].patches]
    np.testing.assert_allclose(heights, m["previous"].numpy(), rtol=1e-6)
    layered = head_metrics([_weights(H=4), _weights(H=4, seed=1)])
    fig2 = plot_head_metrics(layered, ncols=2)
    assert len(fig2.axes[0].patches) == 8
    assert len([ax for ax in fig2.axes if ax.patches]) == 5 and len(fig2.axes) == 6


def test_plotly_heads_slider_and_shared_zmax():
    w = _weights(H=3)
    fig = plot_attention_heads_plotly(w, tokens=TOKENS)
    assert len(fig.data) == 3 and len(fig.layout.sliders[0].steps) == 3
    assert len({tr.zmax for tr in fig.data}) == 1 and [tr.visible for tr in fig.data] == [True, False, False]
    assert fig.data[0].x[1] == "1:cat"


def test_selector_errors():
    w = _weights()
    with pytest.raises(ValueError, match="pick one with head="):
        plot_attention_heatmap(w)
    with pytest.raises(ValueError, match="list of 2 layers; pick one with layer="):
        select_weights([w, w])
    with pytest.raises(ValueError, match="head=7 is out of range for 3 heads"):
        select_weights(w, head=7)
    with pytest.raises(ValueError, match="batch=5 is out of range"):
        select_weights(w, batch=5)
    with pytest.raises(ValueError, match="tokens has 2 entries but the weights have S=6"):
        plot_attention_heatmap(w, head=0, tokens=["a", "b"])
    with pytest.raises(ValueError, match="not a per-layer list"):
        select_weights(w, layer=1)
    with pytest.raises(ValueError, match=r"must be \(T, S\), \(H, T, S\)"):
        select_weights(torch.ones(2))
    with pytest.raises(TypeError, match="per-layer list"):
        plot_model_view(w)
    with pytest.raises(TypeError, match="non-empty dict"):
        plot_mask_gallery({})
    with pytest.raises(ValueError, match="unknown metric"):
        plot_head_metrics({"entropy": torch.ones(2)}, names=["sink"])
    with pytest.raises(ValueError, match="vmax must be positive"):
        plot_attention_heatmap(w, head=0, vmax=0)


# --------------------------------------------------------------------------- explorers
def test_explorers_keep_trace_count_and_respond():
    from llmviz.explore.attention import (
        heads_explorer,
        kv_cache_explorer,
        temperature_explorer,
    )

    for ex in (temperature_explorer(), heads_explorer(), kv_cache_explorer()):
        counts = {len(ex.frame(**p).traces) for p in ex.grid()}
        assert len(counts) == 1 and len(ex.grid()) <= 72
    t = temperature_explorer()
    sharp = t.frame(temperature=0.1).traces[0].z
    flat = t.frame(temperature=10.0).traces[0].z
    assert np.max(sharp) > np.max(flat)
    h = heads_explorer()
    assert np.isfinite(np.asarray(h.frame(n_heads=16).traces[1].y, dtype=float)).sum() == 16
    assert np.isfinite(np.asarray(h.frame(n_heads=2).traces[1].y, dtype=float)).sum() == 2
    k = kv_cache_explorer()
    assert k.frame(n_kv_heads=8).traces[1].y[0] * 4 == pytest.approx(k.frame(n_kv_heads=32).traces[1].y[0])


def test_weights_explorer_shared_scale_and_errors():
    from llmviz.explore.attention import weights_explorer

    per_layer = [_weights(B=1, H=2, seed=s) for s in range(3)]
    ex = weights_explorer(per_layer, tokens=TOKENS)
    assert len(ex.grid()) == 6
    zmax = {ex.frame(**p).traces[0].zmax for p in ex.grid()}
    assert len(zmax) == 1 and zmax.pop() == pytest.approx(max(float(w.max()) for w in per_layer))
    one = weights_explorer(per_layer[:1])
    assert [c.name for c in one.controls] == ["head"]
    with pytest.raises(TypeError, match="non-empty per-layer list"):
        weights_explorer(per_layer[0])


def test_group_mapping_lines_follow_repeat_kv():
    from llmviz.attention import repeat_kv
    from llmviz.plots.attention import plot_group_mapping

    ax = plot_group_mapping(8, 2)
    lines = ax.get_lines()
    assert len(lines) == 8
    ids = torch.arange(2.0).view(1, 2, 1, 1)
    expected = repeat_kv(ids, 4).flatten().tolist()  # kv head of each query head, per HF
    kv_x = sorted({line.get_xdata()[1] for line in lines})
    assert [kv_x.index(line.get_xdata()[1]) for line in lines] == expected
    inter = plot_group_mapping(8, 2, layout="interleaved")
    assert [kv_x.index(l.get_xdata()[1]) for l in inter.get_lines()] == [h % 2 for h in range(8)]
    with pytest.raises(ValueError, match=r"n_heads \(6\) must be divisible by n_kv_heads \(4\)"):
        plot_group_mapping(6, 4)
    with pytest.raises(ValueError, match=r"layout='zigzag' is not supported; choose one of \('contiguous', 'interleaved'\)"):
        plot_group_mapping(4, 2, layout="zigzag")


def test_tiling_explorer_counts_match_tiled_attention():
    from llmviz.explore.attention import tiling_explorer

    ex = tiling_explorer()
    assert {len(ex.frame(**p).traces) for p in ex.grid()} == {2}
    causal = ex.frame(block=16, causal=True)
    z = np.asarray(causal.traces[0].z)
    assert z.shape == (64, 64) and (z[0, 16:] == 0).all() and (z[63, :48] == 2).all()
    assert "10 computed, 6 skipped" in causal.layout["title.text"]
    assert "16 computed, 0 skipped" in ex.frame(block=16, causal=False).layout["title.text"]


def test_heatmap_raw_scores_keep_their_negative_values():
    g = torch.Generator().manual_seed(3)
    scores = torch.randn(5, 5, generator=g) * 3
    scores = scores.masked_fill(~causal_mask(5, 5), float("-inf"))
    ax = plot_attention_heatmap(scores)
    (im,) = ax.get_images()
    finite = scores[torch.isfinite(scores)]
    top = float(finite.abs().max())
    lo, hi = im.get_clim()
    assert (lo, hi) == (pytest.approx(-top), pytest.approx(top))
    assert lo <= float(finite.min()) and hi >= float(finite.max())  # nothing clipped
    assert im.get_cmap().name == "RdBu_r"
    assert ax.figure.axes[-1].get_ylabel() == "score"


def test_heatmap_weights_stay_on_a_zero_based_scale():
    w = _weights()[0, 0]
    ax = plot_attention_heatmap(w, vmax=1.0)
    (im,) = ax.get_images()
    assert im.get_clim() == (0.0, 1.0)
    assert im.get_cmap().name == "viridis"
    assert ax.figure.axes[-1].get_ylabel() == "weight"


def test_heads_grid_and_plotly_share_a_symmetric_scale_for_scores():
    scores = torch.randn(3, 4, 4, generator=torch.Generator().manual_seed(4))
    top = float(scores.abs().max())
    fig = plot_attention_heads(scores)
    clims = [im.get_clim() for ax in fig.axes for im in ax.get_images()]
    assert len(clims) == 3
    assert all(c == (pytest.approx(-top), pytest.approx(top)) for c in clims)
    pfig = plot_attention_heads_plotly(scores)
    assert all((t.zmin, t.zmax) == (pytest.approx(-top), pytest.approx(top)) for t in pfig.data)
