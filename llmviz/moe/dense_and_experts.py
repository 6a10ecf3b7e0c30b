"""A dense feed-forward and a mixture of experts side by side (Gemma 4's 26B-A4B).

Every llmviz mixture replaces a layer's feed-forward. Gemma 4's MoE layers keep the dense one and
add a mixture beside it, both reading the residual stream ``x`` through norms of their own:

    y = N1(mlp(N0(x))) + N2(experts(N3(x); router(x)))

(``N0``: the block's ``pre_feedforward_layernorm``, ``N1``/``N2`` ``post_feedforward_layernorm_1``
/ ``_2``, ``N3`` ``pre_feedforward_layernorm_2``; the block then applies its own
``post_feedforward_layernorm`` to ``y``). The router (:class:`ScaledRMSRouter`) scores
``W (s * RMS(x) / sqrt(C))`` with a weightless RMS, a learned per-channel ``scale`` ``s``,
softmax over all experts, keeps the top k, renormalises them to sum to 1 and multiplies each by
its expert's learned ``per_expert_scale``. The experts are GeGLU
(:class:`~llmviz.moe.layer.Experts`, transformers' ``(E, 2F, C)``/``(E, C, F)`` tensors).

Shape letters: N tokens, C model width, E experts, k chosen per token, F expert width.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_positive, check_positive_int, check_tensor
from ..attention.shared_kv import head_rms
from ..norm import NormSpec
from .dispatch import combine, plan_dispatch
from .layer import Experts

__all__ = ["DenseAndExperts", "ScaledRMSRouter"]


class ScaledRMSRouter(nn.Module):
    """Top-k softmax routing of ``s * RMS(x) / sqrt(C)`` with per-expert output scales.

    Parameters: ``proj.weight`` ``(E, C)``, ``scale`` ``(C,)``, ``per_expert_scale`` ``(E,)``.
    ``forward(x (N, C)) -> (weights (N, k), indices (N, k))``.
    """

    def __init__(self, d_model: int, n_experts: int, top_k: int, *, eps: float = 1e-6) -> None:
        super().__init__()
        for name, v in (("d_model", d_model), ("n_experts", n_experts), ("top_k", top_k)):
            check_positive_int(v, name)
        if top_k > n_experts:
            raise ValueError(f"top_k={top_k} exceeds n_experts={n_experts}; choose at most n_experts")
        check_positive(eps, "eps")
        self.d_model, self.n_experts, self.top_k, self.eps = d_model, n_experts, top_k, float(eps)
        self.proj = nn.Linear(d_model, n_experts, bias=False)
        self.scale = nn.Parameter(torch.ones(d_model))
        self.per_expert_scale = nn.Parameter(torch.ones(n_experts))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        check_tensor(x, "x", ndim=2, floating=True)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has width {x.shape[-1]} but the router was built for d_model={self.d_model}")
        h = head_rms(x, self.eps) * self.scale * self.d_model ** -0.5
        probs = torch.softmax(self.proj(h), dim=-1, dtype=torch.float32)  # (N, E)
        weights, indices = torch.topk(probs, self.top_k, dim=-1)  # (N, k)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights * self.per_expert_scale[indices], indices

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_experts={self.n_experts}, top_k={self.top_k}"


class DenseAndExperts(nn.Module):
    """``N1(dense(N0(x))) + N2(experts(N3(x)))`` (module docstring), in a block's feed-forward
    slot with the block's own pre-feed-forward norm left out (it is ``pre_norm`` here).

    Args:
        dense: the dense feed-forward (a module ``(..., C) -> (..., C)``).
        d_model: C. n_experts, top_k, d_expert: E, k, F.
        activation: the experts' gate activation. eps: of the norms and the router's RMS.
    """

    def __init__(self, dense: nn.Module, d_model: int, n_experts: int, top_k: int, d_expert: int, *,
                 activation: str = "gelu_tanh", eps: float = 1e-6) -> None:
        super().__init__()
        if not isinstance(dense, nn.Module):
            raise TypeError(f"dense must be the dense feed-forward module, got {type(dense).__name__}")
        self.router = ScaledRMSRouter(d_model, n_experts, top_k, eps=eps)
        self.experts = Experts(n_experts, d_model, d_expert, activation_name=activation)
        spec = NormSpec("rms", eps)
        self.dense, self.d_model = dense, d_model
        self.pre_norm, self.post_norm_1 = spec.build(d_model), spec.build(d_model)
        self.pre_norm_2, self.post_norm_2 = spec.build(d_model), spec.build(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor(x, "x", min_ndim=1, floating=True)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has width {x.shape[-1]} but the layer was built for d_model={self.d_model}")
        flat = x.reshape(-1, self.d_model)  # (N, C)
        weights, indices = self.router(flat)
        plan = plan_dispatch(indices, self.router.n_experts)
        rows = self.experts(self.pre_norm_2(flat)[plan.tokens], plan.counts)  # (M, C)
        routed = combine(rows, plan, weights.to(rows.dtype), flat.shape[0]).view(x.shape)
        return self.post_norm_1(self.dense(self.pre_norm(x))) + self.post_norm_2(routed)
