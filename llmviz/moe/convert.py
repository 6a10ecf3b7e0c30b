"""Copy a Hugging Face transformers 5 sparse MoE block into a :class:`~llmviz.moe.MoELayer`.

Supported: ``MixtralSparseMoeBlock`` (softmax, always renormalised), ``Qwen3MoeSparseMoeBlock``
(softmax, renormalised iff ``norm_topk_prob``) and ``DeepseekV3MoE`` (sigmoid scores, choice
bias ``e_score_correction_bias``, group-limited routing, ``routed_scaling_factor``, shared
experts). The weights map one to one, since the layer keeps transformers 5's names and layouts:

==================================  =====================================
Hugging Face                        llmviz
==================================  =====================================
``gate.weight`` ``(E, C)``          ``gate.weight``
``gate.e_score_correction_bias``    ``gate.e_score_correction_bias``
``experts.gate_up_proj``            ``experts.gate_up_proj`` ``(E, 2F, C)``
``experts.down_proj``               ``experts.down_proj`` ``(E, C, F)``
``shared_experts.{gate,up,down}``   ``shared_experts.{gate,up,down}_proj``
==================================  =====================================

Nothing here imports transformers: the block is read through its attributes, and anything this
layer cannot represent (router jitter in training, an unknown activation) is refused by name.
"""

from __future__ import annotations

import torch
from torch import nn

from ..ffn import FFN_ACTIVATIONS
from .layer import MoELayer

__all__ = ["HF_MOE_BLOCKS", "moe_from_hf"]

#: Class names of the Hugging Face blocks :func:`moe_from_hf` reads.
HF_MOE_BLOCKS = ("MixtralSparseMoeBlock", "Qwen3MoeSparseMoeBlock", "DeepseekV3MoE")


def _activation(experts: nn.Module) -> str:
    config = getattr(experts, "config", None)
    name = getattr(config, "hidden_act", "silu")
    if name not in FFN_ACTIVATIONS:
        raise ValueError(f"the experts use activation {name!r}, which llmviz does not have "
                         f"(it has {FFN_ACTIVATIONS})")
    return name


@torch.no_grad()
def moe_from_hf(block: nn.Module) -> MoELayer:
    """A :class:`MoELayer` computing what ``block`` computes, on its device and in its dtype.

    Args:
        block: one of :data:`HF_MOE_BLOCKS`.

    Returns:
        The layer in eval mode with every weight copied (router logits equal too).
    """
    kind = type(block).__name__
    if kind not in HF_MOE_BLOCKS:
        raise TypeError(f"block must be one of {HF_MOE_BLOCKS}, got {kind}")
    gate, experts = block.gate, block.experts
    E, C = gate.weight.shape
    F_ = experts.down_proj.shape[-1]
    opts: dict = {"activation": _activation(experts)}
    if kind == "MixtralSparseMoeBlock":
        if getattr(block, "jitter_noise", 0) and block.training:
            raise ValueError("router jitter noise (training mode) is not represented; call block.eval()")
        opts.update(score="softmax", normalize=True)
    elif kind == "Qwen3MoeSparseMoeBlock":
        opts.update(score="softmax", normalize=bool(gate.norm_topk_prob))
    else:
        n_groups, topk_groups = gate.num_group, gate.topk_group
        grouped = n_groups is not None and n_groups > 1
        shared = block.shared_experts
        opts.update(
            score="sigmoid", normalize=bool(gate.norm_topk_prob), scaling=float(gate.routed_scaling_factor),
            n_groups=n_groups if grouped else None, topk_groups=topk_groups if grouped else None,
            bias_balancing=True, d_shared=shared.down_proj.weight.shape[-1],
        )
    layer = MoELayer(C, E, gate.top_k, F_, **opts)
    layer.to(device=gate.weight.device, dtype=experts.gate_up_proj.dtype)
    layer.gate.weight.copy_(gate.weight)
    layer.experts.gate_up_proj.copy_(experts.gate_up_proj)
    layer.experts.down_proj.copy_(experts.down_proj)
    if kind == "DeepseekV3MoE":
        layer.gate.e_score_correction_bias = gate.e_score_correction_bias.detach().clone().float()
        layer.shared_experts.load_state_dict(block.shared_experts.state_dict())
    return layer.eval()
