"""LFM2's gated short convolution against transformers' Lfm2ShortConv and against its formula,
its fixed decoding state, and its parameter count."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.kv_cache import KVCache
from llmviz.attention.short_conv import ShortConv, short_conv_params


def _conv(bias: bool = True, L: int = 3) -> ShortConv:
    torch.manual_seed(0)
    m = ShortConv(16, L, bias=bias)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.3)
    return m


@pytest.mark.parametrize("bias", [False, True])
def test_matches_transformers_lfm2_short_conv(bias):
    transformers = pytest.importorskip("transformers")
    from transformers.models.lfm2.modeling_lfm2 import Lfm2ShortConv

    cfg = transformers.Lfm2Config(hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                  conv_bias=bias, conv_L_cache=3, layer_types=["conv", "full_attention"])
    torch.manual_seed(0)
    hf = Lfm2ShortConv(cfg, 0).eval()
    ours = ShortConv(16, 3, bias=bias)
    ours.load_state_dict(hf.state_dict())
    x = torch.randn(2, 9, 16)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), hf(x), rtol=0, atol=1e-6)


def test_is_the_gated_causal_convolution():
    m = _conv(L=3)
    x = torch.randn(1, 6, 16)
    with torch.no_grad():
        b, c, v = m.in_proj(x).chunk(3, dim=-1)
        u = b * v  # (1, T, C)
        w = m.conv.weight[:, 0]  # (C, L): w[:, L-1] multiplies the current position
        conv = torch.stack([sum(w[:, 2 - j] * u[0, t - j] for j in range(3) if t - j >= 0) + m.conv.bias
                            for t in range(6)])[None]
        torch.testing.assert_close(m(x), m.out_proj(c * conv), rtol=0, atol=1e-5)
        y = m(x)
        x2 = x.clone()
        x2[:, 4] += 1.0  # position 4 reaches positions 4, 5 only (kernel 3, causal)
        changed = (m(x2) - y).abs().amax(-1)[0] > 0
    assert changed.tolist() == [False, False, False, False, True, True]


def test_cached_decoding_keeps_a_fixed_state():
    m = _conv()
    x = torch.randn(2, 10, 16)
    cache = KVCache()
    with torch.no_grad():
        steps = [m(x[:, :4], cache=cache)] + [m(x[:, t:t + 1], cache=cache) for t in range(4, 10)]
        torch.testing.assert_close(torch.cat(steps, 1), m(x), rtol=0, atol=1e-6)
    assert cache.linear_state(0).recurrent.shape == (2, 16, 2)  # L - 1 inputs per channel
    assert cache.length(0) == 10 and cache.nbytes() == 2 * 16 * 2 * 4


def test_parameter_count_and_padding():
    for bias in (False, True):
        assert short_conv_params(16, 3, bias) == sum(p.numel() for p in ShortConv(16, 3, bias=bias).parameters())
    m = _conv(bias=False)
    x = torch.randn(1, 5, 16)
    mask = torch.ones(1, 1, 1, 5, dtype=torch.bool)
    mask[..., :2] = False  # left padding: zeroed before the convolution
    with torch.no_grad():
        torch.testing.assert_close(m(x, mask=mask)[:, 2:], m(x[:, 2:]), rtol=0, atol=1e-6)
    out, weights = m(x, return_weights=True)
    assert weights is None and out.shape == x.shape


def test_errors_name_the_fix():
    m = _conv()
    with pytest.raises(ValueError, match="has no scores to add score_bias to"):
        m(torch.randn(1, 3, 16), score_bias=torch.zeros(1))
    with pytest.raises(ValueError, match=r"takes a key-padding mask \(B, 1, 1, S\), got \(1, 1, 3, 3\)"):
        m(torch.randn(1, 3, 16), mask=torch.ones(1, 1, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="width 8 but the convolution was built for d_model=16"):
        m(torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match="kernel_size"):
        ShortConv(16, 0)
