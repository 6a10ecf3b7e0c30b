"""scaled_dot_product_attention over any leading dims, checked against torch's own.

torch's ``F.scaled_dot_product_attention`` takes q ``(..., H, T, D)`` (3-D, 4-D, 5-D, 2-D),
broadcasts the leading dims, and shares key/value heads with ``enable_gqa=True``. Each case
runs both of llmviz's paths (reference and fused) and compares.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from llmviz.attention import attention_weights, scaled_dot_product_attention

SHAPES = {  # name: (q shape, k/v shape without the last dim)
    "2-D": ((5, 8), (7,)),
    "3-D": ((3, 5, 8), (3, 7)),
    "4-D": ((2, 3, 5, 8), (2, 3, 7)),
    "5-D": ((2, 4, 3, 5, 8), (2, 4, 3, 7)),
    "broadcast batch": ((2, 3, 5, 8), (1, 3, 7)),
}


def _qkv(qs, ks, dv=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*qs, generator=g)
    k = torch.randn(*ks, qs[-1], generator=g)
    v = torch.randn(*ks, dv, generator=g)
    return q, k, v


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("name", list(SHAPES))
def test_any_rank_matches_torch(name, fused):
    q, k, v = _qkv(*SHAPES[name])
    want = F.scaled_dot_product_attention(q, k, v)
    got = scaled_dot_product_attention(q, k, v, fused=fused)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("name", ["3-D", "4-D", "5-D"])
def test_masks_and_bias_match_torch(name, fused):
    q, k, v = _qkv(*SHAPES[name])
    T, S = q.shape[-2], k.shape[-2]
    g = torch.Generator().manual_seed(1)
    mask = torch.rand(*q.shape[:-2], T, S, generator=g) > 0.3
    mask[..., 0] = True  # every row keeps a key (torch gives NaN rows otherwise)
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v, mask=mask, fused=fused),
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5, rtol=1e-5)
    small = mask[(0,) * (mask.ndim - 2)]  # (T, S), broadcast over every leading dim
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v, mask=small, fused=fused),
        F.scaled_dot_product_attention(q, k, v, attn_mask=small), atol=1e-5, rtol=1e-5)
    bias = torch.randn(*q.shape[:-2], T, S, generator=g)
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v, bias=bias, fused=fused),
        F.scaled_dot_product_attention(q, k, v, attn_mask=bias), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("name", ["2-D", "3-D", "4-D", "5-D"])
def test_is_causal_matches_torch_for_square_scores(name, fused):
    qs, ks = SHAPES[name]
    q, k, v = _qkv(qs, (*ks[:-1], qs[-2]))  # S = T: both libraries align the same way
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v, is_causal=True, fused=fused),
        F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("lead", [(), (2,), (2, 3)], ids=["3-D", "4-D", "5-D"])
def test_gqa_matches_torch_enable_gqa(lead, fused):
    g = torch.Generator().manual_seed(2)
    q = torch.randn(*lead, 4, 5, 8, generator=g)
    k, v = torch.randn(*lead, 2, 7, 8, generator=g), torch.randn(*lead, 2, 7, 6, generator=g)
    want = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    for flag in (True, None):
        got = scaled_dot_product_attention(q, k, v, fused=fused, enable_gqa=flag)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"q has 4 heads but k and v have 2, and enable_gqa=False"):
        scaled_dot_product_attention(q, k, v, enable_gqa=False)


def test_weights_keep_the_leading_dims():
    q, k, v = _qkv(*SHAPES["5-D"])
    out, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    assert out.shape == (2, 4, 3, 5, 6) and w.shape == (2, 4, 3, 5, 7)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 3, 5))
    torch.testing.assert_close(attention_weights(q, k), w)
    torch.testing.assert_close(w @ v, out, atol=1e-5, rtol=1e-5)
    q2, k2, _ = _qkv(*SHAPES["2-D"])
    assert attention_weights(q2, k2).shape == (5, 7)


def test_leading_dim_errors_name_the_shapes():
    q, k, v = _qkv(*SHAPES["5-D"])
    with pytest.raises(ValueError, match=r"the leading dims of q \(2, 4, 3, 5, 8\), k \(3, 4, 3, 7, 8\)"):
        scaled_dot_product_attention(q, k.repeat(2, 1, 1, 1, 1)[:3], v)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 5, 7\) does not broadcast to the "
                       r"scores' shape \(B, H, T, S\) = \(2, 4, 3, 5, 7\)"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(2, 5, 7, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"q, k and v must share one dtype, got torch.float32, torch.float64"):
        scaled_dot_product_attention(q, k.double(), v)
    with pytest.raises(TypeError, match="enable_gqa must be True, False or None"):
        scaled_dot_product_attention(q, k, v, enable_gqa="yes")
