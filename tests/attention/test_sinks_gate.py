"""Learned attention sinks (gpt-oss) and the attention output gate (Qwen3-Next)."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention import MultiHeadAttention, attention_weights, scaled_dot_product_attention
from llmviz.position.rope import apply_rotary


def _qkv(seed=0, B=2, H=4, G=2, T=7, D=8, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, T, D, generator=g, dtype=dtype),
            torch.randn(B, G, T, D, generator=g, dtype=dtype),
            torch.randn(B, G, T, D, generator=g, dtype=dtype))


def test_a_sink_takes_exactly_its_softmax_share():
    q, k, v = _qkv()
    sinks = torch.tensor([-1.0, 0.0, 2.0, 5.0], dtype=torch.float64)
    plain = attention_weights(q, k, is_causal=True)
    sunk = attention_weights(q, k, is_causal=True, sinks=sinks)
    # Same scores, one more softmax column: the kept weights are the plain ones times Z/(Z+e^s)
    scores = (q @ k.repeat_interleave(2, 1).transpose(-1, -2)) * 8 ** -0.5
    scores = scores.masked_fill(~torch.ones(7, 7, dtype=torch.bool).tril(), float("-inf"))
    z = scores.exp().sum(-1, keepdim=True)
    share = 1 - z / (z + sinks.exp().view(1, 4, 1, 1))
    torch.testing.assert_close(sunk, plain * (1 - share))
    torch.testing.assert_close(1 - sunk.sum(-1, keepdim=True), share)
    assert bool((share[:, 3] > share[:, 0]).all())  # a larger sink logit absorbs more


def test_sinks_run_the_reference_path_and_blocked_rows_stay_zero():
    q, k, v = _qkv()
    sinks = torch.zeros(4, dtype=torch.float64)
    out, w = scaled_dot_product_attention(q, k, v, is_causal=True, sinks=sinks, return_weights=True)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, is_causal=True, sinks=sinks))
    mask = torch.ones(7, 7, dtype=torch.bool)
    mask[3] = False  # query 3 may attend to nothing: all its mass goes to the sink
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, sinks=sinks, return_weights=True)
    assert not torch.isnan(out).any()
    assert bool((w[:, :, 3] == 0).all()) and bool((out[:, :, 3] == 0).all())
    with pytest.raises(ValueError, match=r"fused=True cannot return weights, apply softcap or add sinks"):
        scaled_dot_product_attention(q, k, v, sinks=sinks, fused=True)
    with pytest.raises(ValueError, match=r"sinks must hold one logit per query head, shape \(4,\); got \(2,\)"):
        attention_weights(q, k, sinks=torch.zeros(2, dtype=torch.float64))


def test_output_gate_scales_each_feature_before_o_proj():
    torch.manual_seed(0)
    plain = MultiHeadAttention(16, 4).double()
    gated = MultiHeadAttention(16, 4, output_gate=True).double()
    gated.load_state_dict({**plain.state_dict(), "gate_proj.weight": gated.gate_proj.weight}, strict=True)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    with torch.no_grad():
        gated.gate_proj.weight.zero_()  # sigmoid(0) = 1/2 everywhere: half the plain output
        torch.testing.assert_close(gated(x), plain(x) / 2)  # o_proj has no bias: linear


def _hf_attention(kind):
    tr = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "gpt_oss":
        from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention, GptOssRotaryEmbedding
        cfg = tr.GptOssConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                              num_hidden_layers=1, layer_types=["full_attention"], vocab_size=16,
                              intermediate_size=16, num_local_experts=2, attention_bias=True)
        layer, rot = GptOssAttention(cfg, 0), GptOssRotaryEmbedding(cfg)
        with torch.no_grad():
            layer.sinks.normal_()
    else:
        from transformers.models.qwen3_next.modeling_qwen3_next import (
            Qwen3NextAttention,
            Qwen3NextRotaryEmbedding,
        )
        cfg = tr.Qwen3NextConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                 num_hidden_layers=1, layer_types=["full_attention"], vocab_size=16,
                                 intermediate_size=16, partial_rotary_factor=1.0)
        layer, rot = Qwen3NextAttention(cfg, 0), Qwen3NextRotaryEmbedding(cfg)
    cfg._attn_implementation = "eager"
    return layer.eval(), rot


@pytest.mark.parametrize("kind", ["gpt_oss", "qwen3_next"])
def test_matches_hugging_face_attention(kind):
    hf, rot = _hf_attention(kind)
    H, G, D, C = 4, 2, 8, 32
    ours = MultiHeadAttention(C, H, n_kv_heads=G, head_dim=D, bias=kind == "gpt_oss",
                              sinks=kind == "gpt_oss", output_gate=kind == "qwen3_next",
                              qk_norm="rms_gemma" if kind == "qwen3_next" else None,
                              qk_norm_eps=1e-6)
    sd = {k: v for k, v in hf.state_dict().items()}
    if kind == "qwen3_next":  # q_proj rows are [q_h, gate_h] per head
        w = sd.pop("q_proj.weight").view(H, 2 * D, C)
        sd["q_proj.weight"], sd["gate_proj.weight"] = w[:, :D].reshape(H * D, C), w[:, D:].reshape(H * D, C)
    ours.load_state_dict(sd, strict=True)
    ours.double(), hf.double()
    with torch.no_grad():  # non-default norm gains, so a misplaced one shows
        for name, prm in ours.named_parameters():
            if "norm" in name:
                prm.uniform_(-0.5, 0.5)
        hf.load_state_dict({k: v for k, v in ours.state_dict().items() if "norm" in k}, strict=False)
    x = torch.randn(2, 9, C, dtype=torch.float64)
    pos = torch.arange(9)[None].expand(2, -1)
    cos, sin = rot(x, pos)
    ref_cos_sin = (cos, sin)
    if cos.shape[-1] == D // 2:  # gpt-oss keeps one angle per pair; the half layout repeats them
        cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    mask = torch.full((9, 9), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    ref = hf(x, position_embeddings=ref_cos_sin, attention_mask=mask)[0]
    ours.rope = lambda q, k, p: (apply_rotary(q, cos, sin), apply_rotary(k, cos, sin))  # HF's angles
    tol = 1e-9 if kind == "gpt_oss" else 1e-6  # Qwen3-Next's q/k norms run in float32 even here
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref, rtol=tol, atol=tol)
