"""Latent attention without rotation against transformers' KimiLinearAttention; it ignores
positions (RoPE'd latent attention does not); NoRotation's checks."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.kv_cache import KVCache
from llmviz.attention.latent import LatentSlots, MultiHeadLatentAttention
from llmviz.attention.latent_nope import NoRotation


def _pair(q_lora_rank, bias):
    transformers = pytest.importorskip("transformers")
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearAttention

    cfg = transformers.KimiLinearConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                                        q_lora_rank=q_lora_rank, kv_lora_rank=12, qk_nope_head_dim=8,
                                        qk_rope_head_dim=4, v_head_dim=6, attention_bias=bias,
                                        num_hidden_layers=1, layer_types=["full_attention"],
                                        mlp_layer_types=["dense"])
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    hf = KimiLinearAttention(cfg, 0).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.3)
    ours = MultiHeadLatentAttention(32, 4, kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=4,
                                    v_head_dim=6, q_lora_rank=q_lora_rank, bias=bias)
    ours.rope = NoRotation()
    ours.load_state_dict(hf.state_dict())
    return hf, ours


@pytest.mark.parametrize("q_lora_rank,bias", [(None, False), (10, True)])
def test_matches_transformers_kimi_linear_attention(q_lora_rank, bias):
    hf, ours = _pair(q_lora_rank, bias)
    T = 7
    x = torch.randn(2, T, 32, generator=torch.Generator().manual_seed(1))
    causal = torch.full((T, T), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        ref, _ = hf(x, attention_mask=causal)
        torch.testing.assert_close(ours(x), ref, rtol=0, atol=1e-6)
        torch.testing.assert_close(ours(x, absorbed=True), ref, rtol=0, atol=1e-5)


def test_position_enters_through_nothing_but_the_mask():
    _, ours = _pair(None, False)
    x = torch.randn(1, 6, 32, generator=torch.Generator().manual_seed(2))
    rotated = MultiHeadLatentAttention(32, 4, kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=4,
                                       v_head_dim=6)
    rotated.load_state_dict(ours.state_dict())
    with torch.no_grad():
        shifted = torch.tensor([0, 5, 9, 20, 21, 40])  # not a constant shift: RoPE is relative
        torch.testing.assert_close(ours(x, positions=shifted), ours(x), rtol=0, atol=0)
        assert (rotated(x, positions=shifted) - rotated(x)).abs().max() > 1e-3
        cache = KVCache()  # decoding through the model's cache: the same as one call
        slots = LatentSlots(cache)
        steps = [ours(x[:, :3], cache=slots)] + [ours(x[:, t:t + 1], cache=slots) for t in range(3, 6)]
    torch.testing.assert_close(torch.cat(steps, 1), ours(x), rtol=0, atol=1e-6)


def test_no_rotation_returns_its_inputs_and_checks_them():
    rot = NoRotation()
    q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 1, 5, 8)
    q2, k2 = rot(q, k, torch.arange(5), seq_len=5)
    assert q2 is q and k2 is k
    with pytest.raises(ValueError, match="must hold the same tokens"):
        rot(q, k[:, :, :3])
    with pytest.raises(ValueError, match=r"positions must be integer \(T,\) or \(B, T\) with T = 5"):
        rot(q, k, torch.arange(4))
    with pytest.raises(TypeError, match="q must be a floating-point tensor"):
        rot(q.long(), k)
    with pytest.raises(ValueError, match="seq_len must be a positive int"):
        rot(q, k, seq_len=0)
