"""Translate a Hugging Face config into a :class:`~llmviz.model.config.ModelConfig`, exactly or not at all.

:func:`config_from_hf` dispatches on ``config.model_type``. Each family reader states what the
family computes (norm kind and placement, biases, QK-norm, soft-caps, windows per layer, RoPE
per layer type) and checks every config field that would change the computation: a value
llmviz cannot represent raises ``NotImplementedError`` (a feature llmviz lacks) or
``ValueError`` (a value that contradicts the family), naming the field.

line budget: one reader per family in one file, so that their checks read alike.

Families: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, olmo2, phi3, gpt2, smollm3,
and the 2025 ones: mixtral, qwen2_moe, qwen3_moe (mixtures of experts), deepseek_v3 (latent
attention and experts), gpt_oss (sinks, alternating windows, biased clamped-GLU experts),
qwen3_next (Gated DeltaNet layers, gated attention, gated shared expert) and olmo3 (OLMo 2's
block with 3:1 sliding and full layers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.config import ModelConfig
from .rope import rope_parameters_of, rope_spec

__all__ = ["REFUSED", "SUPPORTED", "config_from_hf", "family_of"]

#: model_type -> why llmviz refuses it (each reason names what would be lost or what to load instead).
REFUSED = {
    "deepseek_v2": "its group-limited router ranks expert groups by their best softmax score, while "
                   "llmviz's router ranks them by the sum of their two best (DeepSeek-V3's rule); "
                   "DeepSeek-V3 checkpoints (model_type 'deepseek_v3') load",
    "gemma3": "a vision-language model; load its text part (Gemma3ForCausalLM, model_type "
              "'gemma3_text') instead",
}

_ACT = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh",
        "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}


def family_of(hf_config: Any) -> str:
    """``hf_config.model_type``, checked: refused and unknown families raise here."""
    model_type = getattr(hf_config, "model_type", None)
    if not isinstance(model_type, str):
        raise TypeError(
            "expected a transformers config (with .model_type), e.g. model.config or "
            f"transformers.AutoConfig.from_pretrained(path); got {type(hf_config).__name__}"
        )
    if model_type in REFUSED:
        raise NotImplementedError(
            f"model_type {model_type!r} is not supported yet: {REFUSED[model_type]}"
        )
    if model_type not in SUPPORTED:
        raise NotImplementedError(
            f"model_type {model_type!r} has no llmviz reader; supported: {sorted(SUPPORTED)}"
        )
    return model_type


def config_from_hf(hf_config: Any, **overrides: Any) -> ModelConfig:
    """The :class:`ModelConfig` computing what ``hf_config``'s model computes.

    Args:
        hf_config: a transformers config (``model.config``) of a supported family.
        **overrides: ModelConfig fields to change afterwards (e.g. ``max_seq_len``).

    Raises:
        NotImplementedError: the family, or one of its features, has no llmviz counterpart.
        ValueError: a field has a value llmviz would not reproduce exactly.
    """
    fields = SUPPORTED[family_of(hf_config)](hf_config)
    fields.update(overrides)
    return ModelConfig(**fields)


# ----------------------------------------------------------------------------- helpers
def _get(c: Any, name: str, default: Any = None) -> Any:
    value = getattr(c, name, default)
    return default if value is None else value


def _require(c: Any, name: str, allowed: Any, why: str) -> None:
    value = getattr(c, name, None)
    ok = value in allowed if isinstance(allowed, tuple) else value == allowed
    if not ok:
        raise NotImplementedError(f"{c.model_type}: {name}={value!r} is not supported ({why})")


def _activation(c: Any, name: str) -> str:
    value = getattr(c, name, None)
    if value not in _ACT:
        raise NotImplementedError(
            f"{c.model_type}: {name}={value!r} is not supported; llmviz has {sorted(_ACT)}"
        )
    return _ACT[value]


def _windows(c: Any) -> tuple[int | None, ...] | None:
    """Per-layer windows from ``layer_types`` ("full_attention" / "sliding_attention")."""
    types = getattr(c, "layer_types", None)
    if types is None:
        return None
    if len(types) != c.num_hidden_layers:
        raise ValueError(
            f"{c.model_type}: layer_types has {len(types)} entries for {c.num_hidden_layers} layers"
        )
    unknown = sorted(set(types) - {"full_attention", "sliding_attention"})
    if unknown:
        raise NotImplementedError(f"{c.model_type}: layer types {unknown} are not supported")
    window = getattr(c, "sliding_window", None)
    if "sliding_attention" in types and not window:
        raise ValueError(f"{c.model_type}: sliding_attention layers but sliding_window={window!r}")
    out = tuple(window if t == "sliding_attention" else None for t in types)
    return out if any(w is not None for w in out) else None


def _decoder(c: Any, *, allow_partial: bool = False, rope_params: dict | None = None) -> dict[str, Any]:
    """Fields every RoPE decoder family shares (Llama's layout)."""
    if getattr(c, "use_bidirectional_attention", None):
        raise NotImplementedError(f"{c.model_type}: use_bidirectional_attention=True (llmviz is causal)")
    n_heads = c.num_attention_heads
    head_dim = _get(c, "head_dim", c.hidden_size // n_heads)
    params = rope_parameters_of(c) if rope_params is None else rope_params
    if set(params) & {"full_attention", "sliding_attention"}:
        raise NotImplementedError(
            f"{c.model_type}: rope_parameters per layer type is only read for gemma3_text and olmo3"
        )
    rope = rope_spec(params, head_dim=head_dim, max_position_embeddings=c.max_position_embeddings,
                     allow_partial=allow_partial, where=f"{c.model_type} rope_parameters")
    return dict(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_layers=c.num_hidden_layers,
        n_heads=n_heads, n_kv_heads=_get(c, "num_key_value_heads", n_heads), head_dim=head_dim,
        d_ff=c.intermediate_size, max_seq_len=c.max_position_embeddings, position="rope",
        rope_base=rope.base, rope_scaling=rope.scaling, rotary_dim=rope.rotary_dim,
        rope_layout="half", norm="rms", norm_eps=float(c.rms_norm_eps), placement="pre",
        ffn="swiglu", activation=_activation(c, "hidden_act") if hasattr(c, "hidden_act") else None,
        bias=False, attn_bias=bool(getattr(c, "attention_bias", False)),
        tie_embeddings=bool(getattr(c, "tie_word_embeddings", False)), layer_windows=_windows(c),
    )


def _check_glu_silu(c: Any, fields: dict) -> dict:
    if fields["activation"] != "silu":
        raise NotImplementedError(f"{c.model_type}: hidden_act={c.hidden_act!r}; this family uses silu")
    return fields


# ----------------------------------------------------------------------------- families
def _llama(c: Any) -> dict[str, Any]:
    f = _check_glu_silu(c, _decoder(c))
    f["bias"] = bool(getattr(c, "mlp_bias", False))  # attn_bias keeps attention_bias
    return f


def _mistral(c: Any) -> dict[str, Any]:
    f = _check_glu_silu(c, _decoder(c))
    window = getattr(c, "sliding_window", None)
    f["layer_windows"] = None if window is None else (int(window),) * c.num_hidden_layers
    return f


def _qwen2(c: Any) -> dict[str, Any]:
    f = _check_glu_silu(c, _decoder(c))
    f.update(attn_bias=True, o_bias=False)  # q/k/v always biased, o_proj never
    return f


def _qwen3(c: Any) -> dict[str, Any]:
    f = _check_glu_silu(c, _decoder(c))
    f.update(qk_norm="rms", qk_norm_eps=float(c.rms_norm_eps), qk_norm_scope="head")
    return f


def _olmo2(c: Any, rope_params: dict | None = None) -> dict[str, Any]:
    f = _check_glu_silu(c, _decoder(c, rope_params=rope_params))
    f.update(placement="post_sublayer", qk_norm="rms", qk_norm_eps=float(c.rms_norm_eps),
             qk_norm_scope="all")
    return f


def _olmo3(c: Any) -> dict[str, Any]:
    """OLMo 2's block with sliding and full layers (``layer_types``), RoPE per layer type."""
    full, local_base = _rope_by_layer_type(c)
    f = _olmo2(c, rope_params=full)
    f["local_rope_base"] = local_base if f["layer_windows"] else None
    return f


def _phi3(c: Any) -> dict[str, Any]:
    f = _check_glu_silu(c, _decoder(c, allow_partial=True))
    window = getattr(c, "sliding_window", None)
    f["layer_windows"] = None if window is None else (int(window),) * c.num_hidden_layers
    return f


def _gemma(c: Any) -> dict[str, Any]:
    f = _decoder(c)
    f.update(norm="rms_gemma", ffn="geglu", embed_scale=True)
    return f


def _gemma2(c: Any, rope_params: dict | None = None) -> dict[str, Any]:
    f = _decoder(c, rope_params=rope_params)
    f.update(norm="rms_gemma", ffn="geglu", embed_scale=True, placement="sandwich",
             activation=_activation(c, "hidden_activation"),
             query_pre_attn_scalar=float(c.query_pre_attn_scalar),
             attn_softcap=_get(c, "attn_logit_softcapping"),
             final_softcap=_get(c, "final_logit_softcapping"))
    return f


def _rope_by_layer_type(c: Any) -> tuple[dict, float | None]:
    """RoPE per layer type: the full layers' parameters and the sliding layers' plain base."""
    params = rope_parameters_of(c)
    nested = {k: params.pop(k) for k in ("full_attention", "sliding_attention") if k in params}
    if params and nested:
        raise ValueError(f"{c.model_type}: rope_parameters mixes per-layer-type and flat keys {sorted(params)}")
    full = nested.get("full_attention", params)
    head_dim = _get(c, "head_dim", c.hidden_size // c.num_attention_heads)
    spec = rope_spec(nested.get("sliding_attention", full), head_dim=head_dim,
                     max_position_embeddings=c.max_position_embeddings,
                     where=f"{c.model_type} rope_parameters['sliding_attention']")
    if spec.scaling is not None:
        raise NotImplementedError(
            f"{c.model_type}: sliding_attention rope_type={spec.kind!r}; llmviz scales only the "
            "global layers' RoPE (local layers use a plain base)"
        )
    return dict(full), spec.base


def _gemma3_text(c: Any) -> dict[str, Any]:
    full, local_base = _rope_by_layer_type(c)
    f = _gemma2(c, rope_params=full)  # global layers: rope_base and rope_scaling
    f.update(qk_norm="rms_gemma", qk_norm_eps=float(c.rms_norm_eps), qk_norm_scope="head",
             local_rope_base=local_base if f["layer_windows"] else None)
    return f


def _gpt2(c: Any) -> dict[str, Any]:
    _require(c, "scale_attn_by_inverse_layer_idx", (False, None), "scores divided by layer index + 1; llmviz has no per-layer score scale")
    _require(c, "add_cross_attention", (False, None), "llmviz models are decoder-only")
    return dict(
        vocab_size=c.vocab_size, d_model=c.n_embd, n_layers=c.n_layer, n_heads=c.n_head,
        d_ff=_get(c, "n_inner", 4 * c.n_embd), max_seq_len=c.n_positions, position="learned",
        norm="layer", norm_eps=float(c.layer_norm_epsilon), placement="pre", ffn="mlp",
        activation=_activation(c, "activation_function"), bias=True,
        tie_embeddings=bool(getattr(c, "tie_word_embeddings", True)),
        query_pre_attn_scalar=None if getattr(c, "scale_attn_weights", True) else 1.0,
    )


def _smollm3(c: Any) -> dict[str, Any]:
    """Llama's layout with NoPE layers: ``no_rope_layers[i]`` is 1 where layer i rotates."""
    f = _llama(c)
    flags = list(getattr(c, "no_rope_layers", None) or [1] * c.num_hidden_layers)
    if len(flags) != c.num_hidden_layers:
        raise ValueError(f"smollm3: no_rope_layers has {len(flags)} entries for "
                         f"{c.num_hidden_layers} layers")
    nope = tuple(i for i, use_rope in enumerate(flags) if not use_rope)
    f["nope_layers"] = nope or None
    return f


# ----------------------------------------------------------------------------- 2025 families
def _moe_layers(c: Any) -> tuple[int, ...]:
    """Sparse layers of the Qwen MoE families: not in mlp_only_layers, every decoder_sparse_step-th."""
    step = int(_get(c, "decoder_sparse_step", 1))
    only = set(_get(c, "mlp_only_layers", []))
    return tuple(i for i in range(c.num_hidden_layers) if i not in only and (i + 1) % step == 0)


def _qwen_moe(c: Any, f: dict) -> dict:
    layers = _moe_layers(c) if c.num_experts > 0 else ()
    if not layers:
        return f
    f.update(n_experts=c.num_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.moe_intermediate_size, moe_normalize=bool(c.norm_topk_prob),
             moe_layers=layers, router_aux_loss_coef=float(_get(c, "router_aux_loss_coef", 0.0)))
    return f


def _mixtral(c: Any) -> dict[str, Any]:
    """Mistral's attention, every feed-forward a softmax top-k mixture, always renormalised."""
    f = _mistral(c)
    f.update(n_experts=c.num_local_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.intermediate_size, moe_normalize=True,
             router_aux_loss_coef=float(_get(c, "router_aux_loss_coef", 0.0)))
    return f


def _qwen3_moe(c: Any) -> dict[str, Any]:
    f = _qwen3(c)
    window = getattr(c, "sliding_window", None)  # Qwen3-MoE windows every layer when set
    f["layer_windows"] = None if window is None else (int(window),) * c.num_hidden_layers
    return _qwen_moe(c, f)


def _qwen2_moe(c: Any) -> dict[str, Any]:
    """Qwen 2's attention; a softmax mixture plus one shared expert scaled by a sigmoid gate."""
    f = _qwen_moe(c, _qwen2(c))
    if f.get("n_experts"):
        f.update(shared_expert_d_ff=c.shared_expert_intermediate_size, shared_expert_gate=True)
    return f


def _deepseek_v3(c: Any) -> dict[str, Any]:
    """Latent attention everywhere; dense feed-forwards for the first ``first_k_dense_replace``
    layers, then sigmoid-scored experts with a choice bias, group-limited top-k, routed scaling
    and shared experts. Multi-token-prediction layers are not part of the model (the loader
    skips their tensors)."""
    dr = c.qk_rope_head_dim
    params = rope_parameters_of(c)
    rope = rope_spec(params, head_dim=dr, max_position_embeddings=c.max_position_embeddings,
                     where="deepseek_v3 rope_parameters")
    first = int(_get(c, "first_k_dense_replace", 0))
    groups = int(_get(c, "n_group", 1))
    f = dict(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_layers=c.num_hidden_layers,
        n_heads=c.num_attention_heads, head_dim=dr, d_ff=c.intermediate_size,
        max_seq_len=c.max_position_embeddings, position="rope", rope_base=rope.base,
        rope_scaling=rope.scaling, rope_layout="interleaved" if _get(c, "rope_interleave", True) else "half",
        norm="rms", norm_eps=float(c.rms_norm_eps), placement="pre", ffn="swiglu",
        activation=_activation(c, "hidden_act"), bias=False,
        attn_bias=bool(getattr(c, "attention_bias", False)),
        tie_embeddings=bool(getattr(c, "tie_word_embeddings", False)),
        attn_kind="mla", q_lora_rank=_get(c, "q_lora_rank", None), kv_lora_rank=c.kv_lora_rank,
        qk_nope_head_dim=c.qk_nope_head_dim, qk_rope_head_dim=dr, v_head_dim=c.v_head_dim,
    )
    if f["activation"] != "silu":
        raise NotImplementedError(f"deepseek_v3: hidden_act={c.hidden_act!r}; this family uses silu")
    sparse = tuple(range(first, c.num_hidden_layers))
    if sparse:
        n_shared = int(_get(c, "n_shared_experts", 0))
        f.update(
            n_experts=c.n_routed_experts, experts_top_k=c.num_experts_per_tok,
            expert_d_ff=c.moe_intermediate_size, n_shared_experts=n_shared,
            shared_expert_d_ff=n_shared * c.moe_intermediate_size if n_shared else None,
            moe_score="sigmoid", moe_normalize=bool(c.norm_topk_prob),
            moe_scaling=float(c.routed_scaling_factor), moe_bias_balancing=True, moe_layers=sparse,
            moe_n_groups=groups if groups > 1 else None,
            moe_topk_groups=int(c.topk_group) if groups > 1 else None,
        )
    return f


def _gpt_oss(c: Any) -> dict[str, Any]:
    """Biased attention with learned sinks, sliding and full layers alternating (layer_types),
    YaRN; every feed-forward a mixture whose router has a bias and whose experts are biased,
    with gpt-oss's clamped GLU (``expert_glu='clamped'``)."""
    f = _decoder(c)
    f.update(attn_sinks=True, n_experts=c.num_local_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.intermediate_size, moe_normalize=True, router_bias=True,
             expert_bias=True, expert_glu="clamped", expert_glu_alpha=float(c.swiglu_alpha),
             expert_glu_limit=float(c.swiglu_limit), activation=None,
             router_aux_loss_coef=float(_get(c, "router_aux_loss_coef", 0.0)))
    return f


def _qwen3_next(c: Any) -> dict[str, Any]:
    """Gated DeltaNet layers (``linear_attention``) beside gated softmax attention (queries and a
    per-feature output gate packed per head in q_proj), zero-centred RMSNorms (``1 + w``, as
    Gemma), QK-norm, partial rotary; a softmax mixture with a sigmoid-gated shared expert."""
    types = list(getattr(c, "layer_types", None) or [])
    if len(types) != c.num_hidden_layers:
        raise ValueError(f"qwen3_next: layer_types has {len(types)} entries for {c.num_hidden_layers} layers")
    unknown = sorted(set(types) - {"linear_attention", "full_attention"})
    if unknown:
        raise NotImplementedError(f"qwen3_next: layer types {unknown} are not supported")
    c_types = c.layer_types
    try:  # _decoder reads layer_types for windows; these are mixers, not windows
        c.layer_types = None
        f = _check_glu_silu(c, _decoder(c, allow_partial=True))
    finally:
        c.layer_types = c_types
    if c.linear_num_value_heads % c.linear_num_key_heads:
        raise ValueError("qwen3_next: linear_num_value_heads must be a multiple of linear_num_key_heads")
    if c.linear_key_head_dim != c.linear_value_head_dim:
        raise NotImplementedError(
            f"qwen3_next: linear_key_head_dim={c.linear_key_head_dim} differs from "
            f"linear_value_head_dim={c.linear_value_head_dim}; llmviz's hybrid stacks use one "
            "linear_head_dim for both")
    linear = tuple(i for i, t in enumerate(types) if t == "linear_attention")
    f.update(norm="rms_gemma", qk_norm="rms_gemma", qk_norm_eps=float(c.rms_norm_eps),
             qk_norm_scope="head", attn_output_gate=True, linear_layers=linear or None,
             linear_heads=c.linear_num_value_heads, linear_key_heads=c.linear_num_key_heads,
             linear_head_dim=c.linear_key_head_dim, linear_conv_kernel=c.linear_conv_kernel_dim)
    f = _qwen_moe(c, f)
    if f.get("n_experts"):
        f.update(shared_expert_d_ff=c.shared_expert_intermediate_size, shared_expert_gate=True)
    return f


#: model_type -> reader returning ModelConfig fields.
SUPPORTED: dict[str, Callable[[Any], dict[str, Any]]] = {
    "llama": _llama, "mistral": _mistral, "qwen2": _qwen2, "qwen3": _qwen3, "gemma": _gemma,
    "gemma2": _gemma2, "gemma3_text": _gemma3_text, "olmo2": _olmo2, "olmo3": _olmo3, "phi3": _phi3, "gpt2": _gpt2,
    "smollm3": _smollm3, "mixtral": _mixtral, "qwen2_moe": _qwen2_moe, "qwen3_moe": _qwen3_moe,
    "deepseek_v3": _deepseek_v3, "gpt_oss": _gpt_oss, "qwen3_next": _qwen3_next,
}
