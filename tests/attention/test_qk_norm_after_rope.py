"""QK-norm after RoPE (HunYuan's order) against transformers' HunYuan attention layer, and the
order matters: the same weights normalised before rotating give other outputs."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.module import MultiHeadAttention
from llmviz.attention.qk_norm_after_rope import RotaryThenNorm, norm_after_rope
from llmviz.model.config import ModelConfig
from llmviz.model.kinds import ATTENTIONS
from llmviz.position.rotary import RotaryEmbedding

C, H, G, D, T = 32, 4, 2, 8, 7


def _ours(kind: str) -> MultiHeadAttention:
    c = ModelConfig(d_model=C, n_heads=H, n_kv_heads=G, head_dim=D, qk_norm="rms", qk_norm_eps=1e-5,
                    attn_kind=kind)
    torch.manual_seed(0)
    attn = ATTENTIONS[kind].build(c, 0, RotaryEmbedding(D, base=1e4))
    with torch.no_grad():  # norm weights that differ within each rotated pair
        attn.q_norm.weight.copy_(1 + 0.5 * torch.randn(D))
        attn.k_norm.weight.copy_(1 + 0.5 * torch.randn(D))
    return attn.eval()


def test_matches_transformers_hunyuan_attention():
    transformers = pytest.importorskip("transformers")
    from transformers.models.hunyuan_v1_dense import modeling_hunyuan_v1_dense as mod

    config = transformers.HunYuanDenseV1Config(hidden_size=C, num_attention_heads=H, num_key_value_heads=G,
                                               head_dim=D, rms_norm_eps=1e-5, intermediate_size=64,
                                               vocab_size=10, num_hidden_layers=1)
    config._attn_implementation = "eager"
    hf = mod.HunYuanDenseV1Attention(config, 0).eval()
    ours = _ours("qk_norm_after_rope")
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            getattr(hf, name).weight.copy_(getattr(ours, name).weight)
        hf.query_layernorm.weight.copy_(ours.q_norm.weight)
        hf.key_layernorm.weight.copy_(ours.k_norm.weight)
        x = torch.randn(2, T, C)
        rotary = mod.HunYuanDenseV1RotaryEmbedding(config)
        cos_sin = rotary(x, torch.arange(T)[None].expand(2, T))
        causal = torch.full((T, T), float("-inf")).triu(1)[None, None].expand(2, 1, T, T)
        ref, _ = hf(x, position_embeddings=cos_sin, attention_mask=causal)
        got = ours(x)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


def test_the_order_matters_and_parameters_are_those_of_the_standard_layer():
    after, before = _ours("qk_norm_after_rope"), _ours("standard")
    before.load_state_dict(after.state_dict())  # same names, same tensors
    x = torch.randn(1, T, C)
    with torch.no_grad():
        assert (after(x) - before(x)).abs().max() > 1e-3
    assert isinstance(after.rope, RotaryThenNorm)
    assert sum(p.numel() for p in after.parameters()) == sum(p.numel() for p in before.parameters())


def test_cache_decoding_equals_the_full_forward():
    attn = _ours("qk_norm_after_rope")
    from llmviz.attention.kv_cache import KVCache

    x = torch.randn(1, T, C)
    with torch.no_grad():
        cache = KVCache()
        steps = [attn(x[:, :3], cache=cache)] + [attn(x[:, t:t + 1], cache=cache) for t in range(3, T)]
        torch.testing.assert_close(torch.cat(steps, 1), attn(x), atol=1e-5, rtol=0)


def test_bad_inputs():
    with pytest.raises(TypeError, match="takes a MultiHeadAttention"):
        norm_after_rope(torch.nn.Linear(2, 2))
    attn = _ours("qk_norm_after_rope")
    with pytest.raises(ValueError, match="already acts after RoPE"):
        norm_after_rope(attn)
    with pytest.raises(ValueError, match="scope must be 'head' or 'all'"):
        RotaryThenNorm(None, attn.q_norm, attn.k_norm, scope="token")
    plain = MultiHeadAttention(C, H)
    assert norm_after_rope(plain) is plain and plain.rope is None  # no QK-norm: nothing to move
