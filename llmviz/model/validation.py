"""Validation of a model config: every rule a :class:`~llmviz.model.config.ModelConfig` obeys.

The config lists its fields; this module checks them and resolves their ``None`` defaults, by
concern (sizes and kinds, per-layer features, mixture of experts, latent attention). The valid
kinds come from the registries that build them, so a new kind needs no edit here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._checks import check_choice, check_flags, check_positive, check_positive_int, check_real
from ..attention.mask_kinds import MASK_KINDS
from ..attention.module import QK_NORM_SCOPES, QK_NORMS
from ..ffn import FFN_ACTIVATIONS, FFN_KINDS, glu_hidden_size
from ..norm import MODEL_NORMS
from ..position import POSITIONS, resolve_t5_bias
from ..position.rope import LAYOUTS as ROPE_LAYOUTS
from .kinds import ATTENTIONS, PLACEMENTS, check_config

__all__ = ["validate", "check_layer_features", "check_moe", "check_mla", "layer_indices"]


def _set(c: Any, name: str, value: Any) -> None:
    object.__setattr__(c, name, value)  # the config is frozen: resolved once, here


def layer_indices(c: Any, name: str) -> tuple[int, ...]:
    """The field ``name`` as sorted, distinct layer indices in ``[0, n_layers)``, or a ValueError
    naming the bad entries (one rule for every per-layer feature)."""
    check_config(c, "layer_indices")
    if not isinstance(name, str) or not hasattr(c, name):
        raise ValueError(f"layer_indices: {name!r} is not a field of the config")
    layers = tuple(getattr(c, name))
    bad = [i for i in layers if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < c.n_layers]
    if bad:
        raise ValueError(f"{name} must hold layer indices in [0, {c.n_layers}); got {bad}")
    return tuple(sorted(set(layers)))


def validate(c: Any) -> None:
    """Check every field of a :class:`~llmviz.model.config.ModelConfig` and resolve the ``None``
    defaults (called by its ``__post_init__``); raises ValueError/TypeError naming the field."""
    check_config(c, "validate")
    check_flags(**{f.name: getattr(c, f.name) for f in dataclasses.fields(c) if f.type == "bool"})
    for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_seq_len"):
        check_positive_int(getattr(c, name), name)
    if c.n_kv_heads is None:
        _set(c, "n_kv_heads", c.n_heads)
    check_positive_int(c.n_kv_heads, "n_kv_heads")
    if c.n_heads % c.n_kv_heads:
        raise ValueError(
            f"n_heads ({c.n_heads}) must be divisible by n_kv_heads ({c.n_kv_heads}); "
            "each key/value head serves a whole group of query heads"
        )
    if c.head_dim is None:
        if c.d_model % c.n_heads:
            raise ValueError(
                f"d_model ({c.d_model}) must be divisible by n_heads ({c.n_heads}), "
                "or give head_dim explicitly"
            )
        _set(c, "head_dim", c.d_model // c.n_heads)
    check_positive_int(c.head_dim, "head_dim")
    check_choice(c.position, "position", POSITIONS)
    _set(c, "t5_bias", resolve_t5_bias(c.t5_bias, c.position))
    check_choice(c.norm, "norm", MODEL_NORMS)
    check_choice(c.placement, "placement", PLACEMENTS)
    check_choice(c.ffn, "ffn", tuple(FFN_KINDS))
    check_choice(c.activation, "activation", (None, *FFN_ACTIVATIONS))
    check_choice(c.qk_norm, "qk_norm", QK_NORMS)
    check_choice(c.rope_layout, "rope_layout", ROPE_LAYOUTS)
    if c.d_ff is None:
        d_ff = 4 * c.d_model if c.ffn == "mlp" else glu_hidden_size(c.d_model, multiple_of=8)
        _set(c, "d_ff", d_ff)
    check_positive_int(c.d_ff, "d_ff")
    if c.attn_bias is None:
        _set(c, "attn_bias", c.bias)
    if c.rotary_dim is not None:
        if c.position != "rope":
            raise ValueError(
                f"rotary_dim ({c.rotary_dim}) only applies to position='rope', "
                f"got position={c.position!r}"
            )
        check_positive_int(c.rotary_dim, "rotary_dim")
        if not (0 < c.rotary_dim <= c.head_dim) or c.rotary_dim % 2:
            raise ValueError(
                f"rotary_dim ({c.rotary_dim}) must be even and in (0, head_dim={c.head_dim}]"
            )
    if c.position == "rope" and c.head_dim % 2:
        raise ValueError(f"RoPE rotates pairs of dims: head_dim ({c.head_dim}) must be even")
    if c.rope_scaling is not None and c.position != "rope":
        raise ValueError(
            f"rope_scaling is set but position={c.position!r}; it only applies to 'rope'"
        )
    check_positive(c.rope_base, "rope_base")
    check_positive(c.norm_eps, "norm_eps")
    check_positive(c.init_std, "init_std")
    for name in ("attn_softcap", "final_softcap", "query_pre_attn_scalar"):
        if getattr(c, name) is not None:
            check_positive(getattr(c, name), name)
    if c.sliding_window is not None:
        check_positive_int(c.sliding_window, "sliding_window")
    if c.global_every is not None:
        check_positive_int(c.global_every, "global_every")
        if c.sliding_window is None:
            raise ValueError(
                f"global_every ({c.global_every}) needs sliding_window: it says which "
                "layers skip the window"
            )
    if not 0.0 <= check_real(c.dropout, "dropout") < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {c.dropout}")
    check_positive(c.z_loss_weight, "z_loss_weight", allow_zero=True)
    check_layer_features(c)
    check_moe(c)
    check_mla(c)
    if c.placement == "deepnorm" and c.parallel:
        raise ValueError(
            "placement='deepnorm' is defined for serial blocks only; use parallel=False"
        )


def check_layer_features(c: Any) -> None:
    """Per-layer windows, local RoPE base, QK-norm scope, o_proj bias, the OLMo 2 placement."""
    check_config(c, "check_layer_features")
    if c.o_bias is None:
        _set(c, "o_bias", c.attn_bias)
    check_choice(c.qk_norm_scope, "qk_norm_scope", QK_NORM_SCOPES)
    check_choice(c.local_attention, "local_attention", MASK_KINDS.names(local=True))
    check_positive(c.qk_norm_eps, "qk_norm_eps")
    if c.local_rope_base is not None:
        check_positive(c.local_rope_base, "local_rope_base")
        if c.position != "rope":
            raise ValueError(
                f"local_rope_base ({c.local_rope_base}) only applies to position='rope', "
                f"got position={c.position!r}"
            )
    if c.nope_layers is not None:
        if c.position != "rope":
            raise ValueError(f"nope_layers ({c.nope_layers!r}) only applies to position='rope' "
                             f"(the layers without rotation); got position={c.position!r}")
        _set(c, "nope_layers", layer_indices(c, "nope_layers"))
    if c.linear_layers is not None:
        _set(c, "linear_layers", layer_indices(c, "linear_layers"))
    for name in ("linear_heads", "linear_key_heads", "linear_head_dim"):
        if getattr(c, name) is not None:
            check_positive_int(getattr(c, name), name)
    check_positive_int(c.linear_conv_kernel, "linear_conv_kernel")
    if c.layer_windows is not None:
        if c.sliding_window is not None or c.global_every is not None:
            raise ValueError(
                "give either layer_windows or sliding_window/global_every, not both; "
                f"got layer_windows={c.layer_windows!r}, sliding_window={c.sliding_window!r}"
            )
        windows = tuple(c.layer_windows)
        if len(windows) != c.n_layers:
            raise ValueError(
                f"layer_windows has {len(windows)} entries but n_layers is {c.n_layers}; "
                "give one window (or None for global attention) per layer"
            )
        for w in windows:
            if w is not None:
                check_positive_int(w, "each layer_windows entry")
        _set(c, "layer_windows", windows)
    if c.placement == "post_sublayer" and c.parallel:
        raise ValueError(
            "placement='post_sublayer' is defined for serial blocks only; use parallel=False"
        )


def check_moe(c: Any) -> None:
    """The mixture-of-experts fields (llmviz.moe reads them)."""
    check_config(c, "check_moe")
    from ..moe.layer import EXPERT_GLUS
    from ..moe.router import SCORE_KINDS

    check_choice(c.moe_score, "moe_score", SCORE_KINDS)
    check_choice(c.expert_glu, "expert_glu", EXPERT_GLUS)
    check_positive(c.router_aux_loss_coef, "router_aux_loss_coef", allow_zero=True)
    check_positive(c.router_z_loss_coef, "router_z_loss_coef", allow_zero=True)
    check_positive_int(c.experts_top_k, "experts_top_k")  # checked even with no experts
    check_positive_int(c.n_shared_experts, "n_shared_experts", allow_zero=True)
    check_real(c.moe_scaling, "moe_scaling")
    check_positive(c.moe_bias_rate, "moe_bias_rate")
    check_positive(c.expert_glu_alpha, "expert_glu_alpha")
    check_positive(c.expert_glu_limit, "expert_glu_limit")
    if c.n_experts is None:
        if c.moe_layers is not None:
            raise ValueError(f"moe_layers ({c.moe_layers!r}) needs n_experts: set how many "
                             "routed experts the sparse layers hold")
        return
    check_positive_int(c.n_experts, "n_experts")
    check_positive_int(c.experts_top_k, "experts_top_k")
    if c.experts_top_k > c.n_experts:
        raise ValueError(f"experts_top_k ({c.experts_top_k}) must be <= n_experts "
                         f"({c.n_experts}); lower experts_top_k or add experts")
    if c.expert_d_ff is None:
        _set(c, "expert_d_ff", c.d_ff)
    check_positive_int(c.expert_d_ff, "expert_d_ff")
    check_positive_int(c.n_shared_experts, "n_shared_experts", allow_zero=True)
    if c.shared_expert_d_ff is not None:
        check_positive_int(c.shared_expert_d_ff, "shared_expert_d_ff")
    if c.shared_expert_gate and not (c.n_shared_experts or c.shared_expert_d_ff):
        raise ValueError("shared_expert_gate=True needs a shared expert: set n_shared_experts "
                         "or shared_expert_d_ff")
    check_positive(c.moe_bias_rate, "moe_bias_rate")
    if c.moe_capacity_factor is not None:
        check_positive(c.moe_capacity_factor, "moe_capacity_factor")
    if c.moe_layers is not None:
        _set(c, "moe_layers", layer_indices(c, "moe_layers"))
    from ..moe.router import check_groups

    check_groups(c.n_experts, c.experts_top_k, c.moe_n_groups, c.moe_topk_groups)


def check_mla(c: Any) -> None:
    """The multi-head latent attention fields (attn_kind="mla")."""
    check_config(c, "check_mla")
    check_choice(c.attn_kind, "attn_kind", tuple(ATTENTIONS))
    dims = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    if c.attn_kind != "mla":
        given = [n for n in (*dims, "q_lora_rank") if getattr(c, n) is not None]
        if given:
            raise ValueError(f"{given} only apply to attn_kind='mla'; got attn_kind={c.attn_kind!r}")
        return
    missing = [n for n in dims if getattr(c, n) is None]
    if missing:
        raise ValueError(f"attn_kind='mla' needs {missing} (e.g. DeepSeek-V3: kv_lora_rank=512, "
                         "qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)")
    for n in dims:
        check_positive_int(getattr(c, n), n)
    if c.q_lora_rank is not None:
        check_positive_int(c.q_lora_rank, "q_lora_rank")
    if c.qk_rope_head_dim % 2:
        raise ValueError(f"qk_rope_head_dim ({c.qk_rope_head_dim}) must be even: RoPE rotates pairs")
    bad = [n for n in ("attn_sinks", "attn_output_gate", "qk_norm", "attn_softcap", "rotary_dim",
                       "nope_layers", "local_rope_base") if getattr(c, n)]
    if bad or c.position != "rope":
        raise ValueError(f"attn_kind='mla' is built with RoPE on its rope features and none of "
                         f"{bad or ['position=' + repr(c.position)]}; drop them")
    if c.layer_windows is not None or c.sliding_window is not None:
        raise ValueError("attn_kind='mla' attends globally: drop sliding_window/layer_windows")
    if c.placement == "deepnorm":
        raise ValueError("placement='deepnorm' scales v_proj, which latent attention has not; "
                         "use another placement with attn_kind='mla'")
