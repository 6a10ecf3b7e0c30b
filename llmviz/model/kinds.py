"""The registries a block is built from: attention kinds, token mixers, norm placements.

Each entry's ``build(config, layer_idx, rope=None)`` makes the module of layer ``layer_idx`` of
a model with ``config`` (a :class:`~llmviz.model.config.ModelConfig`; this module does not
import it, so the config can import the registries), and ``params(config)`` declares its
parameter count in closed form. ``tests/model/test_kinds.py`` builds every kind and compares.
Adding an attention kind (or a token mixer) is one ``register`` call here plus its module.

Norms, feed-forwards and position schemes have their own registries next to their code:
:data:`llmviz.norm.NORMS`, :data:`llmviz.ffn.FFNS`, :data:`llmviz.position.POSITION_SCHEMES`;
mask kinds live in :data:`llmviz.attention.mask_kinds.MASK_KINDS`.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .._registry import Registry
from ..norm import norm_params

__all__ = ["ATTENTIONS", "MIXER_KINDS", "PLACEMENTS", "qk_norm_widths", "mla_kwargs", "check_config"]

#: The registry of norm placements a block implements (the table in :mod:`llmviz.model.block`).
PLACEMENTS = ("pre", "post", "sandwich", "deepnorm", "post_sublayer")


_CONFIG_FIELDS = ("d_model", "n_heads", "n_kv_heads", "head_dim", "mask_for", "mixer_for")


def check_config(c: Any, who: str) -> Any:
    """TypeError unless ``c`` reads like a :class:`~llmviz.model.config.ModelConfig` (the
    registries take the config without importing it, so it is checked by its fields)."""
    if not all(hasattr(c, name) for name in _CONFIG_FIELDS):
        raise TypeError(f"{who} takes a ModelConfig, got {type(c).__name__}")
    return c


def qk_norm_widths(c: Any) -> tuple[int, int]:
    """Widths of ``q_norm`` and ``k_norm``: D each (scope "head"), or H*D and G*D ("all")."""
    check_config(c, "qk_norm_widths")
    if c.qk_norm_scope == "head":
        return c.head_dim, c.head_dim
    return c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim


def _standard(c: Any, layer_idx: int = 0, rope: nn.Module | None = None) -> nn.Module:
    check_config(c, "standard")
    from ..attention.module import MultiHeadAttention

    return MultiHeadAttention(
        c.d_model, c.n_heads, n_kv_heads=c.n_kv_heads, head_dim=c.head_dim, bias=c.attn_bias,
        rope=rope, alibi=c.position == "alibi", o_bias=c.o_bias, qk_norm=c.qk_norm_spec,
        qk_norm_scope=c.qk_norm_scope, softcap=c.attn_softcap,
        scale=c.attn_scale, layer_mask=c.mask_for(layer_idx), dropout=c.dropout,
        sinks=c.attn_sinks, output_gate=c.attn_output_gate,
    )


def _standard_params(c: Any) -> int:
    """``C*H*D + 2*C*G*D + H*D*C`` (+ biases, QK-norms, sinks H, output gate C*H*D)."""
    check_config(c, "standard_params")
    C, H, G, D = c.d_model, c.n_heads, c.n_kv_heads, c.head_dim
    n = C * H * D + 2 * C * G * D + H * D * C
    if c.attn_bias:
        n += H * D + 2 * G * D
    n += C if c.o_bias else 0
    if c.qk_norm is not None:
        n += sum(norm_params(c.qk_norm, w) for w in qk_norm_widths(c))
    return n + (H if c.attn_sinks else 0) + (C * H * D if c.attn_output_gate else 0)


def mla_kwargs(c: Any) -> dict:
    """Keyword arguments of :class:`~llmviz.attention.latent.MultiHeadLatentAttention`."""
    check_config(c, "mla_kwargs")
    return dict(
        kv_lora_rank=c.kv_lora_rank, qk_nope_head_dim=c.qk_nope_head_dim,
        qk_rope_head_dim=c.qk_rope_head_dim, v_head_dim=c.v_head_dim, q_lora_rank=c.q_lora_rank,
        rope_base=c.rope_base, rope_layout=c.rope_layout, rope_scaling=c.rope_scaling,
        scale=c.attn_scale, bias=c.attn_bias,
    )


def _mla(c: Any, layer_idx: int = 0, rope: nn.Module | None = None) -> nn.Module:
    check_config(c, "mla")
    from ..attention.latent import MultiHeadLatentAttention

    return MultiHeadLatentAttention(c.d_model, c.n_heads, **mla_kwargs(c))


def _mla_params(c: Any) -> int:
    """Queries (plain, or down + RMSNorm + up), latent + rope key down, RMSNorm, up, o_proj."""
    check_config(c, "mla_params")
    C, H, r, dr = c.d_model, c.n_heads, c.kv_lora_rank, c.qk_rope_head_dim
    dn, dv, rq, b = c.qk_nope_head_dim, c.v_head_dim, c.q_lora_rank, int(bool(c.attn_bias))
    q = C * H * (dn + dr) if rq is None else C * rq + b * rq + rq + rq * H * (dn + dr)
    kv = C * (r + dr) + b * (r + dr) + r + r * H * (dn + dv)
    return q + kv + H * dv * C + b * C


#: The registry of softmax attention kinds (``ModelConfig.attn_kind``).
ATTENTIONS = Registry("attn_kind")
ATTENTIONS.register("standard", build=_standard, params=_standard_params,
                    summary="grouped query attention: MHA, GQA, MQA (q_proj ... o_proj)")
ATTENTIONS.register("mla", build=_mla, params=_mla_params,
                    summary="DeepSeek's multi-head latent attention")


def _linear_dims(c: Any) -> tuple[int, int, int]:
    heads = c.n_heads if c.linear_heads is None else c.linear_heads
    k_heads = heads if c.linear_key_heads is None else c.linear_key_heads
    width = c.head_dim if c.linear_head_dim is None else c.linear_head_dim
    return heads, k_heads, width


def _linear(c: Any, layer_idx: int = 0, rope: nn.Module | None = None) -> nn.Module:
    check_config(c, "linear")
    from ..attention.deltanet import GatedDeltaNet

    heads, k_heads, width = _linear_dims(c)
    return GatedDeltaNet(c.d_model, heads, width, n_k_heads=c.linear_key_heads,
                         conv_kernel=c.linear_conv_kernel, eps=c.norm_eps)


def _linear_params(c: Any) -> int:
    """q, k (C x kd), v, z (C x vd), b, a (C x heads), the depthwise conv, A_log, dt_bias,
    the output norm's D and o_proj."""
    check_config(c, "linear_params")
    heads, k_heads, width = _linear_dims(c)
    kd, vd, C = k_heads * width, heads * width, c.d_model
    return 2 * C * kd + 2 * C * vd + 2 * C * heads + (2 * kd + vd) * c.linear_conv_kernel \
        + 2 * heads + width + vd * C


#: The registry of token mixers a block can hold (``ModelConfig.mixer_for``).
MIXER_KINDS = Registry("mixer")
MIXER_KINDS.register(
    "attention", build=lambda c, i=0, rope=None: ATTENTIONS[c.attn_kind].build(c, i, rope),
    params=lambda c: ATTENTIONS[c.attn_kind].params(c), summary="softmax attention (self_attn)",
    attribute="self_attn")
MIXER_KINDS.register("linear", build=_linear, params=_linear_params,
                     summary="Gated DeltaNet linear attention (linear_attn)", attribute="linear_attn")
