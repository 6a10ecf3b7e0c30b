"""Gemma 4's attention (value norm, values from keys, keys and values shared by later layers)
against transformers' Gemma4TextAttention, and the checks of SharedKVAttention and KVShare."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.mask_kinds import SlidingWindow
from llmviz.attention.shared_kv import KVShare, SharedKVAttention, head_rms
from llmviz.norm import NormSpec
from llmviz.position.rotary import RotaryEmbedding

transformers = pytest.importorskip("transformers")
from transformers.models.gemma4 import modeling_gemma4 as g4  # noqa: E402

C, H, G, D, T = 32, 4, 2, 8, 7


def _pair(role=None, k_eq_v=False, window=None):
    """A transformers Gemma4TextAttention (layer 1 of two full or sliding layers) and ours."""
    kind = "sliding_attention" if window else "full_attention"
    cfg = transformers.Gemma4TextConfig(
        hidden_size=C, num_attention_heads=H, num_key_value_heads=G, head_dim=D, global_head_dim=D,
        num_hidden_layers=2, layer_types=[kind, "full_attention"] if window else [kind] * 2,
        sliding_window=window or 4, num_kv_shared_layers=1 if role else 0, attention_k_eq_v=k_eq_v,
        hidden_size_per_layer_input=0, rope_parameters={t: {"rope_type": "default", "rope_theta": 100.0}
                                                        for t in ("full_attention", "sliding_attention")})
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    hf = g4.Gemma4TextAttention(cfg, 1 if role == "reuse" else 0)
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.5)
    share = KVShare() if role else None
    ours = SharedKVAttention(C, H, n_kv_heads=G, head_dim=D, rope=RotaryEmbedding(D, base=100.0),
                             qk_norm=NormSpec("rms", 1e-6), scale=1.0, value_norm_eps=1e-6,
                             values_from_keys=k_eq_v and not window, share=share, role=role,
                             share_key=kind, layer_mask=SlidingWindow(window) if window else None)
    ours.load_state_dict(hf.state_dict(), strict=True)
    return cfg, hf, ours, share


def _hf_forward(cfg, hf, x, shared, kind="full_attention"):
    pos = torch.arange(x.shape[1])[None]
    cos, sin = g4.Gemma4TextRotaryEmbedding(cfg)(x, pos, kind)
    mask = torch.full((T, T), float("-inf")).triu(1)
    if hf.sliding_window:
        mask = mask.masked_fill(torch.ones(T, T, dtype=torch.bool).tril(-hf.sliding_window), float("-inf"))
    with torch.no_grad():
        return hf(x, (cos, sin), mask[None, None], shared)[0]


@pytest.mark.parametrize("k_eq_v,window", [(False, None), (True, None), (False, 3)], ids=["plain", "k_eq_v", "sliding"])
def test_matches_gemma4_attention(k_eq_v, window):
    cfg, hf, ours, _ = _pair(k_eq_v=k_eq_v, window=window)
    x = torch.randn(2, T, C)
    ref = _hf_forward(cfg, hf, x, {}, "sliding_attention" if window else "full_attention")
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref, rtol=0, atol=2e-6)
    assert (ours.v_proj is None) == k_eq_v


def test_store_and_reuse_match_gemma4_kv_sharing():
    cfg, hf_store, store, share = _pair(role="store")
    _, hf_reuse, reuse, _ = _pair(role="reuse")
    reuse.share = share
    assert reuse.k_proj is None and reuse.v_proj is None and reuse.k_norm is None and reuse.reuses_kv
    x, y = torch.randn(2, T, C), torch.randn(2, T, C)
    shared = {}
    _hf_forward(cfg, hf_store, x, shared)
    ref = _hf_forward(cfg, hf_reuse, y, shared)
    with torch.no_grad():
        store(x)
        torch.testing.assert_close(reuse(y), ref, rtol=0, atol=2e-6)
        # with a cache: the reusing layer caches nothing and decodes to the same outputs
        from llmviz.attention.kv_cache import KVCache

        cache = KVCache()
        steps = []
        for t in range(T):
            store(x[:, t:t + 1], cache=cache, layer_idx=0, positions=torch.tensor([t]))
            steps.append(reuse(y[:, t:t + 1], cache=cache, layer_idx=1, positions=torch.tensor([t])))
        assert len(cache) == 1
        torch.testing.assert_close(torch.cat(steps, 1), ref, rtol=0, atol=2e-6)


def test_value_norm_is_weightless_rms():
    v = torch.randn(3, 5, 8) * 4
    torch.testing.assert_close(head_rms(v, 1e-6), g4.Gemma4RMSNorm(8, 1e-6, with_scale=False)(v))
    torch.testing.assert_close(head_rms(v, 1e-6).pow(2).mean(-1), torch.ones(3, 5), rtol=0, atol=1e-4)


def test_bad_input():
    with pytest.raises(ValueError, match="role=.borrow. is not supported; choose one of"):
        SharedKVAttention(C, H, role="borrow")
    with pytest.raises(TypeError, match="role='reuse' needs share="):
        SharedKVAttention(C, H, role="reuse")
    with pytest.raises(ValueError, match="value_norm_eps"):
        SharedKVAttention(C, H, value_norm_eps=0.0)
    with pytest.raises(ValueError, match="only qk_norm_scope='head'"):
        SharedKVAttention(C, H, qk_norm="rms", qk_norm_scope="all")
    with pytest.raises(TypeError, match="head_rms takes a floating tensor"):
        head_rms(torch.ones(3, dtype=torch.long), 1e-6)
    share = KVShare()
    reuse = SharedKVAttention(C, H, share=share, role="reuse", share_key="full")
    with pytest.raises(ValueError, match="no layer has stored keys and values under 'full'"):
        reuse(torch.randn(1, 3, C))
    share.put("full", torch.randn(2, H, 3, C // H), torch.randn(2, H, 3, C // H))
    with pytest.raises(ValueError, match="does not cover a batch of 1"):
        reuse(torch.randn(1, 3, C))
    with pytest.raises(TypeError, match="key must be a str"):
        share.put(3, torch.ones(1), torch.ones(1))
