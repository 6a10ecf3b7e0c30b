"""Building a model's blocks from its config: every module made in one place, from the registries.

:func:`block_modules` reads the config once and makes the block's modules (the token mixer from
:data:`llmviz.model.kinds.MIXER_KINDS` with the layer's mask from :meth:`ModelConfig.mask_for`,
the feed-forward from :data:`llmviz.ffn.FFNS` or a mixture of experts, the norms from the
config's :class:`llmviz.norm.NormSpec`);
:meth:`llmviz.model.block.TransformerBlock.from_config` hands them to ``from_modules``. Module names (``self_attn.q_proj``,
``mlp.down_proj``, ...) are those of Hugging Face Llama, which the loader of ``llmviz.hf``
relies on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from ..ffn import make_ffn
from .kinds import MIXER_KINDS, check_config
from .parts import BlockModules, block_norms

if TYPE_CHECKING:
    from .config import ModelConfig

__all__ = ["block_modules", "block_options", "build_mlp", "moe_kwargs"]


def moe_kwargs(c: ModelConfig) -> dict:
    """Keyword arguments of :class:`llmviz.moe.MoELayer` (without ``d_model``) for ``c``."""
    check_config(c, "moe_kwargs")
    return dict(
        n_experts=c.n_experts, top_k=c.experts_top_k, d_expert=c.expert_d_ff,
        n_shared=c.n_shared_experts, d_shared=c.shared_expert_d_ff,
        activation=c.activation or "silu", score=c.moe_score, normalize=c.moe_normalize,
        scaling=c.moe_scaling, n_groups=c.moe_n_groups, topk_groups=c.moe_topk_groups,
        bias_balancing=c.moe_bias_balancing, bias_rate=c.moe_bias_rate,
        capacity_factor=c.moe_capacity_factor, shared_gate=c.shared_expert_gate,
        router_bias=c.router_bias, expert_bias=c.expert_bias, glu=c.expert_glu,
        glu_alpha=c.expert_glu_alpha, glu_limit=c.expert_glu_limit,
    )


def build_mlp(c: ModelConfig, layer_idx: int) -> nn.Module:
    """The feed-forward of layer ``layer_idx``: a mixture of experts or the dense ``c.ffn``."""
    check_config(c, "build_mlp")
    if c.is_moe_layer(layer_idx):
        from ..moe import MoELayer

        return MoELayer(c.d_model, **moe_kwargs(c))
    return make_ffn(c.ffn, c.d_model, c.d_ff, activation=c.activation, bias=c.bias)


def block_modules(c: ModelConfig, layer_idx: int = 0, *, rope: nn.Module | None = None) -> BlockModules:
    """The modules of block ``layer_idx`` of a model built from ``c`` (``rope``: the layer's
    rotary module); :meth:`TransformerBlock.from_config` wraps them in a block."""
    check_config(c, "block_modules")
    mixer = c.mixer_for(layer_idx)
    return block_norms(
        c.norm_spec, c.d_model, c.placement, c.parallel,
        mixer=MIXER_KINDS.kind(mixer).build(c, layer_idx, rope), mlp=build_mlp(c, layer_idx),
        latent=mixer == "attention" and c.attn_kind == "mla",
    )


def block_options(c: ModelConfig) -> dict:
    """How the block wires its modules: placement, parallel, dropout and DeepNet's alpha."""
    check_config(c, "block_options")
    return dict(placement=c.placement, parallel=c.parallel, dropout=c.dropout,
                deepnorm_alpha=c.deepnorm_alpha)
