"""Scaled dot-product attention, GQA/MQA, KV cache and the attention module."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.attention import (
    MultiHeadAttention,
    attention_weights,
    gqa_from_mha,
    repeat_kv,
    scaled_dot_product_attention,
)
from llmviz.attention.kv_cache import KVCache
from llmviz.attention.masks import causal_mask, padding_mask, sliding_window_mask


def _qkv(B=2, H=4, G=2, T=5, S=7, D=8, *, gen=None, device="cpu", dtype=torch.float32):
    g = gen or torch.Generator().manual_seed(0)
    q = torch.randn(B, H, T, D, generator=g).to(device, dtype)
    k = torch.randn(B, G, S, D, generator=g).to(device, dtype)
    v = torch.randn(B, G, S, D, generator=g).to(device, dtype)
    return q, k, v


# --------------------------------------------------------------------------- properties
@given(
    B=st.integers(1, 2), G=st.integers(1, 3), rep=st.integers(1, 3), T=st.integers(1, 6),
    extra=st.integers(0, 4), D=st.sampled_from([2, 4, 8]), causal=st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_rows_sum_to_one_and_causal_zero_above_diagonal(B, G, rep, T, extra, D, causal):
    H, S = G * rep, T + extra
    q, k, v = _qkv(B, H, G, T, S, D)
    mask = causal_mask(T, S) if causal else None
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    assert w.shape == (B, H, T, S) and out.shape == (B, H, T, D)
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, T))
    if causal:
        assert (w.masked_select(~causal_mask(T, S).expand_as(w)) == 0).all()


def test_scale_default_is_inverse_sqrt_d():
    q, k, v = _qkv(H=2, G=2, D=16)
    a = attention_weights(q, k)
    b = attention_weights(q, k, scale=1 / math.sqrt(16))
    c = attention_weights(q, k, scale=1.0)
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, c)


# --------------------------------------------------------------------------- parity with torch
@pytest.mark.parametrize("G", [1, 2, 4])
@pytest.mark.parametrize("use_mask,use_bias", [(False, False), (True, False), (False, True), (True, True)])
def test_reference_matches_torch_sdpa(G, use_mask, use_bias, device):
    q, k, v = _qkv(H=4, G=G, T=5, S=7, device=device)
    g = torch.Generator().manual_seed(1)
    mask = bias = None
    if use_mask:
        mask = causal_mask(5, 7, device=device) & padding_mask(torch.tensor([[1] * 7, [0, 0, 1, 1, 1, 1, 1]])).to(device)
    if use_bias:
        bias = torch.randn(4, 5, 7, generator=g).to(device)
    torch_mask = None
    if use_mask or use_bias:
        torch_mask = torch.zeros(2, 4, 5, 7, device=device)
        if use_bias:
            torch_mask = torch_mask + bias
        if use_mask:
            torch_mask = torch_mask.masked_fill(~mask, float("-inf"))
    want = F.scaled_dot_product_attention(q, repeat_kv(k, 4 // G), repeat_kv(v, 4 // G), attn_mask=torch_mask, scale=0.3)
    ref = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias, scale=0.3, fused=False)
    fused = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias, scale=0.3, fused=True)
    torch.testing.assert_close(ref, want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(fused, want, atol=1e-5, rtol=1e-4)


def test_low_precision_reference_close_to_float32():
    q, k, v = _qkv()
    ref32 = scaled_dot_product_attention(q, k, v, fused=False)
    ref16 = scaled_dot_product_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), fused=False)
    assert ref16.dtype == torch.bfloat16
    torch.testing.assert_close(ref16.float(), ref32, atol=5e-2, rtol=5e-2)


def test_repeat_kv_matches_hf(device):
    from transformers.models.llama.modeling_llama import repeat_kv as hf_repeat_kv

    x = torch.randn(2, 3, 5, 4, device=device)
    for n in (1, 2, 4):
        assert torch.equal(repeat_kv(x, n), hf_repeat_kv(x, n))
        assert torch.equal(repeat_kv(x, n), x.repeat_interleave(n, dim=1))
    with pytest.raises(ValueError, match="n_rep must be a positive int"):
        repeat_kv(x, 0)


def test_matches_hf_eager_attention_forward(device):
    from transformers.models.llama.modeling_llama import eager_attention_forward

    class Dummy(torch.nn.Module):
        num_key_value_groups = 2

    q, k, v = _qkv(H=4, G=2, T=6, S=6, device=device)
    mask = causal_mask(6, device=device)
    additive = torch.zeros(6, 6, device=device).masked_fill(~mask, torch.finfo(torch.float32).min)
    hf_out, hf_w = eager_attention_forward(Dummy().eval(), q, k, v, additive[None, None], scaling=0.25)
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, scale=0.25, return_weights=True)
    torch.testing.assert_close(w, hf_w)
    torch.testing.assert_close(out.transpose(1, 2), hf_out)  # HF returns (B, T, H, D)


# --------------------------------------------------------------------------- fully masked rows
@pytest.mark.parametrize("fused", [False, True])
def test_fully_masked_rows_give_zero_not_nan(fused, device):
    q, k, v = _qkv(device=device)
    mask = torch.ones(2, 1, 5, 7, dtype=torch.bool, device=device)
    mask[0, 0, 2] = False  # batch 0, query 2 sees nothing
    mask[1, :, :, :] = padding_mask(torch.tensor([[1, 1, 1, 1, 1, 1, 1]]))[0].to(device)
    out = scaled_dot_product_attention(q, k, v, mask=mask, fused=fused)
    assert not out.isnan().any()
    assert (out[0, :, 2] == 0).all() and (out[0, :, 1] != 0).any()
    _, w = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    assert (w[0, :, 2] == 0).all()
    torch.testing.assert_close(w[0, :, 1].sum(-1), torch.ones(4, device=device))


def test_naive_softmax_of_fully_masked_row_is_nan():
    # the behaviour we guard against
    row = torch.full((4,), float("-inf"))
    assert torch.softmax(row, -1).isnan().all()


# --------------------------------------------------------------------------- soft-capping
def test_softcap_bounds_scores_and_matches_formula():
    q, k, v = _qkv(D=4)
    q = q * 20
    w = attention_weights(q, k, softcap=5.0)
    scores = torch.matmul(q, repeat_kv(k, 2).transpose(-1, -2)) * 0.5
    manual = torch.softmax(5.0 * torch.tanh(scores / 5.0), -1)
    torch.testing.assert_close(w, manual)
    # capped scores lie in (-5, 5) so no weight ratio can exceed e^10
    assert (w.max(-1).values / w.min(-1).values).max() < math.exp(10) + 1
    out = scaled_dot_product_attention(q, k, v, softcap=5.0)  # fused=None falls back to reference
    torch.testing.assert_close(out, torch.matmul(manual, repeat_kv(v, 2)))


# --------------------------------------------------------------------------- errors
def test_sdpa_input_errors():
    q, k, v = _qkv(H=4, G=3)
    with pytest.raises(ValueError, match=r"H \(4\) must be divisible by key/value heads G \(3\)"):
        scaled_dot_product_attention(q, k, v)
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"q must have at least 2 dimension\(s\)"):
        scaled_dot_product_attention(q[0, 0, 0], k, v)
    with pytest.raises(ValueError, match="must share batch B and head dim D"):
        scaled_dot_product_attention(q[..., :4], k, v)
    with pytest.raises(ValueError, match=r"must agree in \(B, G, S\)"):
        scaled_dot_product_attention(q, k, v[:, :, :3])
    with pytest.raises(TypeError, match="floating-point"):
        scaled_dot_product_attention(q.long(), k, v)
    with pytest.raises(TypeError, match=r"mask must be a bool tensor \(True = may attend\)"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(5, 7))
    with pytest.raises(ValueError, match="does not broadcast to the scores' shape"):
        scaled_dot_product_attention(q, k, v, mask=causal_mask(5))
    with pytest.raises(TypeError, match="bias must be a floating-point tensor"):
        scaled_dot_product_attention(q, k, v, bias=torch.ones(5, 7, dtype=torch.long))
    with pytest.raises(ValueError, match="fused=True cannot return weights"):
        scaled_dot_product_attention(q, k, v, fused=True, return_weights=True)
    with pytest.raises(ValueError, match="scale must be positive, got -1.0"):
        scaled_dot_product_attention(q, k, v, scale=-1.0)
    with pytest.raises(ValueError, match="softcap must be positive"):
        scaled_dot_product_attention(q, k, v, softcap=0.0)
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\)"):
        scaled_dot_product_attention(q, k, v, dropout_p=1.0)


def test_module_config_errors():
    with pytest.raises(ValueError, match=r"n_heads \(6\) must be divisible by n_kv_heads \(4\)"):
        MultiHeadAttention(48, 6, n_kv_heads=4)
    with pytest.raises(ValueError, match=r"d_model \(50\) must be divisible by n_heads \(4\), or pass head_dim"):
        MultiHeadAttention(50, 4)
    with pytest.raises(ValueError, match="qk_norm='batch' is not supported"):
        MultiHeadAttention(32, 4, qk_norm="batch")
    with pytest.raises(ValueError, match="sliding_window must be a positive int"):
        MultiHeadAttention(32, 4, sliding_window=0)
    with pytest.raises(TypeError, match="rope must be callable"):
        MultiHeadAttention(32, 4, rope=3)
    with pytest.raises(ValueError, match="either rope or alibi"):
        MultiHeadAttention(32, 4, rope=lambda q, k, p: (q, k), alibi=True)
    with pytest.raises(TypeError, match="unexpected keyword"):
        MultiHeadAttention(32, 4, flash=True)
    m = MultiHeadAttention(32, 4)
    with pytest.raises(ValueError, match="built for d_model=32"):
        m(torch.randn(1, 3, 16))
    with pytest.raises(ValueError, match="does not broadcast"):
        m(torch.randn(2, 3, 32), mask=torch.ones(2, 1, 1, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        m(torch.randn(2, 3, 32), mask=torch.ones(2, 1, 1, 3))


# --------------------------------------------------------------------------- module equivalences
def _pool_kv_like_gqa(mha: MultiHeadAttention, G: int) -> MultiHeadAttention:
    """An MHA whose kv heads inside each contiguous group are replaced by their mean."""
    out = copy.deepcopy(mha)
    H, D, C = mha.n_heads, mha.head_dim, mha.d_model
    with torch.no_grad():
        for name in ("k_proj", "v_proj"):
            w = getattr(out, name).weight.view(G, H // G, D, C)
            w.copy_(w.mean(dim=1, keepdim=True).expand_as(w))
    return out


@pytest.mark.parametrize("G", [1, 2, 4])
def test_gqa_equals_mha_with_shared_kv_heads(G, device):
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).to(device).eval()
    gqa = gqa_from_mha(mha, G)
    assert gqa.n_kv_heads == G and gqa.k_proj.weight.shape == (G * 8, 32)
    x = torch.randn(2, 6, 32, device=device)
    torch.testing.assert_close(gqa(x), _pool_kv_like_gqa(mha, G)(x), atol=1e-5, rtol=1e-5)
    if G == 4:  # GQA with g = h is MHA itself
        torch.testing.assert_close(gqa(x), mha(x))


def test_mqa_is_gqa_with_one_group():
    torch.manual_seed(0)
    mqa = MultiHeadAttention(32, 4, n_kv_heads=1).eval()
    assert mqa.n_rep == 4 and mqa.k_proj.weight.shape == (8, 32)
    big = MultiHeadAttention(32, 4).eval()
    big.load_state_dict({**mqa.state_dict(),
                         "k_proj.weight": mqa.k_proj.weight.repeat(4, 1),
                         "v_proj.weight": mqa.v_proj.weight.repeat(4, 1)})
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(mqa(x), big(x), atol=1e-5, rtol=1e-5)


def test_gqa_from_mha_errors():
    with pytest.raises(TypeError, match="must be a MultiHeadAttention"):
        gqa_from_mha(torch.nn.Linear(2, 2), 1)
    with pytest.raises(ValueError, match="must be plain multi-head"):
        gqa_from_mha(MultiHeadAttention(32, 4, n_kv_heads=2), 1)
    with pytest.raises(ValueError, match=r"n_heads \(4\) must be divisible by n_kv_heads \(3\)"):
        gqa_from_mha(MultiHeadAttention(32, 4), 3)


def test_explicit_head_dim_and_module_weights():
    m = MultiHeadAttention(30, 6, n_kv_heads=2, head_dim=16).eval()
    assert m.q_proj.weight.shape == (96, 30) and m.k_proj.weight.shape == (32, 30)
    assert m.o_proj.weight.shape == (30, 96)
    out, w = m(torch.randn(2, 5, 30), return_weights=True)
    assert out.shape == (2, 5, 30) and w.shape == (2, 6, 5, 5)
    assert (w.triu(1) == 0).all()


def test_module_weights_reproduce_output():
    torch.manual_seed(0)
    m = MultiHeadAttention(16, 2).eval()
    x = torch.randn(1, 4, 16)
    out, w = m(x, return_weights=True)
    v = m.v_proj(x).view(1, 4, 2, 8).transpose(1, 2)
    manual = m.o_proj((w @ v).transpose(1, 2).reshape(1, 4, 16))
    torch.testing.assert_close(out, manual)


def test_padding_mask_in_module_ignores_pad_tokens():
    torch.manual_seed(0)
    m = MultiHeadAttention(16, 2, causal=False).eval()
    x = torch.randn(1, 5, 16)
    junk = x.clone()
    junk[:, 3:] = 100.0
    pad = padding_mask(torch.tensor([[1, 1, 1, 0, 0]]))
    torch.testing.assert_close(m(x, mask=pad)[:, :3], m(junk, mask=pad)[:, :3])
    torch.testing.assert_close(m(x, mask=pad)[:, :3], m(x[:, :3]))


@pytest.mark.parametrize("qk_norm", ["rms", "layer"])
def test_qk_norm_bounds_query_norms(qk_norm):
    m = MultiHeadAttention(16, 2, qk_norm=qk_norm)
    assert {"q_norm.weight", "k_norm.weight"} <= set(m.state_dict())
    out = m(torch.randn(2, 4, 16) * 1000)
    assert torch.isfinite(out).all()


def test_dropout_only_in_training():
    m = MultiHeadAttention(16, 2, dropout=0.5)
    x = torch.randn(1, 6, 16)
    m.eval()
    torch.testing.assert_close(m(x), m(x))
    m.train()
    assert not torch.allclose(m(x), m(x))


# --------------------------------------------------------------------------- KV cache
class _ToyRope(torch.nn.Module):
    """Minimal rotate-half RoPE with the duck-typed signature ``rope(q, k, positions)``."""

    def forward(self, q, k, positions):
        D = q.shape[-1]
        inv = 1.0 / 10000 ** (torch.arange(0, D, 2, dtype=torch.float32, device=positions.device) / D)
        ang = positions.float()[..., None] * inv  # (T, D/2)
        cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)

        def rot(x):
            x1, x2 = x.chunk(2, -1)
            return x * cos + torch.cat([-x2, x1], -1) * sin

        return rot(q), rot(k)


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("extra", [{}, {"sliding_window": 3}, {"rope": "toy"}, {"softcap": 3.0, "qk_norm": "rms"}])
def test_kv_cache_decode_equals_full_forward(n_kv_heads, extra, device):
    torch.manual_seed(0)
    kwargs = dict(extra)
    if kwargs.get("rope") == "toy":
        kwargs["rope"] = _ToyRope()
    m = MultiHeadAttention(32, 4, n_kv_heads=n_kv_heads, **kwargs).to(device).eval()
    x = torch.randn(2, 9, 32, device=device)
    full = m(x)
    cache = KVCache()
    steps = [m(x[:, :4], cache=cache)]  # prefill 4 tokens
    for t in range(4, 9):  # then decode one at a time
        steps.append(m(x[:, t : t + 1], cache=cache))
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.length() == 9
    assert cache.nbytes() == 2 * 2 * n_kv_heads * 8 * 9 * 4


def test_kv_cache_bookkeeping_and_errors():
    c = KVCache()
    k = torch.zeros(1, 2, 3, 4)
    assert c.length() == 0 and len(c) == 0
    c.update(0, k, k)
    ka, _ = c.update(0, k, k)
    assert ka.shape == (1, 2, 6, 4) and c.length(0) == 6 and c.length(1) == 0
    with pytest.raises(ValueError, match="layer_idx 5 is out of order"):
        c.update(5, k, k)
    with pytest.raises(ValueError, match="does not match cached"):
        c.update(0, torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))
    with pytest.raises(ValueError, match=r"must agree in \(B, G, T\)"):
        c.update(1, k, torch.zeros(1, 2, 2, 4))
    c.reset()
    assert c.nbytes() == 0 and "layers=0" in repr(c)


def test_linear_state_slots_fill_in_order_like_keys():
    from llmviz.attention.deltanet import DeltaState

    c = KVCache()
    state = DeltaState(torch.zeros(1, 4, 3), torch.zeros(1, 2, 4, 4))
    c.set_linear_state(0, state, new_tokens=5)
    c.set_linear_state(0, state, new_tokens=2)  # the same layer again: its slot is replaced
    assert len(c) == 1 and c.length(0) == 7 and c.linear_state(0) is state
    with pytest.raises(ValueError, match=r"layer_idx 3 is out of order: the cache holds 1 layers, "
                                         r"so the next new layer must be 1"):
        c.set_linear_state(3, state, new_tokens=1)


def test_alibi_module_uses_position_package():
    alibi = pytest.importorskip("llmviz.position.alibi")
    m = MultiHeadAttention(32, 4, alibi=True).eval()
    x = torch.randn(1, 6, 32)
    _, w = m(x, return_weights=True)
    plain = copy.deepcopy(m)
    plain.alibi = False
    bias = alibi.alibi_bias(6, slopes=alibi.alibi_slopes(4))
    _, w2 = plain(x, score_bias=bias, return_weights=True)
    torch.testing.assert_close(w, w2)
    cache = KVCache()
    steps = [m(x[:, :3], cache=cache)] + [m(x[:, t : t + 1], cache=cache) for t in range(3, 6)]
    torch.testing.assert_close(torch.cat(steps, 1), m(x), atol=1e-5, rtol=1e-5)


def test_sliding_window_module_matches_explicit_mask():
    torch.manual_seed(0)
    m = MultiHeadAttention(16, 2, sliding_window=2).eval()
    x = torch.randn(1, 6, 16)
    _, w = m(x, return_weights=True)
    assert (w.masked_select(~sliding_window_mask(6, window=2).expand_as(w)) == 0).all()


def test_module_matches_hf_llama_attention(device):
    rope_mod = pytest.importorskip("llmviz.position.rotary")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (
        LlamaAttention,
        LlamaRotaryEmbedding,
    )

    cfg = LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=64, rope_theta=10000.0, attention_bias=False)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    hf = LlamaAttention(cfg, layer_idx=0).to(device).eval()
    ours = MultiHeadAttention(32, 4, n_kv_heads=2, rope=rope_mod.RotaryEmbedding(8)).to(device).eval()
    res = ours.load_state_dict(hf.state_dict(), strict=False)
    assert not res.unexpected_keys and all(k.startswith("rope.") for k in res.missing_keys)
    x = torch.randn(2, 7, 32, device=device)
    pos = torch.arange(7, device=device)[None].expand(2, 7)
    cos, sin = LlamaRotaryEmbedding(cfg).to(device)(x, pos)
    additive = torch.zeros(7, 7, device=device).masked_fill(~causal_mask(7, device=device), torch.finfo(torch.float32).min)
    hf_out, hf_w = hf(x, (cos, sin), additive[None, None])
    out, w = ours(x, return_weights=True)
    torch.testing.assert_close(w, hf_w, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(out, hf_out, atol=1e-5, rtol=1e-4)


def test_mha_scale_matches_functional_scale_and_rejects_bad_values():
    from llmviz.attention import MultiHeadAttention, scaled_dot_product_attention

    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, n_kv_heads=2, scale=144 ** -0.5)
    x = torch.randn(2, 5, 32)
    out, w = mha(x, return_weights=True)
    q = mha.q_proj(x).view(2, 5, 4, 8).transpose(1, 2)
    k = mha.k_proj(x).view(2, 5, 2, 8).transpose(1, 2)
    v = mha.v_proj(x).view(2, 5, 2, 8).transpose(1, 2)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    ref, ref_w = scaled_dot_product_attention(q, k, v, mask=mask, scale=144 ** -0.5, return_weights=True)
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(out, mha.o_proj(ref.transpose(1, 2).reshape(2, 5, 32)))
    default = MultiHeadAttention(32, 4, n_kv_heads=2)
    default.load_state_dict(mha.state_dict())
    assert not torch.allclose(default(x, return_weights=True)[1], w)  # the scale matters
    with pytest.raises(ValueError, match=r"scale must be positive, got -1"):
        MultiHeadAttention(32, 4, scale=-1)


def test_mha_qk_norm_uses_llmviz_norms():
    from llmviz.attention import MultiHeadAttention
    from llmviz.norm import LayerNorm, RMSNorm

    assert isinstance(MultiHeadAttention(32, 4, qk_norm="rms").q_norm, RMSNorm)
    assert isinstance(MultiHeadAttention(32, 4, qk_norm="layer").k_norm, LayerNorm)
