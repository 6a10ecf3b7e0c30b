"""Cache numbers per token: the formula agrees with what a model's cache really holds."""

from __future__ import annotations

import pytest
import torch

from llmviz.analysis import design_cache_bytes, kv_cache_bytes, kv_cache_bytes_for, layer_cache_elements
from llmviz.model import DecoderLM, ModelConfig

BASE = dict(vocab_size=64, d_model=32, n_layers=4, n_heads=4, max_seq_len=64)
CONFIGS = {
    "mha": ModelConfig(**BASE),
    "gqa": ModelConfig(**BASE, n_kv_heads=2),
    "mqa": ModelConfig(**BASE, n_kv_heads=1),
    "mla": ModelConfig(**BASE, attn_kind="mla", kv_lora_rank=12, qk_nope_head_dim=8,
                       qk_rope_head_dim=4, v_head_dim=8),
    "hybrid": ModelConfig(**BASE, n_kv_heads=2, linear_layers=(0, 1, 2)),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_formula_equals_the_bytes_a_real_cache_holds(name):
    """What one more token adds to a real cache (a linear layer's fixed state does not grow)."""
    config = CONFIGS[name]
    torch.manual_seed(0)
    model = DecoderLM(config).eval()
    sizes = []
    for T in (10, 20):
        cache = model.new_cache()
        with torch.no_grad():
            model(torch.randint(0, 64, (2, T)), cache=cache)
        sizes.append(cache.nbytes())
    per_token = sum(layer_cache_elements(config, i) for i in range(config.n_layers))
    assert per_token > 0
    assert sizes[1] - sizes[0] == per_token * 10 * 2 * 4  # 10 more tokens, batch 2, float32
    assert kv_cache_bytes_for(config, 10, batch=2, bytes_per_el=4) == per_token * 10 * 2 * 4
    if name != "hybrid":
        assert sizes[0] == per_token * 10 * 2 * 4


def test_per_layer_elements_by_design():
    assert layer_cache_elements(CONFIGS["mha"], 0) == 2 * 4 * 8
    assert layer_cache_elements(CONFIGS["mqa"], 0) == 2 * 8
    assert layer_cache_elements(CONFIGS["mla"], 0) == 12 + 4
    assert [layer_cache_elements(CONFIGS["hybrid"], i) for i in range(4)] == [0, 0, 0, 2 * 2 * 8]


def test_designs_against_the_plain_formula():
    kw = dict(n_layers=8, n_heads=16, head_dim=64, n_kv_heads=4)
    assert design_cache_bytes("mha", 100, **kw) == kv_cache_bytes(n_layers=8, n_kv_heads=16, head_dim=64, seq_len=100)
    assert design_cache_bytes("gqa", 100, **kw) == kv_cache_bytes(n_layers=8, n_kv_heads=4, head_dim=64, seq_len=100)
    assert design_cache_bytes("mqa", 100, **kw) == kv_cache_bytes(n_layers=8, n_kv_heads=1, head_dim=64, seq_len=100)
    assert design_cache_bytes("mla", 100, **kw, latent_dim=96, rope_dim=32) == 8 * 128 * 100 * 2
    # a window caps the cache; below the window sliding equals GQA
    assert design_cache_bytes("sliding", 50, **kw, window=64) == design_cache_bytes("gqa", 50, **kw)
    assert design_cache_bytes("sliding", 10_000, **kw, window=64) == design_cache_bytes("gqa", 64, **kw)
    # one softmax layer in every 4 (rounded up)
    assert design_cache_bytes("hybrid", 100, **kw, hybrid_every=4) * 4 == design_cache_bytes("gqa", 100, **kw)


def test_bad_input_names_the_fix():
    with pytest.raises(ValueError, match="design"):
        design_cache_bytes("flash", 10, n_layers=1, n_heads=4, head_dim=8)
    with pytest.raises(ValueError, match="must divide n_heads"):
        design_cache_bytes("gqa", 10, n_layers=1, n_heads=4, head_dim=8, n_kv_heads=3)
    with pytest.raises(ValueError, match="context"):
        design_cache_bytes("mha", 0, n_layers=1, n_heads=4, head_dim=8)
    with pytest.raises(TypeError, match="ModelConfig"):
        layer_cache_elements({"n_layers": 2}, 0)
    with pytest.raises(ValueError, match="layer_idx"):
        layer_cache_elements(CONFIGS["mha"], 4)


@pytest.mark.parametrize("name", ["mla", "hybrid"])
def test_config_parameter_counts_cover_latent_and_linear_layers(name):
    """A config's count equals the built model's, also where the closed form does not apply."""
    from llmviz.analysis import count_parameters

    config = CONFIGS[name]
    assert count_parameters(config) == count_parameters(DecoderLM(config))


def test_config_parameter_counts_cover_experts_sinks_and_gates():
    from llmviz.analysis import count_parameters

    for extra in (dict(n_experts=4, experts_top_k=2), dict(attn_sinks=True), dict(attn_output_gate=True)):
        config = ModelConfig(**BASE, **extra)
        assert count_parameters(config) == count_parameters(DecoderLM(config)), extra
