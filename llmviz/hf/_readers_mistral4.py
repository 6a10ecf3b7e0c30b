"""Family reader for :func:`llmviz.hf.config_from_hf`: Mistral Small 4 (``mistral4``).

transformers' Mistral4 is DeepSeek-V3 (:func:`._readers_2025.mla`: latent attention, interleaved
or rotate-half RoPE on ``qk_rope_head_dim`` features, YaRN with DeepSeek's ``mscale``) with three
changes, each read here:

* the router scores experts by a **softmax** (no choice bias), limits each token to its
  ``topk_group`` best of ``n_group`` groups ranked by the sum of their two best probabilities,
  keeps ``num_experts_per_tok``, renormalises them when ``norm_topk_prob`` and multiplies by
  ``routed_scaling_factor`` (llmviz's :func:`~llmviz.moe.route` with ``score="softmax"`` and
  groups computes exactly this), plus ``n_shared_experts`` always-on experts;
* the first ``first_k_dense_replace`` layers have a dense SwiGLU of ``intermediate_size``;
* every query is multiplied by ``1 + beta * log(1 + floor(p / L))`` (``llama_4_scaling_beta``,
  ``original_max_position_embeddings`` of ``rope_parameters``): the layout's ``adapt`` installs
  :class:`~llmviz.attention.scaled_latent.ScaledQueryLatentAttention` when beta is not 0.

``rope_parameters`` also carries ``partial_rotary_factor = dr / (dn + dr)`` (transformers rotates
``head_dim * factor = dr`` features, all of the rope features, which is what the latent layer
rotates) and ``max_position_embeddings`` (not read by the rotation); both are checked and dropped.
"""

from __future__ import annotations

import copy
from typing import Any

from ..attention.scaled_latent import ScaledQueryLatentAttention
from ._layout import stores
from ._readers import attr
from ._readers_2025 import mla
from .rope import rope_parameters_of

__all__ = ["READERS_MISTRAL4", "mistral4"]


def _query_scale(c: Any) -> tuple[float, int]:
    """(beta, L) of the query scale, checked as transformers' attention needs them."""
    params = rope_parameters_of(c)
    beta, original = params.get("llama_4_scaling_beta"), params.get("original_max_position_embeddings")
    if isinstance(beta, bool) or not isinstance(beta, (int, float)):
        raise ValueError(f"mistral4: rope_parameters['llama_4_scaling_beta']={beta!r}; transformers' "
                         "Mistral4Attention multiplies the queries by it, so it must be a number (0 for none)")
    if isinstance(original, bool) or not isinstance(original, int) or original <= 0:
        raise ValueError(f"mistral4: rope_parameters['original_max_position_embeddings']={original!r}; the "
                         "query scale divides positions by it, so it must be a positive int")
    return float(beta), original


def _adapt(model: Any, c: Any) -> Any:
    beta, original = _query_scale(c)
    if beta != 0.0:
        for block in model.layers:
            block.self_attn = ScaledQueryLatentAttention.from_latent(block.self_attn, beta, original)
    return model


def _rope_read(c: Any) -> Any:
    """A copy of ``c`` whose rope_parameters hold only what the rotation reads."""
    params = rope_parameters_of(c)
    params.pop("llama_4_scaling_beta", None)
    params.pop("max_position_embeddings", None)
    factor = params.pop("partial_rotary_factor", None)
    dn, dr = c.qk_nope_head_dim, c.qk_rope_head_dim
    if factor is not None and int((dn + dr) * float(factor)) != dr:
        raise NotImplementedError(
            f"mistral4: partial_rotary_factor={factor} rotates {int((dn + dr) * float(factor))} of the "
            f"{dn + dr} query/key features; llmviz's latent attention rotates the qk_rope_head_dim={dr} "
            f"rope features (partial_rotary_factor={dr}/{dn + dr})")
    if params.get("rope_type", params.get("type", "default")) == "default":
        params.pop("original_max_position_embeddings", None)  # read by the query scale alone
    plain = copy.copy(c)
    plain.rope_parameters = params
    return plain


@stores(adapt=_adapt)
def mistral4(c: Any) -> dict[str, Any]:
    """Mistral Small 4 (module docstring)."""
    _query_scale(c)
    f = mla(_rope_read(c))
    first = int(attr(c, "first_k_dense_replace", 0) or 0)
    sparse = tuple(range(first, c.num_hidden_layers))
    if not sparse:
        return f
    n_shared = int(attr(c, "n_shared_experts", 0) or 0)
    if n_shared < 1:
        raise NotImplementedError(
            f"mistral4: n_shared_experts={n_shared!r}; transformers then builds a zero-width shared expert "
            "whose empty tensors llmviz's mixture does not hold")
    groups = int(attr(c, "n_group", 1) or 1)
    f.update(n_experts=c.n_routed_experts, experts_top_k=c.num_experts_per_tok,
             expert_d_ff=c.moe_intermediate_size, n_shared_experts=n_shared,
             shared_expert_d_ff=n_shared * c.moe_intermediate_size, moe_score="softmax",
             moe_normalize=bool(c.norm_topk_prob), moe_scaling=float(c.routed_scaling_factor),
             moe_bias_balancing=False, moe_layers=sparse,
             moe_n_groups=groups if groups > 1 else None,
             moe_topk_groups=int(c.topk_group) if groups > 1 else None)
    return f


#: model_type -> reader, for the family above.
READERS_MISTRAL4 = {"mistral4": mistral4}
