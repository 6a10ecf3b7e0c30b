"""Bad values refused whatever mode the call is in, with the message naming the value and fix.

A parameter read only in some mode (qk-norm, a KV cache, DeepNorm, linear-attention layers,
experts) is checked when given, whatever the mode; a switch given ``None`` (or ``0``/``1``) is
refused instead of being read as False. These checks only refuse, so the fingerprint of the
recorded runs (rule 2, ``llmviz.evidence.records._normalise``) does not see them.
"""

from __future__ import annotations

import math

import pytest
import torch

FLAG = r"{name} must be True or False, got NoneType None"


def _qkv(T=3):
    return torch.randn(1, 2, T, 4), torch.randn(1, 2, T, 4), torch.randn(1, 2, T, 4)


def _inactive_cases():
    from llmviz.attention import MultiHeadAttention
    from llmviz.model import ModelConfig, TransformerBlock

    mha = MultiHeadAttention(8, 2)
    block = TransformerBlock(8, 2, d_ff=16)
    x = torch.randn(1, 3, 8)
    return [
        ("MHA qk_norm_eps=nan without qk_norm", lambda: MultiHeadAttention(8, 2, qk_norm_eps=math.nan),
         ValueError, "qk_norm_eps must be finite, got nan"),
        ("MHA qk_norm_eps='x'", lambda: MultiHeadAttention(8, 2, qk_norm_eps="x"),
         TypeError, "qk_norm_eps must be a real number"),
        ("MHA.forward layer_idx=nan without a cache", lambda: mha(x, layer_idx=math.nan),
         TypeError, "layer_idx must be an int, got float nan"),
        ("MHA.forward layer_idx=-1", lambda: mha(x, layer_idx=-1),
         ValueError, r"layer_idx must be an int >= 0, got -1"),
        ("block qk_norm_eps=nan", lambda: TransformerBlock(8, 2, d_ff=16, qk_norm_eps=math.nan),
         ValueError, "qk_norm_eps must be finite, got nan"),
        ("block deepnorm_alpha=nan, placement pre", lambda: TransformerBlock(
            8, 2, d_ff=16, deepnorm_alpha=math.nan), ValueError, "deepnorm_alpha must be finite"),
        ("block deepnorm_alpha=0", lambda: TransformerBlock(8, 2, d_ff=16, deepnorm_alpha=0),
         ValueError, "deepnorm_alpha must be positive, got 0"),
        ("block linear_conv_kernel=0, attention mixer", lambda: TransformerBlock(
            8, 2, d_ff=16, linear_conv_kernel=0), ValueError,
         "linear_conv_kernel must be a positive int, got 0"),
        ("block.forward layer_idx='0'", lambda: block(x, layer_idx="0"),
         TypeError, "layer_idx must be an int, got str '0'"),
        ("config experts_top_k=nan, no experts", lambda: ModelConfig(experts_top_k=math.nan),
         TypeError, "experts_top_k must be an int, got float nan"),
        ("config n_shared_experts=-1, no experts", lambda: ModelConfig(n_shared_experts=-1),
         ValueError, "n_shared_experts must be a non-negative int, got -1"),
        ("config moe_scaling=nan", lambda: ModelConfig(moe_scaling=math.nan),
         ValueError, "moe_scaling must be finite, got nan"),
        ("config moe_bias_rate='x'", lambda: ModelConfig(moe_bias_rate="x"),
         TypeError, "moe_bias_rate must be a real number"),
        ("config expert_glu_alpha=nan", lambda: ModelConfig(expert_glu_alpha=math.nan),
         ValueError, "expert_glu_alpha must be finite, got nan"),
        ("config expert_glu_limit=-1", lambda: ModelConfig(expert_glu_limit=-1.0),
         ValueError, "expert_glu_limit must be positive, got -1.0"),
        ("train betas=None", lambda: _train(betas=None),
         TypeError, r"betas must be AdamW's two moment coefficients, e.g. \(0.9, 0.95\), got "
                    "NoneType None"),
        ("train betas=(0.9, 1.0)", lambda: _train(betas=(0.9, 1.0)),
         ValueError, r"betas must both lie in \[0, 1\) .*got \(0.9, 1.0\); e.g. \(0.9, 0.95\)"),
        ("train betas=(nan, 0.9)", lambda: _train(betas=(math.nan, 0.9)),
         ValueError, r"betas\[0\] must be finite, got nan"),
    ]


def _train(**kw):
    from llmviz.training import TrainConfig

    return TrainConfig(**kw)


def _flag_cases():
    """One call per function that now refuses a switch given None: (label, call, name)."""
    from llmviz import attention as A
    from llmviz import ffn, moe, norm
    from llmviz.attention import flash, linear, mask_kinds, masks, tiled
    from llmviz.model import DecoderLM, ModelConfig, TransformerBlock, generate
    from llmviz.position import alibi_bias
    from llmviz.position.relative import ShawRelativePosition, T5RelativeBias, t5_relative_bucket
    from llmviz.training.recall import multi_query_recall

    q, k, v = _qkv()
    tiny = ModelConfig(vocab_size=32, d_model=16, n_layers=1, n_heads=2, max_seq_len=16)
    torch.manual_seed(0)
    lm = DecoderLM(tiny).eval()
    ids = torch.randint(0, 32, (1, 4))
    shaw = ShawRelativePosition(4, max_distance=3)
    layer = moe.MoELayer(8, 4, 2, 16)
    return [
        ("flash_attention", lambda: flash.flash_attention(q, k, v, causal=None), "causal"),
        ("flash_forward", lambda: flash.flash_forward(q, k, v, causal=None), "causal"),
        ("packed_gqa_attention", lambda: flash.packed_gqa_attention(q, k, v, causal=None), "causal"),
        ("attention_weights", lambda: A.attention_weights(q, k, is_causal=None), "is_causal"),
        ("sdpa is_causal", lambda: A.scaled_dot_product_attention(q, k, v, is_causal=None), "is_causal"),
        ("sdpa return_weights", lambda: A.scaled_dot_product_attention(q, k, v, return_weights=None),
         "return_weights"),
        ("chunked_scan", lambda: linear.chunked_scan(q, k, v, delta=None), "delta"),
        ("recurrent_scan", lambda: linear.recurrent_scan(q, k, v, delta=None), "delta"),
        ("SlidingWindow", lambda: mask_kinds.SlidingWindow(4, causal=None), "causal"),
        ("GlobalTokens", lambda: mask_kinds.GlobalTokens(2, causal=None), "causal"),
        ("dilated_mask", lambda: masks.dilated_mask(4, window=2, dilation=2, causal=None), "causal"),
        ("sliding_window_mask", lambda: masks.sliding_window_mask(4, window=2, causal=None), "causal"),
        ("strided_mask", lambda: masks.strided_mask(4, stride=2, causal=None), "causal"),
        ("tile_map", lambda: tiled.tile_map(4, block_q=2, block_k=2, causal=None), "causal"),
        ("tiled_attention causal", lambda: tiled.tiled_attention(q, k, v, causal=None), "causal"),
        ("tiled_attention return_stats", lambda: tiled.tiled_attention(q, k, v, return_stats=None),
         "return_stats"),
        *[(f"MHA {n}", (lambda n=n: A.MultiHeadAttention(8, 2, **{n: None})), n)
          for n in ("bias", "alibi", "causal", "sinks", "output_gate")],
        ("MHA.forward", lambda: A.MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), return_weights=None),
         "return_weights"),
        ("Activation", lambda: ffn.Activation("gelu", fused=None), "fused"),
        ("GatedMLP", lambda: ffn.GatedMLP(8, 16, bias=None), "bias"),
        ("MLP", lambda: ffn.MLP(8, 16, bias=None), "bias"),
        ("Swish", lambda: ffn.Swish(learnable=None), "learnable"),
        ("activation", lambda: ffn.activation("swish", learnable=None), "learnable"),
        *[(f"ModelConfig {n}", (lambda n=n: ModelConfig(**{n: None})), n)
          for n in ("embed_norm", "parallel", "bias", "tie_embeddings", "embed_scale", "attn_sinks",
                    "attn_output_gate", "shared_expert_gate", "moe_normalize",
                    "moe_bias_balancing", "router_bias", "expert_bias")],
        ("TransformerBlock", lambda: TransformerBlock(8, 2, d_ff=16, parallel=None), "parallel"),
        ("generate", lambda: generate(lm, ids, max_new_tokens=1, use_cache=None), "use_cache"),
        ("DecoderLM.forward", lambda: lm(ids, return_weights=None), "return_weights"),
        ("Experts", lambda: moe.Experts(4, 8, 16, bias=None), "bias"),
        *[(f"MoELayer {n}", (lambda n=n: moe.MoELayer(8, 4, 2, 16, **{n: None})), n)
          for n in ("normalize", "bias_balancing", "shared_gate", "router_bias", "expert_bias")],
        ("MoELayer.forward", lambda: layer(torch.randn(1, 3, 8), return_info=None), "return_info"),
        *[(f"Router {n}", (lambda n=n: moe.Router(8, 4, 2, **{n: None})), n)
          for n in ("normalize", "bias_balancing", "logit_bias")],
        ("route", lambda: moe.route(torch.randn(3, 4), 2, normalize=None), "normalize"),
        ("LayerNorm bias", lambda: norm.LayerNorm(8, bias=None), "bias"),
        ("LayerNorm fused", lambda: norm.LayerNorm(8, fused=None), "fused"),
        ("RMSNorm unit_offset", lambda: norm.RMSNorm(8, unit_offset=None), "unit_offset"),
        ("RMSNorm fused", lambda: norm.RMSNorm(8, fused=None), "fused"),
        ("rms_norm", lambda: norm.rms_norm(torch.randn(2, 8), unit_offset=None), "unit_offset"),
        ("BatchNormSeq", lambda: norm.BatchNormSeq(8, affine=None), "affine"),
        ("GroupNormSeq", lambda: norm.GroupNormSeq(2, 8, affine=None), "affine"),
        ("InstanceNormSeq", lambda: norm.InstanceNormSeq(8, affine=None), "affine"),
        ("alibi_bias", lambda: alibi_bias(3, slopes=[0.5], causal=None), "causal"),
        ("Shaw values", lambda: ShawRelativePosition(4, max_distance=3, values=None), "values"),
        ("Shaw.forward", lambda: shaw(*[torch.randn(1, 2, 5, 4)] * 3, return_weights=None),
         "return_weights"),
        ("T5RelativeBias", lambda: T5RelativeBias(2, bidirectional=None), "bidirectional"),
        ("t5_relative_bucket", lambda: t5_relative_bucket(torch.arange(3), bidirectional=None),
         "bidirectional"),
        ("multi_query_recall", lambda: multi_query_recall(batch_size=2, n_pairs=2, replace=None),
         "replace"),
    ]


INACTIVE_CASES = _inactive_cases()
FLAG_CASES = _flag_cases()


@pytest.mark.parametrize(("label", "call", "error", "match"), INACTIVE_CASES,
                         ids=[c[0] for c in INACTIVE_CASES])
def test_a_value_read_only_in_another_mode_is_still_checked(label, call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(("label", "call", "name"), FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_a_switch_given_none_is_refused_naming_it(label, call, name):
    with pytest.raises(TypeError, match=FLAG.format(name=name)):
        call()


def test_check_flags_refuses_ints_and_names_each_switch():
    from llmviz._checks import check_flags

    check_flags(a=True, b=False)  # valid: returns quietly
    with pytest.raises(TypeError, match="b must be True or False, got int 1"):
        check_flags(a=True, b=1)


def test_the_valid_edge_of_each_new_check_still_works():
    from llmviz.attention import MultiHeadAttention
    from llmviz.model import ModelConfig, TransformerBlock
    from llmviz.training import TrainConfig

    assert ModelConfig(n_shared_experts=0, experts_top_k=1).n_shared_experts == 0
    assert TrainConfig(betas=[0.0, 0.999]).betas == [0.0, 0.999]
    x = torch.randn(1, 3, 8)
    out = MultiHeadAttention(8, 2, qk_norm_eps=1e-3)(x, layer_idx=0)
    assert out.shape == x.shape
    assert TransformerBlock(8, 2, d_ff=16, deepnorm_alpha=2.0)(x, layer_idx=0).shape == x.shape
