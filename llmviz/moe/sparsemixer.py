"""SparseMixer routing at inference (Phi-3.5-MoE, ``phimoe``): two picks, each weighted by a
softmax over only the experts close to it.

With router logits ``z`` (one row per token) and a relative tolerance ``eps``
(``router_jitter_noise``, 0.01 in Phi-3.5-MoE):

1. the first pick is ``i = argmax z``; its weight is a softmax over the experts whose logit lies
   within ``2 eps`` of ``z_i`` *relative to* ``max(|z_e|, z_i)``: expert ``e`` takes part when
   ``(z_i - z_e) / max(|z_e|, z_i) <= 2 eps``; the weight is that softmax's entry for ``i``;
2. the second pick is the argmax of ``z`` with ``i`` removed, ``j``; its weight is the same rule
   around ``z_j``, over the experts other than ``i``.

The weights are not renormalised and need not sum to 1: a pick far ahead of every other expert
gets weight 1, a pick in a tight cluster less. (Training samples the picks with Gumbel noise and
back-propagates through Heun's third-order estimate; that is not part of the forward pass a
checkpoint is evaluated with, and :class:`SparseMixerRouter` computes the forward pass only.)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._checks import check_positive, check_real, check_tensor
from .router import Router, Routing

__all__ = ["SparseMixerRouter", "sparsemixer_route"]


def _near(z: torch.Tensor, best: torch.Tensor, eps: float) -> torch.Tensor:
    """``(N, E)`` bool: experts within ``2 eps`` of ``best`` (relative), the rule of step 1."""
    factor = z.abs().clamp(min=best)
    return ~((best - z) / factor > 2 * eps)  # written as the reference does: 0/0 keeps the expert


def sparsemixer_route(logits: torch.Tensor, eps: float) -> Routing:
    """SparseMixer's two picks and their weights from ``logits (N, E)`` (module docstring)."""
    check_tensor(logits, "logits", ndim=2, floating=True)
    check_real(eps, "eps")
    check_positive(eps, "eps")
    N, E = logits.shape
    if E < 2:
        raise ValueError(f"SparseMixer picks two experts; got E={E} experts")
    first_logit, first = logits.max(dim=-1, keepdim=True)  # (N, 1)
    gates = logits.masked_fill(~_near(logits, first_logit, eps), float("-inf"))
    w1 = torch.softmax(gates, dim=-1).gather(1, first)
    rest = logits.scatter(1, first, float("-inf"))
    second_logit, second = rest.max(dim=-1, keepdim=True)
    gates2 = rest.masked_fill(~_near(logits, second_logit, eps), float("-inf"))
    w2 = torch.softmax(gates2, dim=-1).gather(1, second)
    probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    return Routing(logits=logits, probs=probs, indices=torch.cat([first, second], 1),
                   weights=torch.cat([w1, w2], 1))


class SparseMixerRouter(Router):
    """A :class:`~llmviz.moe.Router` (same ``gate.weight``) routing two experts per token by
    :func:`sparsemixer_route` with tolerance ``eps``; built from a top-2 router by
    :meth:`from_router`."""

    @classmethod
    def from_router(cls, router: Router, eps: float) -> "SparseMixerRouter":
        """A SparseMixer router sharing ``router``'s weight (``router`` must pick two experts,
        with no logit bias and no choice bias)."""
        if not isinstance(router, Router):
            raise TypeError(f"router must be a llmviz.moe.Router, got {type(router).__name__}")
        if router.top_k != 2 or router.bias is not None or router.e_score_correction_bias is not None \
                or router.n_groups is not None:
            raise ValueError(f"SparseMixer replaces a plain top-2 router; this one has top_k="
                             f"{router.top_k}, logit bias {router.bias is not None}, choice bias "
                             f"{router.e_score_correction_bias is not None}, n_groups={router.n_groups}")
        check_positive(eps, "eps")
        with torch.device(router.weight.device):
            new = cls(router.d_model, router.n_experts, 2)
        new.weight = router.weight
        new.eps = float(eps)
        return new

    def forward(self, x: torch.Tensor) -> Routing:
        check_tensor(x, "x", min_ndim=1, floating=True)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has width {x.shape[-1]} but the router was built for d_model={self.d_model}")
        return sparsemixer_route(F.linear(x.reshape(-1, self.d_model), self.weight), self.eps)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_experts={self.n_experts}, top_k=2, sparsemixer eps={self.eps:g}"
