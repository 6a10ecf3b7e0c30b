"""Mistral Small 4's position-scaled queries in latent attention, against transformers' modules."""

from __future__ import annotations

import math

import pytest
import torch

from llmviz.attention.latent import LatentCache, MultiHeadLatentAttention
from llmviz.attention.llama4_qk import query_temperature
from llmviz.attention.scaled_latent import ScaledQueryLatentAttention, llama4_query_scale
from llmviz.position.rope_scaling import RopeScaling

transformers = pytest.importorskip("transformers")

_SIZES = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12, q_lora_rank=24)
_ROPE = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4, "original_max_position_embeddings": 8,
         "mscale": 1.0, "mscale_all_dim": 1.0, "partial_rotary_factor": 0.5}


def test_scale_is_transformers_get_llama_4_attn_scale_and_not_llama4_temperature():
    from transformers.models.ministral3.modeling_ministral3 import get_llama_4_attn_scale

    pos = torch.arange(40)[None]
    ref = get_llama_4_attn_scale(pos, 0.3, 8)[0, 0, :, 0]
    torch.testing.assert_close(llama4_query_scale(pos[0], 0.3, 8), ref, rtol=0, atol=1e-7)
    want = [1 + 0.3 * math.log(1 + p // 8) for p in range(40)]
    torch.testing.assert_close(llama4_query_scale(torch.arange(40), 0.3, 8), torch.tensor(want), rtol=0, atol=1e-6)
    # Llama 4's NoPE temperature counts from p + 1: its first step is one position earlier
    diff = llama4_query_scale(torch.arange(40), 0.3, 8) != query_temperature(torch.arange(40), 8, 0.3)
    assert diff.nonzero().flatten().tolist() == [7, 15, 23, 31, 39]


def _pair(beta: float):
    config = transformers.Mistral4Config(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
        rope_parameters=dict(_ROPE, llama_4_scaling_beta=beta), attention_bias=True, **_SIZES)
    config._attn_implementation = "eager"
    from transformers.models.mistral4.modeling_mistral4 import Mistral4Attention, Mistral4RotaryEmbedding

    torch.manual_seed(0)
    hf = Mistral4Attention(config, layer_idx=0).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    rope = RopeScaling("yarn", factor=4.0, original_max_position_embeddings=8, beta_fast=32.0, beta_slow=1.0,
                       mscale=1.0, mscale_all_dim=1.0)
    ours = ScaledQueryLatentAttention(64, 4, beta=beta, original_max_position_embeddings=8, rope_scaling=rope,
                                      bias=True, **_SIZES)
    ours.load_state_dict(hf.state_dict())
    return hf, Mistral4RotaryEmbedding(config), ours


@pytest.mark.parametrize("beta", [0.0, 0.4])
def test_matches_transformers_mistral4_attention_past_the_first_step(beta):
    hf, hf_rope, ours = _pair(beta)
    T = 24  # the scale steps at positions 8 and 16
    x = torch.randn(2, T, 64)
    pos = torch.arange(T)[None].expand(2, T)
    causal = torch.full((T, T), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        ref = hf(x, hf_rope(x, pos), causal, pos)[0]
        got = ours(x)
        got_absorbed = ours(x, positions=pos, absorbed=True)
    torch.testing.assert_close(got, ref, rtol=0, atol=2e-6)
    torch.testing.assert_close(got_absorbed, ref, rtol=0, atol=2e-6)
    plain = MultiHeadLatentAttention(64, 4, rope_scaling=ours.rope.scaling, bias=True, **_SIZES)
    plain.load_state_dict(ours.state_dict())
    with torch.no_grad():
        unscaled = plain(x)
    assert torch.equal(unscaled[:, :8], got[:, :8])  # scale 1 on the first L positions
    assert (unscaled - got)[:, 8:].abs().max() > 1e-3 if beta else torch.equal(unscaled, got)


def test_cached_decoding_equals_the_full_pass_and_from_latent_shares_weights():
    _, _, ours = _pair(0.4)
    x = torch.randn(1, 20, 64)
    cache = LatentCache()
    with torch.no_grad():
        full = ours(x)
        steps = [ours(x[:, :12], cache=cache)] + [ours(x[:, t:t + 1], cache=cache) for t in range(12, 20)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=2e-6)
    plain = MultiHeadLatentAttention(64, 4, **_SIZES)
    wrapped = ScaledQueryLatentAttention.from_latent(plain, 0.4, 8)
    assert wrapped.kv_b_proj.weight is plain.kv_b_proj.weight and "beta=0.4" in repr(wrapped)


def test_bad_inputs():
    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        llama4_query_scale(torch.arange(3), 0.1, 0)
    with pytest.raises(TypeError, match="beta"):
        llama4_query_scale(torch.arange(3), "0.1", 8)
    with pytest.raises(TypeError, match="unscaled MultiHeadLatentAttention, got Linear"):
        ScaledQueryLatentAttention.from_latent(torch.nn.Linear(2, 2), 0.1, 8)
    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        ScaledQueryLatentAttention(64, 4, beta=0.1, original_max_position_embeddings=-1, **_SIZES)
    layer = ScaledQueryLatentAttention(64, 4, beta=0.1, original_max_position_embeddings=8, **_SIZES)
    with pytest.raises(TypeError, match="LatentCache"):
        layer(torch.randn(1, 3, 64), cache={})
