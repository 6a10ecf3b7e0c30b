"""Single Hugging Face layers mapped onto llmviz modules, weight for weight.

Whole-model loading (:func:`llmviz.hf.from_hf`) covers the families in
:data:`llmviz.hf.SUPPORTED`; the functions here take one layer of a family whose full model
llmviz does not load yet, so that a chapter can compare the two on the same weights.

* :func:`gated_deltanet_from_hf`: a Qwen3-Next ``Qwen3NextGatedDeltaNet`` ->
  :class:`llmviz.attention.linear.GatedDeltaNet`.
"""

from __future__ import annotations

import torch

from ..attention.deltanet import GatedDeltaNet

__all__ = ["gated_deltanet_from_hf"]


def gated_deltanet_from_hf(layer) -> GatedDeltaNet:
    """Copy a Qwen3-Next linear-attention layer into a :class:`GatedDeltaNet` (exact).

    Qwen3-Next packs q, k, v and the output gate z into one projection whose rows are grouped
    by key head, ``[head 0: q | k | v of its value heads | z of its value heads, head 1: ...]``,
    and b, a likewise; llmviz keeps one projection each, so the rows are regrouped here.
    Refuses (``ValueError``) a layer with a convolution bias, which llmviz's layer has not.
    """
    needed = ("in_proj_qkvz", "in_proj_ba", "conv1d", "A_log", "dt_bias", "norm", "out_proj")
    missing = [n for n in needed if not hasattr(layer, n)]
    if missing:
        raise TypeError(f"gated_deltanet_from_hf expects a Qwen3NextGatedDeltaNet layer "
                        f"(e.g. model.model.layers[0].linear_attn); {type(layer).__name__} lacks "
                        f"{missing}")
    if layer.conv1d.bias is not None:
        raise ValueError("this layer's short convolution has a bias; llmviz's GatedDeltaNet has "
                         "none, so it cannot represent the layer exactly")
    Hk, Hv = layer.num_k_heads, layer.num_v_heads
    Dk, Dv = layer.head_k_dim, layer.head_v_dim
    r = Hv // Hk
    C = layer.hidden_size
    ours = GatedDeltaNet(C, Hv, Dk, Dv, n_k_heads=Hk, conv_kernel=layer.conv_kernel_size,
                         eps=layer.norm.variance_epsilon)
    w = layer.in_proj_qkvz.weight.detach().reshape(Hk, 2 * Dk + 2 * r * Dv, C)
    q, k, v, z = w.split([Dk, Dk, r * Dv, r * Dv], dim=1)
    ba = layer.in_proj_ba.weight.detach().reshape(Hk, 2 * r, C)
    b, a = ba.split([r, r], dim=1)
    with torch.no_grad():
        ours.q_proj.weight.copy_(q.reshape(Hk * Dk, C))
        ours.k_proj.weight.copy_(k.reshape(Hk * Dk, C))
        ours.v_proj.weight.copy_(v.reshape(Hv * Dv, C))
        ours.z_proj.weight.copy_(z.reshape(Hv * Dv, C))
        ours.b_proj.weight.copy_(b.reshape(Hv, C))
        ours.a_proj.weight.copy_(a.reshape(Hv, C))
        ours.conv.weight.copy_(layer.conv1d.weight)
        ours.A_log.copy_(layer.A_log)
        ours.dt_bias.copy_(layer.dt_bias)
        ours.norm_weight.copy_(layer.norm.weight)
        ours.o_proj.weight.copy_(layer.out_proj.weight)
    return ours.to(layer.out_proj.weight.dtype)
