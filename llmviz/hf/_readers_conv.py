"""Family readers for :func:`llmviz.hf.config_from_hf`: hybrids whose non-attention layers are
gated short convolutions (LFM2, ``lfm2``).

LFM2's ``layer_types`` mark each layer ``"conv"`` or ``"full_attention"``. The config read here
describes the attention layers (Llama's grouped attention with Qwen 3's per-head RMS QK-norm,
SwiGLU feed-forwards of the width ``block_auto_adjust_ff_dim`` gives); the built model's
``"conv"`` layers then hold a :class:`~llmviz.attention.short_conv.ShortConv` in the token-mixer
slot (the layout's ``adapt``), so loading and anatomy both see it.
"""

from __future__ import annotations

from typing import Any

import torch

from ..attention.short_conv import ShortConv
from ._layout import stores
from ._readers import attr
from .rope import rope_parameters_of, rope_spec

__all__ = ["READERS_CONV", "conv_layers", "lfm2"]


def conv_layers(c: Any) -> tuple[int, ...]:
    """The layers ``layer_types`` marks ``"conv"`` (checked: one entry per layer, two kinds)."""
    types = list(attr(c, "layer_types", ["full_attention"] * c.num_hidden_layers))
    if len(types) != c.num_hidden_layers:
        raise ValueError(f"{c.model_type}: layer_types has {len(types)} entries for {c.num_hidden_layers} layers")
    unknown = sorted(set(types) - {"conv", "full_attention"})
    if unknown:
        raise NotImplementedError(f"{c.model_type}: layer types {unknown} are not supported "
                                  "(llmviz reads 'conv' and 'full_attention')")
    return tuple(i for i, t in enumerate(types) if t == "conv")


def _lfm2_ff(c: Any) -> int:
    """The feed-forward width ``Lfm2MLP`` builds from ``intermediate_size``."""
    width = c.intermediate_size
    if attr(c, "block_auto_adjust_ff_dim", False):
        width = int(2 * width / 3)
        if c.block_ffn_dim_multiplier is not None:
            width = int(c.block_ffn_dim_multiplier * width)
            m = c.block_multiple_of
            width = m * ((width + m - 1) // m)
    return width


def _short_convs(model: Any, c: Any) -> Any:
    """The ``"conv"`` layers' token mixer becomes a :class:`ShortConv`."""
    for i in conv_layers(c):
        block = model.layers[i]
        with torch.device(block.attn_norm.weight.device):
            block.self_attn = ShortConv(c.hidden_size, int(c.conv_L_cache), bias=bool(c.conv_bias))
    return model


@stores(adapt=_short_convs, norms={"operator_norm": "attn_norm", "ffn_norm": "ffn_norm"},
        top={"norm.weight": "embedding_norm.weight"},
        renames={"self_attn.o_proj": "self_attn.out_proj", "self_attn.q_norm": "self_attn.q_layernorm",
                 "self_attn.k_norm": "self_attn.k_layernorm", "mlp.gate_proj": "feed_forward.w1",
                 "mlp.up_proj": "feed_forward.w3", "mlp.down_proj": "feed_forward.w2",
                 "self_attn.in_proj": "conv.in_proj", "self_attn.conv": "conv.conv",
                 "self_attn.out_proj": "conv.out_proj"})
def lfm2(c: Any) -> dict[str, Any]:
    """LFM2: pre-norm RMSNorm blocks (``norm_eps``; the final norm is stored as
    ``embedding_norm``), bias-free grouped attention with per-head RMS QK-norm before RoPE,
    SwiGLU feed-forwards, and gated short convolutions (kernel ``conv_L_cache``, biases from
    ``conv_bias``) in the ``"conv"`` layers."""
    conv_layers(c)
    H = c.num_attention_heads
    head_dim = c.hidden_size // H
    rope = rope_spec(rope_parameters_of(c), head_dim=head_dim, max_position_embeddings=c.max_position_embeddings,
                     where="lfm2 rope_parameters")
    eps = float(c.norm_eps)
    return dict(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_layers=c.num_hidden_layers, n_heads=H,
        n_kv_heads=attr(c, "num_key_value_heads", H), head_dim=head_dim, d_ff=_lfm2_ff(c),
        max_seq_len=c.max_position_embeddings, position="rope", rope_base=rope.base,
        rope_scaling=rope.scaling, rotary_dim=rope.rotary_dim, rope_layout="half", norm="rms",
        norm_eps=eps, placement="pre", ffn="swiglu", activation="silu", bias=False,
        tie_embeddings=bool(getattr(c, "tie_word_embeddings", True)), qk_norm="rms",
        qk_norm_eps=eps, qk_norm_scope="head",
    )


#: model_type -> reader, for the families above.
READERS_CONV = {"lfm2": lfm2}
