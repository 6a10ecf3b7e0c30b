"""Group-limited routing with groups ranked by their best expert: DeepSeek-V2's
``topk_method="group_limited_greedy"``.

DeepSeek-V3's router (:func:`llmviz.moe.route` with ``n_groups``) ranks each group of experts by
the *sum of its two best* choice scores. DeepSeek-V2 (236B) ranks each group by its *single best*
softmax probability, keeps the ``topk_groups`` best groups, and picks the ``top_k`` experts
inside them; the weights are the chosen probabilities (times ``scaling``), not renormalised:

    p = softmax(logits);  g_j = max_{e in group j} p_e;  allowed = top-topk_groups groups of g
    chosen = top-k of p over allowed experts;  w = scaling * p[chosen]

The two rules agree when every group holds one expert and can differ otherwise: a group with one
strong expert beats a group with two fairly good ones under V2's rule, and loses under V3's.
:func:`route_by_best_in_group` is the pure function; :class:`BestInGroupRouter` is a
:class:`~llmviz.moe.Router` (same weights, same ``gate.weight`` name) that routes with it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._checks import check_choice, check_flags, check_real, check_tensor
from .router import SCORE_KINDS, Router, Routing, check_groups, check_top_k

__all__ = ["BestInGroupRouter", "route_by_best_in_group"]


def route_by_best_in_group(logits: torch.Tensor, top_k: int, *, n_groups: int, topk_groups: int,
                           score: str = "softmax", normalize: bool = False,
                           scaling: float = 1.0) -> Routing:
    """Choose ``top_k`` experts per token inside the ``topk_groups`` groups whose best score is
    highest (see the module docstring); arguments as :func:`llmviz.moe.route`."""
    check_tensor(logits, "logits", ndim=2, floating=True)
    check_choice(score, "score", SCORE_KINDS)
    check_flags(normalize=normalize)
    check_real(scaling, "scaling")
    N, E = logits.shape
    check_top_k(top_k, E)
    if n_groups is None or topk_groups is None:
        raise ValueError("route_by_best_in_group needs n_groups and topk_groups; without groups "
                         "use llmviz.moe.route")
    check_groups(E, top_k, n_groups, topk_groups)
    work = logits.to(torch.promote_types(logits.dtype, torch.float32))
    scores = torch.softmax(work, dim=-1) if score == "softmax" else torch.sigmoid(work)  # (N, E)
    probs = scores if score == "softmax" else scores / scores.sum(dim=-1, keepdim=True)
    best = scores.view(N, n_groups, E // n_groups).max(dim=-1).values  # (N, G)
    keep = best.topk(topk_groups, dim=-1).indices  # (N, topk_groups)
    allowed = torch.zeros_like(best, dtype=torch.bool).scatter_(1, keep, True)
    allowed = allowed[:, :, None].expand(N, n_groups, E // n_groups).reshape(N, E)
    indices = scores.masked_fill(~allowed, float("-inf")).topk(top_k, dim=-1).indices  # (N, k)
    weights = scores.gather(1, indices)
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    if scaling != 1.0:
        weights = weights * scaling
    return Routing(logits=logits, probs=probs, indices=indices, weights=weights.to(logits.dtype))


class BestInGroupRouter(Router):
    """A :class:`~llmviz.moe.Router` whose groups are ranked by their best expert
    (:func:`route_by_best_in_group`); it takes the settings and weights of a built router with
    :meth:`from_router`. Choice biases are not part of this rule."""

    @classmethod
    def from_router(cls, router: Router) -> "BestInGroupRouter":
        """A best-in-group router with ``router``'s settings, sharing its parameters."""
        if not isinstance(router, Router):
            raise TypeError(f"router must be a llmviz.moe.Router, got {type(router).__name__}")
        if router.n_groups is None:
            raise ValueError("the router has no expert groups (n_groups=None); a best-in-group "
                             "router needs n_groups and topk_groups")
        if router.e_score_correction_bias is not None:
            raise ValueError("the router has a choice bias (bias_balancing=True); DeepSeek-V2's "
                             "best-in-group rule has none")
        with torch.device(router.weight.device):
            new = cls(router.d_model, router.n_experts, router.top_k, score=router.score,
                      normalize=router.normalize, scaling=router.scaling, n_groups=router.n_groups,
                      topk_groups=router.topk_groups, bias_rate=router.bias_rate,
                      logit_bias=router.bias is not None)
        new.weight, new.bias = router.weight, router.bias
        return new

    def forward(self, x: torch.Tensor) -> Routing:
        check_tensor(x, "x", min_ndim=1, floating=True)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has width {x.shape[-1]} but the router was built for d_model={self.d_model}")
        logits = F.linear(x.reshape(-1, self.d_model), self.weight, self.bias)  # (N, E)
        return route_by_best_in_group(logits, self.top_k, n_groups=self.n_groups,
                                      topk_groups=self.topk_groups, score=self.score,
                                      normalize=self.normalize, scaling=self.scaling)

    def extra_repr(self) -> str:
        return super().extra_repr() + ", groups ranked by their best expert"
