"""Family readers for :func:`llmviz.hf.config_from_hf`: the 2025-26 families.

Mixtures of experts (mixtral, qwen2_moe, qwen3_moe), latent attention with experts
(deepseek_v3), sinks with alternating windows and biased clamped-GLU experts (gpt_oss), and the
Gated DeltaNet hybrids (qwen3_next; qwen3_5_text and qwen3_5_moe_text). The shared field readers
and the earlier families are in :mod:`._readers`.
"""

from __future__ import annotations

from typing import Any

from ._readers import activation, attr, check_glu_silu, decoder, every_layer_window, mistral, qwen2, qwen3
from ._layout import stores
from .rope import rope_parameters_of, rope_spec

__all__ = ["READERS_2025", "deepseek_v3", "gpt_oss", "mixtral", "moe_layers", "qwen2_moe", "qwen3_5",
           "qwen3_moe", "qwen3_next", "qwen_moe", "olmoe", "sigmoid_experts", "mla", "glm4_moe_lite",
           "sparse_layer_types"]


def moe_layers(c: Any) -> tuple[int, ...]:
    """Sparse layers of the Qwen MoE families: not in mlp_only_layers, every decoder_sparse_step-th."""
    step = int(attr(c, "decoder_sparse_step", 1))
    only = set(attr(c, "mlp_only_layers", []))
    return tuple(i for i in range(c.num_hidden_layers) if i not in only and (i + 1) % step == 0)


def qwen_moe(c: Any, f: dict) -> dict:
    layers = moe_layers(c) if attr(c, "num_experts", 0) > 0 else ()
    if not layers:
        return f
    f.update(n_experts=c.num_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.moe_intermediate_size,  # Qwen3.5-MoE has no norm_topk_prob: it always renormalises
             moe_normalize=bool(attr(c, "norm_topk_prob", True)),
             moe_layers=layers, router_aux_loss_coef=float(attr(c, "router_aux_loss_coef", 0.0)))
    return f


def mixtral(c: Any) -> dict[str, Any]:
    """Mistral's attention, every feed-forward a softmax top-k mixture, always renormalised."""
    f = mistral(c)
    f.update(n_experts=c.num_local_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.intermediate_size, moe_normalize=True,
             router_aux_loss_coef=float(attr(c, "router_aux_loss_coef", 0.0)))
    return f


def qwen3_moe(c: Any) -> dict[str, Any]:
    f = qwen3(c)
    f["layer_windows"] = every_layer_window(c)  # Qwen3-MoE windows every layer when set
    return qwen_moe(c, f)


def qwen2_moe(c: Any) -> dict[str, Any]:
    """Qwen 2's attention; a softmax mixture plus one shared expert scaled by a sigmoid gate."""
    f = qwen_moe(c, qwen2(c))
    if f.get("n_experts"):
        f.update(shared_expert_d_ff=c.shared_expert_intermediate_size, shared_expert_gate=True)
    return f


@stores(mtp_layers=True)
def deepseek_v3(c: Any) -> dict[str, Any]:
    """Latent attention everywhere; dense feed-forwards for the first ``first_k_dense_replace``
    layers, then sigmoid-scored experts with a choice bias, group-limited top-k, routed scaling
    and shared experts. Multi-token-prediction layers are not part of the model (the loader
    skips their tensors)."""
    f = mla(c)
    first = int(attr(c, "first_k_dense_replace", 0))
    return sigmoid_experts(c, f, tuple(range(first, c.num_hidden_layers)))


def mla(c: Any) -> dict[str, Any]:
    """DeepSeek-V3's decoder with latent attention and dense SwiGLU feed-forwards (Youtu's
    whole model; the experts are added by :func:`sigmoid_experts`)."""
    dr = c.qk_rope_head_dim
    rope = rope_spec(rope_parameters_of(c), head_dim=dr, max_position_embeddings=c.max_position_embeddings,
                     where=f"{c.model_type} rope_parameters")
    f = dict(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_layers=c.num_hidden_layers,
        n_heads=c.num_attention_heads, head_dim=dr, d_ff=c.intermediate_size,
        max_seq_len=c.max_position_embeddings, position="rope", rope_base=rope.base,
        rope_scaling=rope.scaling, rope_layout="interleaved" if attr(c, "rope_interleave", True) else "half",
        norm="rms", norm_eps=float(c.rms_norm_eps), placement="pre", ffn="swiglu",
        activation=activation(c, "hidden_act"), bias=False,
        attn_bias=bool(getattr(c, "attention_bias", False)),
        tie_embeddings=bool(getattr(c, "tie_word_embeddings", False)),
        attn_kind="mla", q_lora_rank=attr(c, "q_lora_rank", None), kv_lora_rank=c.kv_lora_rank,
        qk_nope_head_dim=c.qk_nope_head_dim, qk_rope_head_dim=dr, v_head_dim=c.v_head_dim,
    )
    if f["activation"] != "silu":
        raise NotImplementedError(f"{c.model_type}: hidden_act={c.hidden_act!r}; this family uses silu")
    return f


@stores(mtp_layers=True)
def glm4_moe_lite(c: Any) -> dict[str, Any]:
    """GLM-4-MoE-Lite (``glm4_moe_lite``): DeepSeek-V3's latent attention and router; its sparse
    layers are those ``mlp_layer_types`` marks ``"sparse"``."""
    return sigmoid_experts(c, mla(c), sparse_layer_types(c))


def sparse_layer_types(c: Any) -> tuple[int, ...]:
    """Layers ``mlp_layer_types`` marks ``"sparse"`` (the rest are dense feed-forwards)."""
    types = list(attr(c, "mlp_layer_types", []))
    if len(types) != c.num_hidden_layers or set(types) - {"dense", "sparse"}:
        raise ValueError(f"{c.model_type}: mlp_layer_types={types!r}; expected 'dense' or 'sparse' "
                         f"for each of the {c.num_hidden_layers} layers")
    return tuple(i for i, t in enumerate(types) if t == "sparse")


def sigmoid_experts(c: Any, f: dict, sparse: tuple[int, ...]) -> dict:
    """DeepSeek-V3's mixture on the ``sparse`` layers: sigmoid scores with a choice bias,
    group-limited top-k (``n_group``, ``topk_group``), ``routed_scaling_factor``, and
    ``n_shared_experts`` always-on experts (GLM-4.5, dots.llm1 and Solar Open route alike)."""
    if not sparse:
        return f
    groups = int(attr(c, "n_group", 1))
    n_shared = int(attr(c, "n_shared_experts", attr(c, "num_shared_experts", 0)))  # EXAONE-MoE: num_*
    f.update(
        n_experts=attr(c, "n_routed_experts", None) or c.num_experts, experts_top_k=c.num_experts_per_tok,
        expert_d_ff=c.moe_intermediate_size, n_shared_experts=n_shared,
        shared_expert_d_ff=n_shared * c.moe_intermediate_size if n_shared else None,
        moe_score="sigmoid", moe_normalize=bool(c.norm_topk_prob),
        moe_scaling=float(c.routed_scaling_factor), moe_bias_balancing=True, moe_layers=sparse,
        moe_n_groups=groups if groups > 1 else None,
        moe_topk_groups=int(c.topk_group) if groups > 1 else None,
    )
    return f


#: gpt-oss's GLU slope and clamp where the config does not state them: transformers releases
#: whose config lacks ``swiglu_alpha`` / ``swiglu_limit`` (5.17, for one) hard-code 1.702 and
#: 7.0 in ``GptOssExperts``, the values of the released checkpoints (their config.json states
#: ``swiglu_limit: 7.0``); later releases read both from the config.
GPT_OSS_ALPHA_UNSTATED = 1.702
GPT_OSS_LIMIT_UNSTATED = 7.0


def gpt_oss(c: Any) -> dict[str, Any]:
    """Biased attention with learned sinks, sliding and full layers alternating (layer_types),
    YaRN; every feed-forward a mixture whose router has a bias and whose experts are biased,
    with gpt-oss's clamped GLU (``expert_glu='clamped'``)."""
    f = decoder(c)
    f.update(attn_sinks=True, n_experts=c.num_local_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.intermediate_size, moe_normalize=True, router_bias=True,
             expert_bias=True, expert_glu="clamped",
             expert_glu_alpha=float(attr(c, "swiglu_alpha", GPT_OSS_ALPHA_UNSTATED)),
             expert_glu_limit=float(attr(c, "swiglu_limit", GPT_OSS_LIMIT_UNSTATED)), activation=None,
             router_aux_loss_coef=float(attr(c, "router_aux_loss_coef", 0.0)))
    return f


def qwen3_next(c: Any, rope_params: dict | None = None, d_ff: int | None = None) -> dict[str, Any]:
    """Gated DeltaNet layers (``linear_attention``) beside gated softmax attention (queries and a
    per-feature output gate packed per head in q_proj), zero-centred RMSNorms (``1 + w``, as
    Gemma), QK-norm, partial rotary; a softmax mixture with a sigmoid-gated shared expert."""
    types = list(getattr(c, "layer_types", None) or [])
    if len(types) != c.num_hidden_layers:
        raise ValueError(f"{c.model_type}: layer_types has {len(types)} entries for {c.num_hidden_layers} layers")
    unknown = sorted(set(types) - {"linear_attention", "full_attention"})
    if unknown:
        raise NotImplementedError(f"{c.model_type}: layer types {unknown} are not supported")
    c_types = c.layer_types
    try:  # decoder reads layer_types for windows; these are mixers, not windows
        c.layer_types = None
        f = check_glu_silu(c, decoder(c, allow_partial=True, rope_params=rope_params, d_ff=d_ff))
    finally:
        c.layer_types = c_types
    if c.linear_num_value_heads % c.linear_num_key_heads:
        raise ValueError(f"{c.model_type}: linear_num_value_heads must be a multiple of linear_num_key_heads")
    if c.linear_key_head_dim != c.linear_value_head_dim:
        raise NotImplementedError(
            f"{c.model_type}: linear_key_head_dim={c.linear_key_head_dim} differs from "
            f"linear_value_head_dim={c.linear_value_head_dim}; llmviz's hybrid stacks use one "
            "linear_head_dim for both")
    linear = tuple(i for i, t in enumerate(types) if t == "linear_attention")
    f.update(norm="rms_gemma", qk_norm="rms_gemma", qk_norm_eps=float(c.rms_norm_eps),
             qk_norm_scope="head", attn_output_gate=True, linear_layers=linear or None,
             linear_heads=c.linear_num_value_heads, linear_key_heads=c.linear_num_key_heads,
             linear_head_dim=c.linear_key_head_dim, linear_conv_kernel=c.linear_conv_kernel_dim)
    f = qwen_moe(c, f)
    if f.get("n_experts"):
        f.update(shared_expert_d_ff=c.shared_expert_intermediate_size, shared_expert_gate=True)
    return f


def qwen3_5(c: Any) -> dict[str, Any]:
    """Qwen3.5's text model (``qwen3_5_text``, dense feed-forwards; ``qwen3_5_moe_text``,
    Qwen3-Next's experts): Qwen3-Next's stack, its linear-attention projections stored apart
    (``in_proj_qkv``, ``in_proj_z``, ``in_proj_b``, ``in_proj_a``). Its multimodal RoPE gives each
    frequency the temporal, height or width position of a token; for text all three are the
    token's index, so on text it is plain partial rotary, which is what llmviz computes."""
    params = rope_parameters_of(c)
    section = params.pop("mrope_section", None)
    params.pop("mrope_interleaved", None)
    if section is not None and (not isinstance(section, (list, tuple)) or len(section) != 3
                                or any(not isinstance(n, int) or n < 0 for n in section)):
        raise ValueError(f"{c.model_type}: mrope_section={section!r}; expected three counts of "
                         "frequencies (temporal, height, width)")
    dense = getattr(c, "intermediate_size", None)  # Qwen3.5-MoE has none: every layer is a mixture
    f = qwen3_next(c, rope_params=params, d_ff=dense or attr(c, "moe_intermediate_size", None))
    if dense is None and f.get("moe_layers") != tuple(range(c.num_hidden_layers)):
        raise ValueError(f"{c.model_type}: no intermediate_size, but not every layer is a mixture")
    return f


def olmoe(c: Any) -> dict[str, Any]:
    """OLMoE: Llama's pre-norm block, QK-norm over the whole q and k projections (OLMo 2's),
    every feed-forward a softmax top-k mixture (``norm_topk_prob`` renormalises)."""
    if attr(c, "clip_qkv", None) is not None:
        raise NotImplementedError(f"olmoe: clip_qkv={c.clip_qkv!r} clamps q, k and v; llmviz has no clamp")
    f = check_glu_silu(c, decoder(c))
    f.update(qk_norm="rms", qk_norm_eps=float(c.rms_norm_eps), qk_norm_scope="all",
             n_experts=c.num_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.intermediate_size, moe_normalize=bool(attr(c, "norm_topk_prob", False)),
             router_aux_loss_coef=float(attr(c, "router_aux_loss_coef", 0.0)))
    return f


#: model_type -> reader, for the families above.
READERS_2025 = {"mixtral": mixtral, "qwen2_moe": qwen2_moe, "qwen3_moe": qwen3_moe,
                "deepseek_v3": deepseek_v3, "gpt_oss": gpt_oss, "qwen3_next": qwen3_next,
                "qwen3_5_text": qwen3_5, "qwen3_5_moe_text": qwen3_5, "olmoe": olmoe,
                "sarvam_mla": deepseek_v3, "glm4_moe_lite": glm4_moe_lite, "youtu": mla}  # Sarvam-MLA runs transformers' DeepSeek-V3 classes
