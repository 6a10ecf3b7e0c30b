"""Kimi Delta Attention against transformers' KimiLinearDeltaAttention (its PyTorch path), its
gate and output gate by formula, cached decoding, padding, its count and its errors."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.deltanet import DeltaState
from llmviz.attention.kda_layer import KimiDeltaAttention, kda_params
from llmviz.attention.kv_cache import KVCache

_HF_NAMES = {"conv.weight": "conv1d.weight", "f_a_proj.weight": "forget_gate.f_a_proj.weight",
             "f_b_proj.weight": "forget_gate.f_b_proj.weight", "dt_bias": "forget_gate.dt_bias",
             "A_log": "forget_gate.A_log", "norm_weight": "o_norm.weight"}


def _pair(C=32, H=4, D=8, K=4, eps=1e-5):
    """A seeded transformers KDA layer (norm and gate parameters moved off their init) and ours
    holding its tensors."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearDeltaAttention

    cfg = transformers.KimiLinearConfig(hidden_size=C, linear_num_heads=H, linear_head_dim=D,
                                        linear_conv_kernel_dim=K, rms_norm_eps=eps, num_hidden_layers=1,
                                        layer_types=["linear_attention"], mlp_layer_types=["dense"])
    torch.manual_seed(0)
    hf = KimiLinearDeltaAttention(cfg, 0).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.3)
        hf.forget_gate.A_log.copy_(torch.linspace(0.0, 2.7, H).view(1, 1, H, 1))  # rates 1 to 15
        hf.forget_gate.dt_bias.add_(-2.0)
        hf.o_norm.weight.add_(1.0)
    ours = KimiDeltaAttention(C, H, D, conv_kernel=K, eps=eps)
    sd = hf.state_dict()
    ours.load_state_dict({name: sd[_HF_NAMES.get(name, name)].reshape(p.shape)
                          for name, p in ours.state_dict().items()})
    return hf, ours


@pytest.mark.parametrize("T", [9, 70])  # one of transformers' 64-token chunks, and two
def test_matches_transformers_kimi_delta_attention(T):
    hf, ours = _pair()
    x = torch.randn(2, T, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref, got = hf(x), ours(x)
    assert ref.abs().max() > 0.1
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-6)


def test_padding_is_zeroed_as_transformers_does():
    hf, ours = _pair(K=3)
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(2))
    keep = torch.ones(2, 8, dtype=torch.long)
    keep[1, :3] = 0  # left padding
    with torch.no_grad():
        ref = hf(x, attention_mask=keep)
        got = ours(x, mask=keep.bool()[:, None, None, :])
        torch.testing.assert_close(got, ref, rtol=0, atol=1e-6)
        zeroed = ours(x * keep[..., None])
    torch.testing.assert_close(got, zeroed, rtol=0, atol=0)


def test_gates_follow_their_formulas():
    _, m = _pair()
    x = torch.randn(1, 5, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        step = (m.f_b_proj(m.f_a_proj(x)) + m.dt_bias).view(1, 5, 4, 8)
        want = -m.A_log.exp()[:, None] * torch.nn.functional.softplus(step)
        got = m.log_decay(x)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert got.shape == (1, 5, 4, 8) and (got < 0).all()
    assert (got[0, :, 0].std(-1) > 0).all()  # one gate per channel, not one per head


def test_cached_decoding_equals_the_full_forward():
    _, m = _pair()
    x = torch.randn(2, 12, 32, generator=torch.Generator().manual_seed(4))
    cache = KVCache()
    with torch.no_grad():
        full = m(x)
        steps = [m(x[:, :5], cache=cache)] + [m(x[:, t:t + 1], cache=cache) for t in range(5, 10)]
        steps.append(m(x[:, 10:], cache=cache))  # a two-token call continues in the chunked form
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-5)
    state = cache.linear_state(0)
    assert isinstance(state, DeltaState) and cache.length(0) == 12
    assert state.conv.shape == (2, 3 * 32, 3) and state.recurrent.shape == (2, 4, 8, 8)


def test_count_state_and_float64():
    m = KimiDeltaAttention(48, 3, 16, conv_kernel=2)
    assert kda_params(48, 3, 16, 2) == sum(p.numel() for p in m.parameters())
    s = m.new_state(2, dtype=torch.float64)
    assert s.conv.dtype == s.recurrent.dtype == torch.float64 and s.recurrent.shape == (2, 3, 16, 16)
    m64 = m.double()
    out, weights = m64(torch.randn(1, 4, 48, dtype=torch.float64), return_weights=True)
    assert out.dtype == torch.float64 and weights is None


def test_bad_input_is_refused():
    m = KimiDeltaAttention(16, 2, 8)
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match="built for d_model=16"):
        m(torch.randn(2, 5, 12))
    with pytest.raises(ValueError, match="no scores to add score_bias to"):
        m(x, score_bias=torch.zeros(2, 5, 5))
    with pytest.raises(ValueError, match=r"takes a key-padding mask \(B, 1, 1, S\)"):
        m(x, mask=torch.ones(5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        KimiDeltaAttention(16, 2, 8, chunk_size=0)
    with pytest.raises(ValueError, match="eps must be positive"):
        KimiDeltaAttention(16, 2, 8, eps=0.0)
    with pytest.raises(TypeError, match="head_dim must be an int"):
        KimiDeltaAttention(16, 2, 8.0)
    cache = KVCache()
    m(x, cache=cache)
    with pytest.raises(ValueError, match="not a KimiDeltaAttention state for a batch of 1"):
        m(x[:1], cache=cache)
