"""Models that mix Gated DeltaNet layers with softmax attention, and attention with sinks or an
output gate: the cache gives the full forward's logits, padding changes nothing, the state is
a fixed size."""

from __future__ import annotations

import pytest
import torch

from llmviz.model.config import ModelConfig
from llmviz.model.generation import generate
from llmviz.model.lm import DecoderLM

from ._decoding import assert_cached_decoding_equals_full_forward

HYBRID = dict(n_layers=4, linear_layers=(0, 1, 2), linear_heads=4, linear_key_heads=2,
              linear_head_dim=8, attn_output_gate=True, d_model=32, n_heads=4, n_kv_heads=2)


def _model(**kw):
    torch.manual_seed(0)
    return DecoderLM(ModelConfig(**kw)).double().eval()


@pytest.mark.parametrize("kw", [HYBRID, dict(n_layers=2, attn_sinks=True, d_model=32, n_heads=4),
                                dict(HYBRID, linear_layers=(1, 3), attn_sinks=True)],
                         ids=["3:1 hybrid", "sinks", "hybrid with sinks"])
def test_cached_decoding_equals_the_full_forward(kw):
    ids = torch.randint(0, 256, (2, 21), generator=torch.Generator().manual_seed(1))
    assert_cached_decoding_equals_full_forward(_model(**kw), ids, prefill=5)


def test_hybrid_blocks_hold_the_right_mixers_and_names():
    model = _model(**HYBRID)
    assert [b.mixer for b in model.layers] == ["linear", "linear", "linear", "attention"]
    assert model.layers[0].self_attn is None and model.layers[3].linear_attn is None
    assert model.layers[3].self_attn.gate_proj is not None
    names = {n for n, _ in model.named_parameters()}
    assert "layers.0.linear_attn.A_log" in names and "layers.3.self_attn.gate_proj.weight" in names
    sinks = _model(n_layers=1, attn_sinks=True)
    assert sinks.layers[0].self_attn.sinks.shape == (4,)


def test_left_padded_batch_gives_each_prompt_its_own_tokens():
    model = _model(**HYBRID)
    g = torch.Generator().manual_seed(2)
    a, b = torch.randint(3, 256, (1, 9), generator=g), torch.randint(3, 256, (1, 4), generator=g)
    batch = torch.cat([a, torch.cat([torch.zeros(1, 5, dtype=torch.long), b], 1)])
    mask = torch.ones_like(batch)
    mask[1, :5] = 0
    with torch.no_grad():
        both = generate(model, batch, max_new_tokens=6, temperature=0.0, attention_mask=mask)
        alone_a = generate(model, a, max_new_tokens=6, temperature=0.0)
        alone_b = generate(model, b, max_new_tokens=6, temperature=0.0)
    assert torch.equal(both[0, -6:], alone_a[0, -6:])
    assert torch.equal(both[1, -6:], alone_b[0, -6:])


def test_the_linear_layers_state_does_not_grow_with_the_sequence():
    model = _model(**HYBRID)
    dense = _model(**{**HYBRID, "linear_layers": None})
    sizes = {}
    for name, m in (("hybrid", model), ("dense", dense)):
        for T in (16, 64):
            cache = m.new_cache()
            with torch.no_grad():
                m(torch.randint(0, 256, (1, T)), cache=cache)
            sizes[name, T] = cache.nbytes()
    hybrid_growth = sizes["hybrid", 64] - sizes["hybrid", 16]
    dense_growth = sizes["dense", 64] - sizes["dense", 16]
    assert hybrid_growth == dense_growth // 4  # only the one softmax layer of four grows
    assert sizes["hybrid", 64] < sizes["dense", 64]


def test_weights_are_none_for_linear_layers():
    model = _model(**HYBRID)
    with torch.no_grad():
        out = model(torch.randint(0, 256, (1, 6)), return_weights=True)
    assert out.weights[:3] == [None, None, None] and out.weights[3].shape == (1, 4, 6, 6)


@pytest.mark.parametrize("kw,match", [
    (dict(linear_layers=(2,)), r"linear_layers must hold layer indices in \[0, 2\); got \[2\]"),
    (dict(linear_layers=(0,), linear_heads=0), r"linear_heads"),
    (dict(linear_layers=(0,), linear_heads=3, linear_key_heads=2), r"n_v_heads=3 must be a multiple of n_k_heads=2"),
])
def test_bad_hybrid_configs(kw, match):
    with pytest.raises(ValueError, match=match):
        DecoderLM(ModelConfig(**kw))
