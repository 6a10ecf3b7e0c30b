"""Family readers for :func:`llmviz.hf.config_from_hf`: families whose components joined the
library with them.

HunYuan (``hunyuan_v1_dense``, ``hunyuan_v1_moe``): Llama's block with the QK-norm on the rotated
heads (attention kind ``"qk_norm_after_rope"``) and HunYuan's fixed NTK-alpha RoPE base; the MoE
model adds a softmax top-k mixture and one shared expert on every layer. Apertus
(``apertus``): Qwen 3's attention and a plain MLP with the trainable xIELU activation
(feed-forward kind ``"xielu"``). DeepSeek-V2 (``deepseek_v2``): DeepSeek-V3's latent attention
with softmax-scored experts, never renormalised (greedy top-k, or top-k inside the groups whose
best expert scores highest). Phi-3.5-MoE (``phimoe``): Mixtral's block with LayerNorms and
SparseMixer routing (:mod:`llmviz.moe.sparsemixer`).
The shared field readers are in :mod:`._readers`.
"""

from __future__ import annotations

from typing import Any

from ..moe.group_max import BestInGroupRouter
from ..moe.sparsemixer import SparseMixerRouter
from ._layout import stores
from ._readers import attr, check_glu_silu, decoder, require
from ._readers_2025 import mixtral, mla
from .rope import rope_parameters_of

__all__ = ["READERS_2026", "apertus", "deepseek_v2", "hunyuan_dense", "hunyuan_moe", "ntk_alpha_rope"]


def ntk_alpha_rope(c: Any) -> dict[str, Any]:
    """HunYuan's RoPE parameters: labelled ``"dynamic"`` with a fixed ``alpha``, which only
    stretches the base, ``theta * alpha ** (D / (D - 2))``, for every length (transformers'
    ``ntk_alpha``); read as a plain base. Any other RoPE is read as is."""
    params = rope_parameters_of(c)
    alpha = params.get("alpha")
    if params.get("rope_type", params.get("type")) != "dynamic" or not alpha:
        return params
    D = attr(c, "head_dim", c.hidden_size // c.num_attention_heads)
    return {"rope_type": "default", "rope_theta": float(params["rope_theta"]) * float(alpha) ** (D / (D - 2))}


_HUNYUAN = {"self_attn.q_norm.weight": "self_attn.query_layernorm.weight",
            "self_attn.k_norm.weight": "self_attn.key_layernorm.weight"}


@stores(renames=_HUNYUAN)
def hunyuan_dense(c: Any) -> dict[str, Any]:
    """HunYuan dense: Llama's block; q/k/v/o biases from ``attention_bias``; per-head RMS
    QK-norm applied after RoPE (``query_layernorm``, ``key_layernorm``)."""
    f = check_glu_silu(c, decoder(c, rope_params=ntk_alpha_rope(c)))
    f.update(attn_kind="qk_norm_after_rope", qk_norm="rms", qk_norm_eps=float(c.rms_norm_eps),
             qk_norm_scope="head")
    return f


@stores(renames={**_HUNYUAN, "mlp.gate.weight": "mlp.gate.wg.weight", "mlp.shared_experts": "mlp.shared_mlp"})
def hunyuan_moe(c: Any) -> dict[str, Any]:
    """HunYuan MoE: HunYuan's attention; every feed-forward a softmax top-k mixture (always
    renormalised) of ``intermediate_size``-wide experts plus one shared expert of that width."""
    for name in ("num_experts", "moe_topk"):
        if not isinstance(getattr(c, name), int):
            raise NotImplementedError(f"{c.model_type}: {name}={getattr(c, name)!r} varies by layer; "
                                      "llmviz's mixtures share one setting")
    f = hunyuan_dense(c)
    f.update(n_experts=c.num_experts, experts_top_k=c.moe_topk, expert_d_ff=c.intermediate_size,
             n_shared_experts=1, shared_expert_d_ff=c.intermediate_size, moe_normalize=True)
    return f


_APERTUS_NORMS = {"attention_layernorm": "attn_norm", "feedforward_layernorm": "ffn_norm"}


@stores(norms=_APERTUS_NORMS, renames={"mlp.act": "mlp.act_fn"})
def apertus(c: Any) -> dict[str, Any]:
    """Apertus: Llama's attention with per-head RMS QK-norm before RoPE (Qwen 3's), q/k/v/o
    biases from ``attention_bias``; a bias-free plain MLP ``down(xielu(up(x)))`` whose xIELU
    scalars (``alpha_p``, ``alpha_n``, ``beta``, ``eps``) are stored per layer."""
    require(c, "hidden_act", "xielu", "Apertus's MLP is read with its xIELU activation")
    c_act = c.hidden_act
    try:  # decoder() reads hidden_act for the GLU families; this MLP has its own kind
        c.hidden_act = "silu"
        f = decoder(c)
    finally:
        c.hidden_act = c_act
    f.update(ffn="xielu", activation=None, qk_norm="rms", qk_norm_eps=float(c.rms_norm_eps),
             qk_norm_scope="head")
    return f


def _best_in_group(model: Any, c: Any) -> Any:
    """DeepSeek-V2's group-limited routers rank groups by their best expert."""
    if attr(c, "topk_method", "greedy") == "group_limited_greedy":
        for block in model.layers:
            if block.is_moe:
                block.mlp.gate = BestInGroupRouter.from_router(block.mlp.gate)
    return model


@stores(adapt=_best_in_group)
def deepseek_v2(c: Any) -> dict[str, Any]:
    """DeepSeek-V2: latent attention (interleaved RoPE, YaRN's attention correction); dense
    feed-forwards for the first ``first_k_dense_replace`` layers, then a softmax top-k mixture
    whose weights are the chosen probabilities times ``routed_scaling_factor`` (never
    renormalised: transformers ignores ``norm_topk_prob`` here), plus ``n_shared_experts``.
    ``topk_method="greedy"`` (V2-Lite, Coder-V2-Lite) picks among all experts;
    ``"group_limited_greedy"`` (V2, 236B) only inside the ``topk_group`` of ``n_group`` groups
    whose best probability is highest: the config holds the groups (``moe_n_groups``) and the
    built model's routers are :class:`~llmviz.moe.group_max.BestInGroupRouter` (DeepSeek-V3's
    router ranks groups by their two best scores instead)."""
    method = attr(c, "topk_method", "greedy")
    if method not in ("greedy", "group_limited_greedy"):
        raise NotImplementedError(
            f"deepseek_v2: topk_method={method!r} is not supported; llmviz reads 'greedy' and "
            "'group_limited_greedy'")
    f = mla(c)
    f["rope_layout"] = "interleaved"  # complex multiplication on (even, odd) pairs
    first = int(attr(c, "first_k_dense_replace", 0))
    sparse = tuple(range(first, c.num_hidden_layers))
    if not sparse:
        return f
    if c.n_routed_experts is None or c.num_experts_per_tok is None:
        raise ValueError(
            f"deepseek_v2: n_routed_experts={c.n_routed_experts!r}, num_experts_per_tok="
            f"{c.num_experts_per_tok!r}: a config with mixture layers needs both; set them (as a "
            "released checkpoint's config does) or first_k_dense_replace=num_hidden_layers")
    n_shared = int(attr(c, "n_shared_experts", 0))
    f.update(n_experts=c.n_routed_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.moe_intermediate_size, n_shared_experts=n_shared,
             shared_expert_d_ff=n_shared * c.moe_intermediate_size if n_shared else None,
             moe_score="softmax", moe_normalize=False, moe_scaling=float(c.routed_scaling_factor),
             moe_layers=sparse)
    if method == "group_limited_greedy":
        if c.n_group is None or c.topk_group is None:
            raise ValueError(f"deepseek_v2: topk_method='group_limited_greedy' with n_group={c.n_group!r}, "
                             f"topk_group={c.topk_group!r}: the router needs both (DeepSeek-V2: 8 and 3)")
        f.update(moe_n_groups=int(c.n_group), moe_topk_groups=int(c.topk_group))
    return f


def _sparsemixer(model: Any, c: Any) -> Any:
    """Phi-3.5-MoE's routers: SparseMixer with tolerance ``router_jitter_noise``."""
    for block in model.layers:
        block.mlp.gate = SparseMixerRouter.from_router(block.mlp.gate, float(c.router_jitter_noise))
    return model


@stores(adapt=_sparsemixer, renames={"mlp.gate.weight": "mlp.router.weight"})
def phimoe(c: Any) -> dict[str, Any]:
    """Phi-3.5-MoE: Mixtral's block with LayerNorms (``rms_norm_eps`` is their epsilon), q/k/v/o
    biases from ``attention_bias``, and SparseMixer routing of two experts per token
    (:class:`~llmviz.moe.sparsemixer.SparseMixerRouter`, tolerance ``router_jitter_noise``)."""
    require(c, "lm_head_bias", (False, None), "the output head has a bias; llmviz's head has none")
    require(c, "num_experts_per_tok", 2, "SparseMixer picks exactly two experts")
    if not attr(c, "router_jitter_noise", 0.0) > 0:
        raise ValueError(f"phimoe: router_jitter_noise={c.router_jitter_noise!r}; SparseMixer's "
                         "tolerance must be positive (Phi-3.5-MoE: 0.01)")
    f = mixtral(c)
    f.update(norm="layer", attn_bias=bool(attr(c, "attention_bias", False)))
    return f


#: model_type -> reader, for the families above.
READERS_2026 = {"hunyuan_v1_dense": hunyuan_dense, "hunyuan_v1_moe": hunyuan_moe, "apertus": apertus,
                "deepseek_v2": deepseek_v2, "phimoe": phimoe}
