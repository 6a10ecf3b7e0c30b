"""Multi-head latent attention: absorbed = naive, the latent cache, HF DeepseekV3Attention parity,
cache sizes, bad input."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.attention import KVCache, LatentCache, MultiHeadLatentAttention
from llmviz.attention.masks import padding_mask

DIMS = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6)


def _mla(q_lora_rank=None, **kw) -> MultiHeadLatentAttention:
    args = dict(DIMS, q_lora_rank=q_lora_rank)
    args.update(kw)
    return MultiHeadLatentAttention(32, 4, **args).double()


@settings(max_examples=20, deadline=None)
@given(q_lora=st.sampled_from([None, 12]), T=st.integers(1, 9), B=st.integers(1, 3),
       layout=st.sampled_from(["interleaved", "half"]), seed=st.integers(0, 10_000))
def test_absorbed_equals_naive(q_lora, T, B, layout, seed):
    torch.manual_seed(seed)
    m = _mla(q_lora, rope_layout=layout)
    x = torch.randn(B, T, 32, dtype=torch.float64)
    with torch.no_grad():
        a, wa = m(x, return_weights=True)
        b, wb = m(x, absorbed=True, return_weights=True)
    torch.testing.assert_close(b, a)
    torch.testing.assert_close(wb, wa)


def test_absorbed_equals_naive_gradients(gen):
    m = _mla(12)
    x = torch.randn(2, 5, 32, dtype=torch.float64, generator=gen)
    g1 = torch.autograd.grad(m(x).pow(2).sum(), list(m.parameters()))
    g2 = torch.autograd.grad(m(x, absorbed=True).pow(2).sum(), list(m.parameters()))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(b, a)


@pytest.mark.parametrize("absorbed", [False, True])
def test_cached_decoding_equals_full_pass(absorbed, gen):
    m = _mla(12)
    x = torch.randn(2, 10, 32, dtype=torch.float64, generator=gen)
    with torch.no_grad():
        full = m(x)
        cache = LatentCache()
        steps = [m(x[:, :6], cache=cache, absorbed=absorbed)]  # prefill
        steps.append(m(x[:, 6:8], cache=cache, absorbed=absorbed))  # a chunk (T < S)
        for t in range(8, 10):  # one token at a time
            steps.append(m(x[:, t:t + 1], cache=cache, absorbed=absorbed))
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert cache.length() == 10
    assert cache.latents[0].shape == (2, 10, 16) and cache.rope_keys[0].shape == (2, 10, 4)
    assert cache.nbytes() == 2 * 10 * (16 + 4) * 8


def test_mask_is_honoured_in_both_forms(gen):
    m = _mla()
    x = torch.randn(2, 6, 32, dtype=torch.float64, generator=gen)
    keep = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]])
    mask = padding_mask(keep)
    with torch.no_grad():
        a = m(x, mask=mask)
        b = m(x, mask=mask, absorbed=True)
        ref = m(x[1:, 2:])  # the padded sequence without its padding
    torch.testing.assert_close(b, a)
    torch.testing.assert_close(a[1, 2:], ref[0])


def test_cache_bytes_per_token():
    m = MultiHeadLatentAttention(64, 8, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                 v_head_dim=16)
    got = m.cache_bytes_per_token()
    assert got == {"latent": (32 + 8) * 4, "expanded": 8 * (16 + 8 + 16) * 4}
    # DeepSeek-V3's sizes: 576 numbers per token against 128 * (192 + 128) = 40960
    big = MultiHeadLatentAttention(64, 128, kv_lora_rank=512, qk_nope_head_dim=128,
                                   qk_rope_head_dim=64, v_head_dim=128)
    sizes = big.cache_bytes_per_token(torch.bfloat16)
    assert sizes == {"latent": 576 * 2, "expanded": 40960 * 2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dtypes_and_devices(dtype, device):
    m = MultiHeadLatentAttention(32, 4, q_lora_rank=12, **DIMS).to(device=device, dtype=dtype)
    x = torch.randn(2, 5, 32, device=device, dtype=dtype)
    for absorbed in (False, True):
        out = m(x, absorbed=absorbed)
        assert out.shape == x.shape and out.dtype == dtype and out.device.type == device.type


# ----------------------------------------------------------------------------- HF parity
transformers = pytest.importorskip("transformers")


def _hf_attention(q_lora_rank, interleave: bool, bias: bool = False, rope_parameters=None):
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3Attention,
        DeepseekV3Config,
        DeepseekV3RotaryEmbedding,
    )

    cfg = DeepseekV3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                           q_lora_rank=q_lora_rank, rope_interleave=interleave,
                           attention_bias=bias, attn_implementation="eager",
                           rope_parameters=rope_parameters, max_position_embeddings=256, **DIMS)
    torch.manual_seed(5)
    attn = DeepseekV3Attention(cfg, layer_idx=0).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return cfg, attn, DeepseekV3RotaryEmbedding(cfg)


@pytest.mark.parametrize("q_lora_rank", [None, 12])
@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("absorbed", [False, True])
def test_matches_hf_deepseek_v3_attention(q_lora_rank, interleave, absorbed, gen):
    cfg, hf, rotary = _hf_attention(q_lora_rank, interleave, bias=q_lora_rank is None)
    ours = MultiHeadLatentAttention(
        32, 4, q_lora_rank=q_lora_rank, rope_layout="interleaved" if interleave else "half",
        rope_base=cfg.rope_parameters["rope_theta"], bias=q_lora_rank is None, **DIMS)
    ours.load_state_dict(hf.state_dict())  # same names, strict
    B, T = 2, 7
    x = torch.randn(B, T, 32, generator=gen)
    pos = torch.arange(T)[None].expand(B, T)
    causal = torch.full((T, T), float("-inf")).triu(1)[None, None].expand(B, 1, T, T)
    with torch.no_grad():
        want, _ = hf(x, position_embeddings=rotary(x, pos), attention_mask=causal)
        got = ours(x, absorbed=absorbed)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_matches_hf_with_deepseek_yarn(gen):
    """DeepSeek-V3's YaRN: scaled frequencies, cos/sin factor, and the mscale_all_dim score scale."""
    from llmviz.position import RopeScaling

    params = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0,
              "original_max_position_embeddings": 32, "mscale": 0.707, "mscale_all_dim": 0.707,
              "beta_fast": 32, "beta_slow": 1}
    cfg, hf, rotary = _hf_attention(12, True, rope_parameters=params)
    scaling = RopeScaling.from_hf(cfg)
    ours = MultiHeadLatentAttention(32, 4, q_lora_rank=12, rope_scaling=scaling, **DIMS)
    ours.load_state_dict(hf.state_dict())
    assert ours.scale == pytest.approx(hf.scaling) and ours.scale != pytest.approx(12**-0.5)
    B, T = 1, 40
    x = torch.randn(B, T, 32, generator=gen)
    pos = torch.arange(T)[None]
    causal = torch.full((T, T), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        want, _ = hf(x, position_embeddings=rotary(x, pos), attention_mask=causal)
        for absorbed in (False, True):
            torch.testing.assert_close(ours(x, absorbed=absorbed), want, rtol=1e-5, atol=1e-5)


def test_latent_cache_holds_what_hf_caches(gen):
    """HF caches the normalised latent and the rotated rope key (its interleaved rotation
    writes the rope features de-interleaved: same numbers, pair order permuted)."""
    from transformers.cache_utils import DynamicCache

    from llmviz.position.rope import interleaved_to_half_permutation

    cfg, hf, rotary = _hf_attention(12, True)
    ours = MultiHeadLatentAttention(32, 4, q_lora_rank=12, **DIMS)
    ours.load_state_dict(hf.state_dict())
    x = torch.randn(1, 5, 32, generator=gen)
    pos = torch.arange(5)[None]
    causal = torch.full((5, 5), float("-inf")).triu(1)[None, None]
    hf_cache, cache = DynamicCache(config=cfg), LatentCache()
    with torch.no_grad():
        hf(x, position_embeddings=rotary(x, pos), attention_mask=causal, past_key_values=hf_cache)
        ours(x, cache=cache)
    hf_latent, hf_rope = hf_cache.layers[0].keys, hf_cache.layers[0].values  # (1, 1, 5, r), (1, 1, 5, dr)
    torch.testing.assert_close(cache.latents[0], hf_latent[:, 0])
    perm = interleaved_to_half_permutation(4)
    torch.testing.assert_close(cache.rope_keys[0][..., perm], hf_rope[:, 0])


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(qk_rope_head_dim=3), ValueError, "qk_rope_head_dim must be even"),
        (dict(qk_rope_head_dim=0), ValueError, "qk_rope_head_dim must be a positive int"),
        (dict(kv_lora_rank=0), ValueError, "kv_lora_rank must be a positive int"),
        (dict(v_head_dim=2.0), TypeError, "v_head_dim must be an int"),
        (dict(q_lora_rank=-4), ValueError, "q_lora_rank must be a positive int"),
        (dict(rope_layout="gptj"), ValueError, "rope_layout='gptj' is not supported"),
        (dict(scale=0.0), ValueError, "scale must be positive"),
    ],
)
def test_constructor_errors(kwargs, err, match):
    args = dict(DIMS)
    args.update(kwargs)
    with pytest.raises(err, match=match):
        MultiHeadLatentAttention(32, 4, **args)


def test_forward_errors():
    m = MultiHeadLatentAttention(32, 4, **DIMS)
    with pytest.raises(ValueError, match=r"MultiHeadLatentAttention was built for d_model=32, but x has shape \(.*\) \(width 16\)"):
        m(torch.randn(1, 3, 16))
    with pytest.raises(ValueError, match="x must have 3 dimensions"):
        m(torch.randn(3, 32))
    with pytest.raises(TypeError, match="cache must be a LatentCache"):
        m(torch.randn(1, 3, 32), cache=KVCache())
    with pytest.raises(TypeError, match="float64"):
        m(torch.randn(1, 3, 32, dtype=torch.float64))
    cache = LatentCache()
    m(torch.randn(1, 3, 32), cache=cache)
    with pytest.raises(ValueError, match="does not match the cached"):
        m(torch.randn(2, 1, 32), cache=cache)
    with pytest.raises(ValueError, match="out of order"):
        cache.update(3, torch.zeros(1, 1, 16), torch.zeros(1, 1, 4))


@pytest.mark.parametrize("q_lora", [None, 12])
def test_folded_weights_give_the_same_layer(q_lora, gen):
    """W_uk folded into the query projection and W_uv into o_proj, once, on the weights."""
    from llmviz.attention import scaled_dot_product_attention

    m = _mla(q_lora, bias=True)
    B, T, H, r = 2, 6, 4, DIMS["kv_lora_rank"]
    x = torch.randn(B, T, 32, dtype=torch.float64, generator=gen)
    w_q_lat, w_o_lat = m.folded_projections()
    assert w_q_lat.shape == (H * r, 32 if q_lora is None else q_lora) and w_o_lat.shape == (32, H * r)
    with torch.no_grad():
        q_in = x if q_lora is None else m.q_a_layernorm(m.q_a_proj(x))
        q_lat = (q_in @ w_q_lat.T).view(B, T, H, r).transpose(1, 2)  # (B, H, T, r)
        _, q_rope = m.queries(x)
        c, k_rope = m.latents(x)
        q_rope, k_rope = m.rope(q_rope, k_rope, torch.arange(T))
        q = torch.cat((q_lat, q_rope), -1)
        k = torch.cat((c[:, None], k_rope), -1)  # (B, 1, T, r+dr)
        o_lat = scaled_dot_product_attention(q, k, c[:, None], scale=m.scale, is_causal=True)
        out = o_lat.transpose(1, 2).reshape(B, T, H * r) @ w_o_lat.T + m.o_proj.bias
        torch.testing.assert_close(out, m(x))
