"""Mistral Small 4 (mistral4) beyond the family rows of test_parity/test_anatomy: what the loaded
model holds, that the position-dependent query scale is exercised (the logits move with beta and
still match transformers), and what the reader refuses."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.latent import MultiHeadLatentAttention
from llmviz.attention.scaled_latent import ScaledQueryLatentAttention
from llmviz.hf import REFUSED, SUPPORTED, anatomy, config_from_hf, from_hf

from .conftest import FAMILIES
from ._padding import check_padding_and_cache

transformers = pytest.importorskip("transformers")


def test_softmax_group_router_dense_first_layer_and_scaled_queries(make_hf):
    hf = make_hf("mistral4")
    c = config_from_hf(hf.config)
    assert (c.attn_kind, c.moe_score, c.moe_bias_balancing, c.moe_normalize, c.moe_scaling) == (
        "mla", "softmax", False, True, 2.5)
    assert (c.moe_layers, c.moe_n_groups, c.moe_topk_groups, c.n_shared_experts, c.rope_layout) == (
        (1, 2), 2, 1, 1, "interleaved")
    layers = from_hf(hf).layers
    assert all(type(b.self_attn) is ScaledQueryLatentAttention for b in layers)
    assert (layers[0].self_attn.beta, layers[0].self_attn.original_max_position_embeddings) == (0.5, 8)
    assert not layers[0].is_moe and layers[1].is_moe and layers[1].mlp.gate.e_score_correction_bias is None
    plain = make_hf("mistral4-plain")
    c = config_from_hf(plain.config)
    assert (c.q_lora_rank, c.rope_layout, c.moe_n_groups, c.moe_normalize, c.moe_layers) == (
        None, "half", None, False, (0, 1))
    assert all(type(b.self_attn) is MultiHeadLatentAttention for b in from_hf(plain).layers)  # beta = 0
    assert [x.attention for x in anatomy(hf.config).layers] == ["latent"] * 3


def test_the_query_scale_changes_the_logits_and_both_match(make_hf, ids):
    """The scale steps at positions 8 and 16 of the 24-token ids: with beta = 0 the same weights
    give other logits, and llmviz matches transformers either way."""
    rope = FAMILIES["mistral4"][2]["rope_parameters"]
    logits = {}
    for beta in (0.5, 0.0):
        hf = make_hf("mistral4", rope_parameters=dict(rope, llama_4_scaling_beta=beta))
        with torch.no_grad():
            ref, got = hf(ids).logits, from_hf(hf)(ids).logits
        assert (got - ref).abs().max().item() <= 1e-5
        logits[beta] = ref
    moved = (logits[0.5] - logits[0.0]).abs().amax(dim=(0, 2))  # per position
    assert moved[:8].max() < 1e-4 < 1e-2 < moved[8:].min()  # the first L positions see scale 1


def test_what_the_mistral4_reader_refuses(make_hf):
    config = make_hf("mistral4").config
    rope = dict(config.rope_parameters)
    config.rope_parameters = {k: v for k, v in rope.items() if k != "llama_4_scaling_beta"}
    with pytest.raises(ValueError, match=r"llama_4_scaling_beta'\]=None; .*must be a number"):
        config_from_hf(config)
    config.rope_parameters = dict(rope, original_max_position_embeddings=0)
    with pytest.raises(ValueError, match=r"original_max_position_embeddings'\]=0; .*positive int"):
        config_from_hf(config)
    config.rope_parameters = dict(rope, partial_rotary_factor=0.25)
    with pytest.raises(NotImplementedError, match="partial_rotary_factor=0.25 rotates 4 of the 16"):
        config_from_hf(config)
    config.rope_parameters = rope
    config.n_shared_experts = 0
    with pytest.raises(NotImplementedError, match="n_shared_experts=0; .*zero-width shared expert"):
        config_from_hf(config)
    assert "mistral4" in SUPPORTED and "mistral4" not in REFUSED


def test_padding_and_cached_decoding_across_the_scale_steps(make_hf, gen):
    hf = make_hf("mistral4")
    ours = from_hf(hf)
    # the prompt ends before the first step of the scale (8); decoding crosses 8 and 16
    check_padding_and_cache(hf, ours, gen, length=20, real=13, prompt=5)
