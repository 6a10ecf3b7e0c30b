"""Family readers for :func:`llmviz.hf.config_from_hf`: mixtures of experts routed as
DeepSeek-V3 routes (sigmoid scores, a choice bias, expert groups, shared experts) under
softmax attention: GLM-4.5 (``glm4_moe``), dots.llm1 (``dots1``) and Solar Open
(``solar_open``); FlexOlmo (``flex_olmo``), OLMoE's experts in OLMo 2's block; and ERNIE 4.5
MoE (``ernie4_5_moe``), whose softmax router adds a choice bias. The router's fields are read by
:func:`._readers_2025.sigmoid_experts`.
"""

from __future__ import annotations

from typing import Any

from ._layout import stores
from ._readers import attr, check_glu_silu, decoder, require
from ._readers_2025 import olmoe, sigmoid_experts, sparse_layer_types
from ._readers_dense import ernie4_5, exaone4

__all__ = ["READERS_MOE", "dots1", "ernie4_5_moe", "exaone_moe", "flex_olmo", "glm4_moe", "minimax_m2",
           "solar_open"]


def _head_qk_norm(c: Any, f: dict) -> dict:
    f.update(qk_norm="rms", qk_norm_eps=float(c.rms_norm_eps), qk_norm_scope="head")
    return f


@stores(mtp_layers=True)
def glm4_moe(c: Any) -> dict[str, Any]:
    """GLM-4.5: q/k/v biases (``attention_bias``, o_proj never), partial rotary (rotate-half),
    optional per-head QK-norm (``use_qk_norm``); dense feed-forwards for the first
    ``first_k_dense_replace`` layers, then DeepSeek-V3's mixture."""
    f = check_glu_silu(c, decoder(c, allow_partial=True))
    f["o_bias"] = False
    if attr(c, "use_qk_norm", False):
        _head_qk_norm(c, f)
    first = int(attr(c, "first_k_dense_replace", 0))
    return sigmoid_experts(c, f, tuple(range(first, c.num_hidden_layers)))


def solar_open(c: Any) -> dict[str, Any]:
    """Solar Open: Llama's attention (q/k/v biases from ``attention_bias``, o_proj never), every
    feed-forward GLM-4.5's mixture (the config has no dense width)."""
    f = check_glu_silu(c, decoder(c, d_ff=c.moe_intermediate_size))
    f["o_bias"] = False
    return sigmoid_experts(c, f, tuple(range(c.num_hidden_layers)))


def dots1(c: Any) -> dict[str, Any]:
    """dots.llm1: Qwen 3's attention (per-head QK-norm; sliding layers from ``layer_types``),
    dense feed-forwards for the first ``first_k_dense_replace`` layers, then DeepSeek-V3's
    mixture."""
    f = _head_qk_norm(c, check_glu_silu(c, decoder(c)))
    first = int(attr(c, "first_k_dense_replace", 0))
    return sigmoid_experts(c, f, tuple(range(first, c.num_hidden_layers)))


def flex_olmo(c: Any) -> dict[str, Any]:
    """FlexOlmo: OLMoE's experts and whole-projection QK-norm in OLMo 2's block (norms on the
    sublayer outputs, none before them)."""
    f = olmoe(c)
    f["placement"] = "post_sublayer"
    return f


def exaone_moe(c: Any) -> dict[str, Any]:
    """EXAONE-MoE (K-EXAONE): EXAONE 4's attention (per-head QK-norm; NoPE full layers when
    windowed) in a pre-norm block, DeepSeek-V3's mixture on the ``mlp_layer_types`` sparse layers."""
    f = exaone4(c)
    f["placement"] = "pre"
    return sigmoid_experts(c, f, sparse_layer_types(c))


@stores(renames={"mlp.gate.e_score_correction_bias": "mlp.e_score_correction_bias"})
def minimax_m2(c: Any) -> dict[str, Any]:
    """MiniMax-M2: QK-norm over the whole q and k projections (OLMo 2's), partial rotary
    (rotate-half); every feed-forward a mixture with sigmoid scores and a choice bias, the k kept
    scores always renormalised, no groups, no routed scaling, no shared expert."""
    f = check_glu_silu(c, decoder(c, allow_partial=True))
    f.update(qk_norm="rms", qk_norm_eps=float(c.rms_norm_eps), qk_norm_scope="all",
             n_experts=c.num_local_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.intermediate_size, moe_score="sigmoid", moe_normalize=True,
             moe_bias_balancing=True, router_aux_loss_coef=float(attr(c, "router_aux_loss_coef", 0.0)))
    return f


@stores(renames={"mlp.gate.e_score_correction_bias": "mlp.gate.moe_statics.e_score_correction_bias"},
        flattened=("mlp.gate.e_score_correction_bias",))
def ernie4_5_moe(c: Any) -> dict[str, Any]:
    """ERNIE 4.5 MoE: ERNIE 4.5's attention (interleaved RoPE); on every ``moe_layer_interval``-th
    layer from ``moe_layer_start_index`` to ``moe_layer_end_index`` a softmax top-k mixture whose
    choice adds a fixed per-expert bias (``moe_statics``, stored ``(1, E)``) to the probabilities
    while the weights renormalise the unbiased ones, plus ``moe_num_shared_experts`` shared
    experts; dense feed-forwards elsewhere."""
    require(c, "use_bias", (False, None), "biases on every projection and on lm_head; llmviz's "
            "output head and shared experts have none")
    f = ernie4_5(c)
    step, first, last = int(c.moe_layer_interval), int(c.moe_layer_start_index), int(c.moe_layer_end_index)
    sparse = tuple(i for i in range(c.num_hidden_layers) if (i + 1) % step == 0 and first <= i <= last)
    if not sparse or not c.num_experts:
        return f
    if float(attr(c, "moe_norm_min", 0.0)) >= c.num_experts_per_tok / c.num_experts:
        raise NotImplementedError(
            f"ernie4_5_moe: moe_norm_min={c.moe_norm_min} can exceed the k kept probabilities' sum "
            f"(at least k/E = {c.num_experts_per_tok / c.num_experts:g}); llmviz renormalises "
            "without a floor")
    n_shared = int(attr(c, "moe_num_shared_experts", 0))
    f.update(n_experts=c.num_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.moe_intermediate_size, n_shared_experts=n_shared,
             shared_expert_d_ff=n_shared * c.moe_intermediate_size if n_shared else None,
             moe_score="softmax", moe_normalize=True, moe_bias_balancing=True, moe_layers=sparse,
             router_aux_loss_coef=float(attr(c, "router_aux_loss_coef", 0.0)))
    return f


#: model_type -> reader, for the families above.
READERS_MOE = {"glm4_moe": glm4_moe, "solar_open": solar_open, "dots1": dots1, "flex_olmo": flex_olmo,
               "sarvam_moe": glm4_moe, "exaone_moe": exaone_moe,
               "minimax_m2": minimax_m2, "ernie4_5_moe": ernie4_5_moe}  # Sarvam-MoE runs transformers' GLM-4.5 classes
