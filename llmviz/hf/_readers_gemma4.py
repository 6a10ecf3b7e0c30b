"""Family reader for :func:`llmviz.hf.config_from_hf`: Gemma 4's text model (``gemma4_text``).

What the config holds: Gemma 3's sandwich blocks (plain-weight RMS norms, computed in float32),
GeGLU feed-forwards (``hidden_activation``), embeddings scaled by sqrt(C), per-head RMS QK-norm,
scores unscaled (``scaling = 1``), sliding and full layers (``layer_types``) with RoPE per layer
type (the full layers' is usually ``"proportional"``), and the final soft-cap. The ModelConfig
describes the sliding layers' heads; what the built model adds (the layout's ``adapt``):

* every attention layer is a :class:`~llmviz.attention.shared_kv.SharedKVAttention` with the
  weightless RMS norm of the values (``v_norm``) and its own head width and key/value heads
  (``per_layer_config``: the full layers' ``global_head_dim`` and, with ``attention_k_eq_v``,
  ``num_global_key_value_heads``), the full layers with their own RoPE of that width; with
  ``attention_k_eq_v`` the full layers' values are their keys (no ``v_proj``);
* the last ``num_kv_shared_layers`` layers reuse the keys and values of the last earlier layer of
  their type (no k/v projections, no cache of their own); with ``use_double_wide_mlp`` their
  feed-forward is twice as wide;
* with ``enable_moe_block`` (the 26B-A4B) every feed-forward is a
  :class:`~llmviz.moe.dense_and_experts.DenseAndExperts`: the dense MLP and a mixture of GeGLU
  experts side by side, each between norms of its own (the block's pre-feed-forward norm moves
  inside it), routed by a weightless RMS, a learned scale and per-expert output scales;
* per-layer inputs (``hidden_size_per_layer_input`` > 0): the token embedding becomes a
  :class:`~llmviz.model.per_layer_inputs.PerLayerEmbedding` and every block a
  :class:`~llmviz.model.per_layer_inputs.PerLayerInputBlock`, which also scales its output by
  the stored ``layer_scalar`` (with or without per-layer inputs).

Refused (``NotImplementedError``): ``use_bidirectional_attention="all"`` (every token attends to
every other) and per-layer overrides of anything but ``head_dim`` and ``num_key_value_heads``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..attention.shared_kv import KVShare, SharedKVAttention
from ..ffn import make_ffn
from ..model.builder import block_options
from ..moe.dense_and_experts import DenseAndExperts
from ..model.parts import BlockModules
from ..model.per_layer_inputs import PerLayerEmbedding, PerLayerInputBlock, PerLayerSlot
from ..position.rotary import RotaryEmbedding
from ._layout import stores
from ._readers import activation, attr, rope_by_layer_type, windows
from .rope import rope_parameters_of, rope_spec

__all__ = ["READERS_GEMMA4", "gemma4_text", "kv_roles", "layer_heads"]

_TYPES = ("sliding_attention", "full_attention")
_PER_LAYER = {"head_dim", "num_key_value_heads"}


def _types(c: Any) -> list[str]:
    types = list(c.layer_types)
    if len(types) != c.num_hidden_layers or set(types) - set(_TYPES):
        raise ValueError(f"gemma4_text: layer_types={types!r}; expected 'sliding_attention' or "
                         f"'full_attention' for each of the {c.num_hidden_layers} layers")
    return types


def layer_heads(c: Any, i: int) -> tuple[int, int]:
    """``(head_dim, num_key_value_heads)`` of layer ``i`` (``per_layer_config`` where set)."""
    varying = set(c.per_layer_attributes or ()) if getattr(c, "is_heterogeneous", False) else set()
    if varying - _PER_LAYER:
        raise NotImplementedError(
            f"gemma4_text: per_layer_config overrides {sorted(varying - _PER_LAYER)}; llmviz reads "
            f"per-layer {sorted(_PER_LAYER)} only")
    layer = c.per_layer_config[i] if varying else c
    return int(layer.head_dim), int(layer.num_key_value_heads)


def kv_roles(c: Any) -> list[str | None]:
    """Per layer: ``"reuse"`` (the last ``num_kv_shared_layers``), ``"store"`` (the last earlier
    layer of a reused type) or None."""
    types, L = _types(c), c.num_hidden_layers
    n = int(attr(c, "num_kv_shared_layers", 0))
    if not 0 <= n < L:
        raise ValueError(f"gemma4_text: num_kv_shared_layers={n}; at least one of the {L} layers "
                         "must compute its own keys and values")
    roles: list[str | None] = [None] * L
    for i in range(L - n, L):
        own = [j for j in range(L - n) if types[j] == types[i]]
        if not own:
            raise ValueError(f"gemma4_text: layer {i} ({types[i]}) reuses keys and values but no "
                             f"earlier layer of that type computes them")
        roles[own[-1]], roles[i] = "store", "reuse"
    return roles


def _ple_dim(c: Any) -> int | None:
    return int(attr(c, "hidden_size_per_layer_input", 0)) or None


def _adapt(model: Any, c: Any) -> Any:
    cfg = model.config
    types, roles = _types(c), kv_roles(c)
    params = rope_parameters_of(c)
    share, P = KVShare(), _ple_dim(c)
    slot = PerLayerSlot() if P else None
    eps = float(c.rms_norm_eps)
    with torch.device(model.embed_tokens.weight.device):
        ropes = {}
        for i, t in enumerate(types):
            D, G = layer_heads(c, i)
            if (t, D) not in ropes:
                spec = rope_spec(params.get(t, params), head_dim=D, max_position_embeddings=c.max_position_embeddings,
                                 where=f"gemma4_text rope_parameters[{t!r}]")
                ropes[t, D] = RotaryEmbedding(D, base=spec.base, rotary_dim=spec.rotary_dim, scaling=spec.scaling)
            attn = SharedKVAttention(
                cfg.d_model, cfg.n_heads, n_kv_heads=G, head_dim=D, bias=cfg.attn_bias, rope=ropes[t, D],
                qk_norm=cfg.qk_norm_spec, scale=1.0, layer_mask=cfg.mask_for(i), dropout=cfg.dropout,
                value_norm_eps=eps, share=share if roles[i] else None, role=roles[i], share_key=t,
                values_from_keys=bool(attr(c, "attention_k_eq_v", False)) and t == "full_attention")
            old = model.layers[i]
            mlp, ffn_norm = old.mlp, old.ffn_norm
            wide = 2 if roles[i] == "reuse" and attr(c, "use_double_wide_mlp", False) else 1
            if wide == 2 or cfg.n_experts:
                mlp = make_ffn(cfg.ffn, cfg.d_model, wide * cfg.d_ff, activation=cfg.activation, bias=cfg.bias)
            if cfg.n_experts:  # the block's pre-feed-forward norm moves inside, before the dense MLP
                mlp = DenseAndExperts(mlp, cfg.d_model, cfg.n_experts, cfg.experts_top_k, cfg.expert_d_ff,
                                      activation=cfg.activation, eps=eps)
                mlp.pre_norm, ffn_norm = old.ffn_norm, nn.Identity()
            parts = BlockModules(mixer=attn, mlp=mlp, attn_norm=old.attn_norm, ffn_norm=ffn_norm,
                                 post_attn_norm=old.post_attn_norm, post_ffn_norm=old.post_ffn_norm)
            model.layers[i] = PerLayerInputBlock(parts, layer_idx=i, d_model=cfg.d_model, slot=slot,
                                                 per_layer_dim=P, activation=cfg.activation, eps=eps,
                                                 **block_options(cfg))
        if P:
            embed = PerLayerEmbedding(cfg.vocab_size, cfg.d_model, cfg.n_layers, P, eps=eps, slot=slot,
                                      per_layer_vocab=int(attr(c, "vocab_size_per_layer_input", cfg.vocab_size)))
            embed.weight = model.embed_tokens.weight  # the same tensor: a tied head stays tied
            model.embed_tokens = embed
    model.reset_parameters()
    return model


_MOE_NAMES = {"mlp.pre_norm": "pre_feedforward_layernorm", "mlp.dense": "mlp", "mlp.router": "router",
              "mlp.experts": "experts", "mlp.post_norm_1": "post_feedforward_layernorm_1",
              "mlp.pre_norm_2": "pre_feedforward_layernorm_2", "mlp.post_norm_2": "post_feedforward_layernorm_2"}


_PER_LAYER_NAMES = {"embed_tokens.per_layer.weight": "embed_tokens_per_layer.weight",
                    "embed_tokens.projection.weight": "per_layer_model_projection.weight",
                    "embed_tokens.projection_norm.weight": "per_layer_projection_norm.weight"}


@stores(adapt=_adapt, renames=_MOE_NAMES, top=_PER_LAYER_NAMES)
def gemma4_text(c: Any) -> dict[str, Any]:
    """Gemma 4's text model (module docstring)."""
    if getattr(c, "use_bidirectional_attention", None) == "all":
        raise NotImplementedError("gemma4_text: use_bidirectional_attention='all' (every token sees "
                                  "every other); llmviz is causal")
    types = _types(c)
    kv_roles(c)
    first = types.index("sliding_attention") if "sliding_attention" in types else 0
    D, G = layer_heads(c, first)  # the model-wide heads: a sliding layer's (each layer has its own)
    for i in range(c.num_hidden_layers):
        layer_heads(c, i)
    full, local_base = _rope(c, D)
    spec = rope_spec(full, head_dim=layer_heads(c, types.index("full_attention"))[0],
                     max_position_embeddings=c.max_position_embeddings, where="gemma4_text rope_parameters")
    eps = float(c.rms_norm_eps)
    win = windows(c)
    moe = {}
    if attr(c, "enable_moe_block", False):  # every layer: the dense MLP and the experts side by side
        moe = dict(n_experts=int(c.num_experts), experts_top_k=int(c.top_k_experts),
                   expert_d_ff=int(c.moe_intermediate_size), moe_score="softmax", moe_normalize=True)
    f = dict(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_layers=c.num_hidden_layers,
        n_heads=c.num_attention_heads, n_kv_heads=G, head_dim=D, d_ff=c.intermediate_size,
        max_seq_len=c.max_position_embeddings, position="rope", rope_base=spec.base,
        rope_scaling=spec.scaling, rotary_dim=None, rope_layout="half",
        local_rope_base=local_base if win else None, norm="rms", norm_eps=eps, placement="sandwich",
        ffn="geglu", activation=activation(c, "hidden_activation"), bias=False,
        attn_bias=bool(attr(c, "attention_bias", False)), tie_embeddings=bool(attr(c, "tie_word_embeddings", True)),
        embed_scale=True, layer_windows=win, qk_norm="rms", qk_norm_eps=eps, qk_norm_scope="head",
        query_pre_attn_scalar=1.0, final_softcap=attr(c, "final_logit_softcapping"),
    )
    f.update(moe)
    return f


class _Heads:
    """The fields :func:`rope_by_layer_type` reads, with the sliding layers' head width."""

    def __init__(self, c: Any, head_dim: int) -> None:
        self.model_type, self.rope_parameters, self.head_dim = c.model_type, c.rope_parameters, head_dim
        self.max_position_embeddings = c.max_position_embeddings
        self.hidden_size, self.num_attention_heads = c.hidden_size, c.num_attention_heads


def _rope(c: Any, head_dim: int) -> tuple[dict, float | None]:
    """The full layers' RoPE dict and the sliding layers' plain base (a scaled one is refused)."""
    return rope_by_layer_type(_Heads(c, head_dim))


#: model_type -> reader, for the family above.
READERS_GEMMA4 = {"gemma4_text": gemma4_text}
