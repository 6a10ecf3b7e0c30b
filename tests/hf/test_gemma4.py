"""Gemma 4's text model (gemma4_text): what the reader and the layout's adapt build, the
configurations beyond the two parity rows of conftest, and what is refused, by name."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.shared_kv import SharedKVAttention
from llmviz.hf import anatomy, config_from_hf, from_hf
from llmviz.model import generate
from llmviz.model.per_layer_inputs import PerLayerEmbedding, PerLayerInputBlock
from llmviz.moe.dense_and_experts import DenseAndExperts

from ._padding import check_padding_and_cache

transformers = pytest.importorskip("transformers")


def _same(hf, ids, gen):
    """Greedy tokens equal, and logits within the parity test's bound: 1e-5 or twice llmviz's own
    float32 rounding (against the same model in float64), whichever is larger."""
    ours = from_hf(hf)
    with torch.no_grad():
        got = ours(ids).logits
        diff = (got - hf(ids).logits).abs().max().item()
        rounding = (got.double() - from_hf(hf, dtype=torch.float64)(ids).logits).abs().max().item()
    assert diff <= max(1e-5, 2 * rounding), (diff, rounding)
    prompt = torch.randint(3, 100, (1, 5), generator=gen)
    ref = hf.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert torch.equal(generate(ours, prompt, max_new_tokens=12, temperature=0), ref)
    return ours


def _scaled_router(hf):
    """Router scales moved off 1 (conftest randomises norms and biases only)."""
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith(("router.scale", "router.per_expert_scale")):
                p.add_(0.3 * torch.randn_like(p))
    return hf


def test_what_the_model_is_built_of(make_hf):
    hf = make_hf("gemma4_text")
    c = config_from_hf(hf.config)
    assert (c.placement, c.norm, c.ffn, c.activation, c.qk_norm, c.attn_scale, c.final_softcap) == (
        "sandwich", "rms", "geglu", "gelu_tanh", "rms", 1.0, 30.0)
    assert (c.head_dim, c.layer_windows, c.local_rope_base, c.rope_scaling.kind) == (
        4, (5, 5, None, 5, 5, None), 100.0, "proportional")
    ours = from_hf(hf)
    assert isinstance(ours.embed_tokens, PerLayerEmbedding) and ours.lm_head.weight is ours.embed_tokens.weight
    attn = [b.self_attn for b in ours.layers]
    assert all(isinstance(b, PerLayerInputBlock) for b in ours.layers)
    assert all(isinstance(a, SharedKVAttention) and a.value_norm_eps == 1e-6 for a in attn)
    assert [a.head_dim for a in attn] == [4, 4, 8] * 2
    assert [a.role for a in attn] == [None, None, "store", "store", "reuse", "reuse"]
    layer_scalars = torch.stack([b.layer_scalar for b in ours.layers])
    torch.testing.assert_close(layer_scalars, torch.stack([b.layer_scalar for b in hf.model.layers]))
    a = anatomy(hf.config)  # the reusing layers cache nothing; the global ones cache 8-wide heads
    assert [layer.kv_elements for layer in a.layers] == [16, 16, 32, 16, 0, 0]


def test_moe_row_routes_with_its_scales(make_hf, ids, gen):
    """Router scales randomised (conftest leaves them at 1): still the same logits and tokens."""
    hf = _scaled_router(make_hf("gemma4_text-moe"))
    ours = _same(hf, ids, gen)
    assert all(isinstance(b.mlp, DenseAndExperts) for b in ours.layers)
    a = anatomy(hf.config)
    assert (a.ffn, a.experts, a.experts_active, a.expert_d_ff, a.d_ff) == ("moe (glu experts)", 4, 2, 16, 96)
    assert a.active_params < a.total_params == sum(p.numel() for p in ours.parameters())


def test_k_eq_v_row_is_built_of_its_parts(make_hf):
    ours = from_hf(make_hf("gemma4_text-k_eq_v"))
    attn = [b.self_attn for b in ours.layers]
    assert [a.v_proj is None for a in attn] == [False, False, True, True, True, True]  # global, reusing
    assert [a.n_kv_heads for a in attn] == [2] * 6
    ours = from_hf(make_hf("gemma4_text-k_eq_v", num_global_key_value_heads=1))  # per_layer_config
    assert [b.self_attn.n_kv_heads for b in ours.layers] == [2, 2, 1, 2, 2, 1]
    assert [b.mlp.up_proj.out_features for b in ours.layers] == [96] * 3 + [192] * 3


@pytest.mark.parametrize("overrides", [
    dict(hidden_size_per_layer_input=0, num_kv_shared_layers=0, tie_word_embeddings=False),
    dict(use_bidirectional_attention="vision"),  # bidirectional only over image tokens: none here
    dict(layer_types=["full_attention"] * 6, num_kv_shared_layers=1, attention_bias=True),
    dict(attention_k_eq_v=True, num_global_key_value_heads=1),  # kv heads per layer: 2 sliding, 1 global
], ids=["no-per-layer-inputs-untied", "vision-bidirectional", "all-global-biased", "global-kv-heads"])
def test_more_configurations_load_exactly(make_hf, ids, gen, overrides):
    _same(make_hf("gemma4_text", **overrides), ids, gen)


def test_refused_configurations_name_the_part(make_hf):
    with pytest.raises(NotImplementedError, match="use_bidirectional_attention='all'"):
        config_from_hf(make_hf("gemma4_text", use_bidirectional_attention="all").config)
    config = transformers.Gemma4TextConfig(num_hidden_layers=2, layer_types=["full_attention"] * 2,
                                           per_layer_config={1: {"intermediate_size": 64}})
    with pytest.raises(NotImplementedError, match=r"per_layer_config overrides \['intermediate_size'\]"):
        config_from_hf(config)
    config = make_hf("gemma4_text").config
    config.num_kv_shared_layers = 6
    with pytest.raises(ValueError, match="num_kv_shared_layers=6; at least one of the 6 layers"):
        config_from_hf(config)
    config.num_kv_shared_layers, config.layer_types = 1, ["full_attention"] * 5 + ["sliding_attention"]
    with pytest.raises(ValueError, match=r"layer 5 \(sliding_attention\) reuses keys and values but no"):
        config_from_hf(config)


def test_padding_cache_and_weights(make_hf, gen):
    hf = make_hf("gemma4_text")
    ours = from_hf(hf)
    # the cached pass within float32 rounding: see the float64 test
    x, cache = check_padding_and_cache(hf, ours, gen, atol=5e-5, cache_atol=2e-5)
    with torch.no_grad():
        out = ours(x, return_weights=True)
    assert len(cache) == 4  # the two reusing layers keep no keys of their own
    assert [tuple(w.shape) for w in out.weights] == [(2, 4, 12, 12)] * 6


@pytest.mark.parametrize("family", ["gemma4_text", "gemma4_text-k_eq_v", "gemma4_text-moe"])
def test_float64_logits_agree_to_float64_rounding(family, make_hf, ids, monkeypatch):
    """The float32 rows differ by up to ~2e-5, which is float32 rounding of these tiny models
    (unscaled scores of unit-RMS heads; llmviz's own float32 logits are as far from its float64
    ones): in float64, with transformers' two float32 casts
    (its RMS norms and RoPE angles) lifted and its float32 sqrt(P) made exact, the two models
    agree to ~1e-12."""
    from transformers.models.gemma4 import modeling_gemma4 as g4

    def norm(self, x):
        out = self._norm(x)
        return out * self.weight if self.with_scale else out

    def rope(self, x, position_ids, layer_type):
        freqs = position_ids[..., None].double() * getattr(self, f"{layer_type}_inv_freq").double()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    monkeypatch.setattr(g4.Gemma4RMSNorm, "forward", norm)
    monkeypatch.setattr(g4.Gemma4TextRotaryEmbedding, "forward", rope)
    hf = _scaled_router(make_hf(family))
    hf.config._experts_implementation = "eager"  # its grouped matmul takes no float64
    hf = hf.double()
    hf.model.embed_tokens_per_layer.embed_scale.fill_(hf.config.hidden_size_per_layer_input ** 0.5)
    with torch.no_grad():
        diff = (from_hf(hf, dtype=torch.float64)(ids).logits - hf(ids).logits).abs().max().item()
    assert diff < 1e-10, diff


@pytest.mark.parametrize("overrides", [
    {},  # the config class's defaults: 30 layers, 262k-token per-layer table, 5.08e9 parameters
    dict(enable_moe_block=True, num_experts=128, top_k_experts=8, moe_intermediate_size=704,
         hidden_size_per_layer_input=0, attention_k_eq_v=True, num_global_key_value_heads=2),
    dict(num_kv_shared_layers=20, use_double_wide_mlp=True),
], ids=["defaults", "moe-k_eq_v", "kv-shared-double-wide"])
def test_full_size_counts_equal_transformers(overrides):
    config = transformers.Gemma4TextConfig(**overrides)
    with torch.device("meta"):
        hf = transformers.AutoModelForCausalLM.from_config(config)
    a = anatomy(config)
    assert a.total_params == sum(p.numel() for p in hf.parameters())
    assert (a.active_params < a.total_params) == bool(overrides.get("enable_moe_block"))
