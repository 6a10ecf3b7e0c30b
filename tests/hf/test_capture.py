"""capture_attention under transformers 5 for every supported family: the same maps as the
loaded llmviz model, GQA groups attached, and a list the plots take unchanged."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

from llmviz.hf import AttentionMaps, capture_attention, from_hf, kv_groups

from .conftest import FAMILIES


@pytest.mark.parametrize("family", [f for f in FAMILIES if not f.startswith("falcon")])
def test_maps_match_the_loaded_model(family, make_hf, ids):
    hf = make_hf(family)
    before = hf.config._attn_implementation
    maps = capture_attention(hf, ids)
    assert hf.config._attn_implementation == before  # the implementation is restored
    ours = from_hf(hf)
    with torch.no_grad():
        mine = ours(ids, return_weights=True).weights
    mine = [w for w in mine if w is not None]  # linear-attention layers (Qwen3-Next) have no map
    assert isinstance(maps, list) and len(maps) == len(mine) > 0
    H = ours.config.n_heads  # 4 in every tiny model but BLOOM's six-head one
    for a, b in zip(maps, mine):
        assert a.shape == (2, H, 24, 24)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
        if ours.config.attn_sinks:  # a learned sink takes part of every row's mass (gpt-oss)
            assert torch.all(a.sum(-1) < 1)
        else:
            torch.testing.assert_close(a.sum(-1), torch.ones(2, H, 24))  # rows are distributions


def test_sliding_layers_are_zero_outside_the_window(make_hf, ids):
    maps = capture_attention(make_hf("mistral"), ids)  # window 7
    q, k = torch.meshgrid(torch.arange(24), torch.arange(24), indexing="ij")
    outside = (q - k >= 7) | (k > q)
    assert torch.all(maps[0][..., outside] == 0)
    assert torch.all(maps[0][..., ~outside] > 0)


def test_gqa_groups(make_hf, ids):
    maps = capture_attention(make_hf("qwen3"), ids)
    assert (maps.n_heads, maps.n_kv_heads) == (4, 2)
    assert maps.groups == ((0, 1), (2, 3)) and maps.kv_head_of == (0, 0, 1, 1)
    assert "G=2" in repr(maps)
    gpt2 = capture_attention(make_hf("gpt2"), ids)
    assert gpt2.groups == ((0,), (1,), (2,), (3,))  # MHA: every head its own kv head
    assert kv_groups(8, 2) == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert kv_groups(4, 1) == ((0, 1, 2, 3),)


def test_plots_take_the_maps_unchanged(make_hf, ids):
    from llmviz.plots.attention import plot_attention_heatmap, plot_model_view

    maps = capture_attention(make_hf("gemma2"), ids)
    ax = plot_attention_heatmap(maps, layer=1, head=2, batch=0)
    assert ax.images and ax.images[0].get_array().shape == (24, 24)
    fig = plot_model_view(maps)
    assert sum(len(a.images) for a in fig.axes) == 2 * 4  # layers x heads thumbnails


def test_capture_errors(make_hf):
    hf = make_hf("llama")
    with pytest.raises(TypeError, match="must be a Hugging Face model .* return_weights=True"):
        capture_attention(object(), torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"input_ids must be a \(B, T\) integer tensor.*got \(3,\) torch.int64; e.g. ids\[None\]"):
        capture_attention(hf, torch.zeros(3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"got list; .*torch.tensor\(\[ids\]\) for a Python list"):
        capture_attention(hf, [[1, 2, 3]])
    with pytest.raises(TypeError, match=r"got \(1, 3\) torch.float32"):
        capture_attention(hf, torch.zeros(1, 3))
    ours = from_hf(hf)
    with pytest.raises(TypeError, match=r"got an llmviz DecoderLM.*call it with return_weights=True"):
        capture_attention(ours, torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"n_heads \(6\) must be divisible by n_kv_heads \(4\)"):
        kv_groups(6, 4)
    with pytest.raises(ValueError, match="n_kv_heads must be a positive int"):
        kv_groups(4, 0)
    assert isinstance(capture_attention(hf, torch.zeros(1, 3, dtype=torch.long)), AttentionMaps)


def test_falcon_maps_are_refused_and_the_loaded_model_gives_them(make_hf, ids):
    """transformers' Falcon returns an unmasked softmax's maps when asked for weights (its logits
    then differ from its own forward); llmviz refuses them and the loaded model's are causal."""
    hf = make_hf("falcon")
    with pytest.raises(NotImplementedError, match="Falcon computes an unmasked .*from_hf"):
        capture_attention(hf, ids)
    with torch.no_grad():
        weights = from_hf(hf)(ids, return_weights=True).weights
    assert torch.all(weights[0][..., torch.ones(24, 24).triu(1).bool()] == 0)
