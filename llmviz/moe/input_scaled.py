"""A mixture whose experts scale their *input* by the routing weight (Llama 4).

Every llmviz mixture (:class:`~llmviz.moe.MoELayer`) weighs each chosen expert's output,
``y = sum_j w_j E_j(x)``. Llama 4 multiplies the input instead, ``y = sum_j E_j(w_j x)``, with
``w_j = sigmoid(logit_j)`` of the top-k logits (a shared expert added as usual). A gated expert is
not linear in its input, ``E(w x) != w E(x)``, so the two differ for any weight but 1 (and 0).

:class:`InputScaledMoE` is a :class:`~llmviz.moe.MoELayer` (same tensors and names, same
routing: build it with ``score="sigmoid", normalize=False``) whose forward scales the rows it
sends to the experts and adds their outputs unweighted.
"""

from __future__ import annotations

import torch

from .._checks import check_flags, check_tensor
from .dispatch import combine, plan_dispatch
from .layer import MoEInfo, MoELayer

__all__ = ["InputScaledMoE"]


class InputScaledMoE(MoELayer):
    """``y = shared(x) + sum_j E_j(w_j x)`` over the chosen experts (module docstring); the
    arguments are :class:`~llmviz.moe.MoELayer`'s, without a capacity (no token is dropped)."""

    def __init__(self, d_model: int, **kwargs) -> None:
        super().__init__(d_model, **kwargs)
        if self.capacity_factor is not None:
            raise ValueError("InputScaledMoE drops no token: build it with capacity_factor=None")

    def forward(self, x: torch.Tensor, *, return_info: bool = False):
        check_flags(return_info=return_info)
        check_tensor(x, "x", min_ndim=1, floating=True)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has width {x.shape[-1]} but the layer was built for d_model={self.d_model}")
        flat = x.reshape(-1, self.d_model)  # (N, C)
        N = flat.shape[0]
        routing = self.gate(flat)
        plan = plan_dispatch(routing.indices, self.n_experts)
        w = routing.weights.reshape(-1)[plan.assignment].to(flat.dtype)  # (M,) weight of each row
        rows = self.experts(flat[plan.tokens] * w[:, None], plan.counts)  # (M, C)
        out = combine(rows, plan, torch.ones_like(routing.weights), N)
        if self.shared_experts is not None:
            out = out + self.shared_experts(flat)
        out = out.view(x.shape)
        return (out, MoEInfo(routing, plan)) if return_info else out
