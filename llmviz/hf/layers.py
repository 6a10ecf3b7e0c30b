"""Single Hugging Face layers mapped onto llmviz modules, weight for weight.

Whole-model loading (:func:`llmviz.hf.from_hf`) covers the families in
:data:`llmviz.hf.SUPPORTED`; the functions here take one layer, so that a chapter can compare
the two on the same weights.

* :func:`gated_deltanet_from_hf`: a Qwen3-Next ``Qwen3NextGatedDeltaNet`` ->
  :class:`llmviz.attention.linear.GatedDeltaNet`.
"""

from __future__ import annotations

import torch

from ..attention.deltanet import GatedDeltaNet

__all__ = ["gated_deltanet_from_hf", "split_qkvz", "split_ba"]


def split_qkvz(w: torch.Tensor, n_k_heads: int, n_v_heads: int, d_k: int, d_v: int):
    """Qwen3-Next's packed ``in_proj_qkvz`` weight ``(Hk (2 Dk + 2 r Dv), C)``, rows grouped by
    key head as ``[q | k | v of its r = Hv / Hk value heads | z of them]``, as four separate
    weights ``q (Hk Dk, C)``, ``k (Hk Dk, C)``, ``v (Hv Dv, C)``, ``z (Hv Dv, C)``."""
    r = n_v_heads // n_k_heads
    rows = 2 * d_k + 2 * r * d_v
    if w.dim() != 2 or w.shape[0] != n_k_heads * rows:
        raise ValueError(f"in_proj_qkvz has shape {tuple(w.shape)}; {n_k_heads} key heads of "
                         f"{rows} rows each were expected from the config")
    q, k, v, z = w.reshape(n_k_heads, rows, -1).split([d_k, d_k, r * d_v, r * d_v], dim=1)
    C = w.shape[1]
    return (q.reshape(-1, C), k.reshape(-1, C), v.reshape(-1, C), z.reshape(-1, C))


def split_ba(w: torch.Tensor, n_k_heads: int, n_v_heads: int):
    """Qwen3-Next's packed ``in_proj_ba`` weight ``(Hk 2 r, C)`` as ``b (Hv, C)``, ``a (Hv, C)``."""
    r = n_v_heads // n_k_heads
    if w.dim() != 2 or w.shape[0] != 2 * n_v_heads:
        raise ValueError(f"in_proj_ba has shape {tuple(w.shape)}; {2 * n_v_heads} rows were expected")
    b, a = w.reshape(n_k_heads, 2 * r, -1).split([r, r], dim=1)
    return b.reshape(-1, w.shape[1]), a.reshape(-1, w.shape[1])


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
    C = layer.hidden_size
    ours = GatedDeltaNet(C, Hv, Dk, Dv, n_k_heads=Hk, conv_kernel=layer.conv_kernel_size,
                         eps=layer.norm.variance_epsilon)
    q, k, v, z = split_qkvz(layer.in_proj_qkvz.weight.detach(), Hk, Hv, Dk, Dv)
    b, a = split_ba(layer.in_proj_ba.weight.detach(), Hk, Hv)
    with torch.no_grad():
        ours.q_proj.weight.copy_(q)
        ours.k_proj.weight.copy_(k)
        ours.v_proj.weight.copy_(v)
        ours.z_proj.weight.copy_(z)
        ours.b_proj.weight.copy_(b)
        ours.a_proj.weight.copy_(a)
        ours.conv.weight.copy_(layer.conv1d.weight)
        ours.A_log.copy_(layer.A_log)
        ours.dt_bias.copy_(layer.dt_bias)
        ours.norm_weight.copy_(layer.norm.weight)
        ours.o_proj.weight.copy_(layer.out_proj.weight)
    return ours.to(layer.out_proj.weight.dtype)
