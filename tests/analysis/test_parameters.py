"""Parameter counts (closed form vs numel), FLOPs, KV-cache bytes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.analysis import (
    count_parameters,
    flops_per_token,
    gpt2_layer_params,
    kv_cache_bytes,
    kv_cache_bytes_for,
    layer_params,
)
from llmviz.model import DecoderLM
from llmviz.model.config import ModelConfig
from llmviz.model.presets import PRESETS, preset


@pytest.mark.parametrize("d", [8, 32, 48, 96])
def test_gpt2_layer_closed_form_vs_numel(d):
    block = DecoderLM(preset("gpt2", d_model=d, n_heads=4, n_layers=1)).layers[0]
    assert gpt2_layer_params(d) == sum(p.numel() for p in block.parameters())


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(list(PRESETS)),
    d=st.sampled_from([32, 48, 64]),
    layers=st.integers(1, 3),
    qk=st.sampled_from([None, "rms", "layer"]),
    tie=st.booleans(),
)
def test_closed_form_equals_numel_by_component(name, d, layers, qk, tie):
    c = preset(name, d_model=d, n_layers=layers, qk_norm=qk, tie_embeddings=tie,
               **({"head_dim": 8} if name == "gemma2" else {}))
    m = DecoderLM(c)
    a, b = count_parameters(c), count_parameters(m)
    assert a == b
    assert a["total"] == sum(p.numel() for p in m.parameters())  # tied weights once
    assert a["total"] == a["embeddings"] + a["non_embedding"]
    assert sum(a["per_layer"]) + a["embeddings"] + a["by_component"]["lm_head"] <= a["total"]


def test_gqa_shrinks_only_kv_projections():
    mha, gqa = ModelConfig(n_heads=8, n_kv_heads=8), ModelConfig(n_heads=8, n_kv_heads=2)
    diff = layer_params(mha)["attention"] - layer_params(gqa)["attention"]
    assert diff == 2 * 64 * (8 - 2) * 8  # two projections, C x (H - G) D fewer


def test_flops_about_six_n():
    c = preset("llama2", "7b")
    n = count_parameters(c)["non_embedding"]
    short = flops_per_token(c, seq_len=1)
    assert short / (6 * n) == pytest.approx(1.0, rel=0.05)  # the lm_head adds ~2 %
    assert flops_per_token(c, training=False, seq_len=1) == pytest.approx(short / 3)
    # the attention term grows linearly with context
    f1, f2, f3 = (flops_per_token(c, seq_len=t) for t in (1024, 2048, 3072))
    assert f3 - f2 == pytest.approx(f2 - f1, rel=1e-9)
    assert flops_per_token(c, seq_len=4096, causal=False) > flops_per_token(c, seq_len=4096)


def test_sliding_window_caps_attention_flops_and_cache():
    c = preset("mistral", "7b")
    full = c.replace(sliding_window=None)
    assert flops_per_token(c, seq_len=32768) < flops_per_token(full, seq_len=32768)
    assert kv_cache_bytes_for(c, 32768) == kv_cache_bytes_for(full, 4096)


def test_kv_cache_formula_matches_real_cache(gen):
    c = ModelConfig(n_layers=3, n_heads=4, n_kv_heads=2)
    m = DecoderLM(c).eval()
    cache = m.new_cache()
    with torch.no_grad():
        m(torch.randint(0, 256, (2, 10), generator=gen), cache=cache)
    assert cache.nbytes() == kv_cache_bytes(n_layers=3, n_kv_heads=2, head_dim=16, seq_len=10,
                                            batch=2, bytes_per_el=4)
    assert kv_cache_bytes_for(c, 10, batch=2, bytes_per_el=4) == cache.nbytes()


def test_mha_cache_is_2_n_dmodel_per_layer():
    # ERRATA 001: MHA stores 2 * T * H * D = 2 * T * C numbers per layer
    b = kv_cache_bytes(n_layers=1, n_kv_heads=32, head_dim=128, seq_len=100, bytes_per_el=1)
    assert b == 2 * 100 * 4096


def test_errors():
    with pytest.raises(TypeError, match="nn.Module or a ModelConfig"):
        count_parameters("llama")
    with pytest.raises(ValueError, match="seq_len must be a positive int, got 0"):
        flops_per_token(ModelConfig(), seq_len=0)
    with pytest.raises(TypeError, match="config must be a ModelConfig"):
        flops_per_token({"d_model": 4})
    with pytest.raises(ValueError, match="n_kv_heads must be a positive int, got 0"):
        kv_cache_bytes(n_layers=1, n_kv_heads=0, head_dim=4, seq_len=4)
    with pytest.raises(TypeError, match="seq_len must be an int, got float 4.5"):
        kv_cache_bytes(n_layers=1, n_kv_heads=1, head_dim=4, seq_len=4.5)
    with pytest.raises(ValueError, match="bytes_per_el must be finite, got nan"):
        kv_cache_bytes(n_layers=1, n_kv_heads=1, head_dim=4, seq_len=4, bytes_per_el=float("nan"))


@pytest.mark.parametrize("layers", [1, 2, 4, 8])
def test_match_width_hits_target(layers):
    from llmviz.analysis import match_width

    base = preset("llama2", n_heads=4, n_kv_heads=2)
    c = match_width(base, layers, 200_000)
    n = sum(count_parameters(c)["per_layer"])
    assert c.n_layers == layers and c.head_dim % 2 == 0
    # no other width on the grid is closer
    for other in (c.d_model - 8, c.d_model + 8):
        if other > 0:
            m = sum(count_parameters(base.replace(n_layers=layers, d_model=other))["per_layer"])
            assert abs(m - 200_000) >= abs(n - 200_000)
    with pytest.raises(ValueError, match="target must be positive, got 0"):
        match_width(base, 2, 0)


@pytest.mark.parametrize("count", ["total", "non_embedding", "blocks"])
@pytest.mark.parametrize("layers", [1, 3, 8])
def test_match_width_total_with_min_head_dim(layers, count):
    from llmviz.analysis import match_width

    base = preset("llama2", n_heads=4, n_kv_heads=2, max_seq_len=64)  # grouping 2
    target = 150_000

    def counted(c):
        if count == "blocks":
            return sum(count_parameters(c)["per_layer"])
        return count_parameters(c)[count]

    c = match_width(base, layers, target, count=count, min_head_dim=16, step=4)
    assert c.n_layers == layers and c.d_model % 4 == 0
    assert c.head_dim >= 16 and c.head_dim % 2 == 0 and c.head_dim * c.n_heads == c.d_model
    assert c.n_heads == 2 * c.n_kv_heads  # the grouping is kept
    # the count agrees with a built model, and no other valid width on the grid is closer
    assert count_parameters(DecoderLM(c)) == count_parameters(c)
    for other in (c.d_model - 4, c.d_model + 4):
        try:
            alt = match_width(base, layers, target, count=count, min_head_dim=16, step=other)
        except ValueError:
            continue
        if alt.d_model == other:
            assert abs(counted(alt) - target) >= abs(counted(c) - target)
    # fitting the feed-forward lands within one d_ff step of the target
    f = match_width(base, layers, target, count=count, min_head_dim=16, step=4, fit_ffn=True)
    per_unit = counted(f.replace(d_ff=f.d_ff + 1)) - counted(f)
    assert f.d_model == c.d_model and abs(counted(f) - target) <= per_unit / 2 + 1
    assert abs(counted(f) - target) <= abs(counted(c) - target)


def test_match_width_total_differs_from_blocks():
    from llmviz.analysis import match_width

    base = preset("llama2", n_heads=4, n_kv_heads=4, max_seq_len=64)
    blocks = match_width(base, 1, 100_000)
    total = match_width(base, 1, 100_000, count="total")
    # an untied 256-byte vocabulary costs 2 * 256 * C outside the blocks: the total match is narrower
    assert total.d_model < blocks.d_model
    assert abs(count_parameters(total)["total"] - 100_000) < abs(count_parameters(blocks)["total"] - 100_000)


def test_match_width_rejects_bad_arguments():
    from llmviz.analysis import match_width

    base = preset("llama2", n_heads=4, n_kv_heads=2)
    with pytest.raises(ValueError, match="count='all' is not supported"):
        match_width(base, 2, 10_000, count="all")
    with pytest.raises(ValueError, match="n_layers must be a positive int, got 0"):
        match_width(base, 0, 10_000)
    with pytest.raises(ValueError, match="min_head_dim must be a positive int, got 0"):
        match_width(base, 2, 10_000, min_head_dim=0)
    with pytest.raises(TypeError, match="step must be an int"):
        match_width(base, 2, 10_000, step=2.5)
    with pytest.raises(TypeError, match="config must be a ModelConfig"):
        match_width({"d_model": 8}, 2, 10_000)


def test_longest_verbatim_match():
    from llmviz.analysis import longest_verbatim_match

    corpus = "the quick brown fox jumps over the lazy dog"
    assert longest_verbatim_match("a quick brown cat", corpus) == (len(" quick brown "), " quick brown ")
    assert longest_verbatim_match("QZ!", corpus) == (0, "")
    text = "zzover the lazy dogzz"
    n, s = longest_verbatim_match(text, corpus)
    assert s == "over the lazy dog" and s in corpus and n == len(s)
    # brute force agrees on random strings
    import random

    rng = random.Random(0)
    for _ in range(20):
        t = "".join(rng.choice("abc") for _ in range(12))
        c = "".join(rng.choice("abc") for _ in range(30))
        brute = max((j - i for i in range(len(t)) for j in range(i, len(t) + 1) if t[i:j] in c), default=0)
        assert longest_verbatim_match(t, c)[0] == brute
    with pytest.raises(TypeError, match="must both be str"):
        longest_verbatim_match(b"x", corpus)


# ----------------------------------------------------------------------------- configs past the closed form
_FRONTIER_BASE = dict(vocab_size=64, d_model=32, n_layers=4, n_heads=4, max_seq_len=64)
_FRONTIER_CONFIGS = {
    "mla": ModelConfig(**_FRONTIER_BASE, attn_kind="mla", kv_lora_rank=12, qk_nope_head_dim=8,
                       qk_rope_head_dim=4, v_head_dim=8),
    "hybrid": ModelConfig(**_FRONTIER_BASE, n_kv_heads=2, linear_layers=(0, 1, 2)),
}


@pytest.mark.parametrize("name", ["mla", "hybrid"])
def test_config_parameter_counts_cover_latent_and_linear_layers(name):
    """A config's count equals the built model's, also where the closed form does not apply."""
    from llmviz.analysis import count_parameters

    config = _FRONTIER_CONFIGS[name]
    assert count_parameters(config) == count_parameters(DecoderLM(config))


def test_config_parameter_counts_cover_experts_sinks_and_gates():
    from llmviz.analysis import count_parameters

    for extra in (dict(n_experts=4, experts_top_k=2), dict(attn_sinks=True), dict(attn_output_gate=True)):
        config = ModelConfig(**_FRONTIER_BASE, **extra)
        assert count_parameters(config) == count_parameters(DecoderLM(config)), extra
