"""Dispatch: send each token to its chosen experts and add the weighted results back.

Shape letters: N tokens, C model width, E experts, k experts per token, M = N*k token-expert
*assignments* (fewer when a capacity drops some).

The efficient way (what :class:`~llmviz.moe.layer.MoELayer` does) never loops over tokens:

1. flatten the ``(N, k)`` choices into M assignments and **sort them by expert**, so each
   expert's tokens sit in one contiguous block (:func:`plan_dispatch`);
2. **gather** the token rows in that order, ``x[tokens] -> (M, C)``;
3. run each expert once on its block (a loop over the E experts, each one a dense matmul);
4. multiply each row by its routing weight and **index_add** it back into row ``token`` of a
   zero ``(N, C)`` output (a token chosen by k experts receives k additions).

**Capacity** (Switch, GShard). With ``capacity = ceil(factor * N * k / E)`` an expert takes at
most that many assignments; the overflow is *dropped*: that expert adds nothing for the token
(which still has the residual stream and its other experts). Who is dropped is decided by
priority: every token's first choice ranks before any token's second choice, and within one
rank earlier tokens win (GShard's order; with k = 1 it is plain token order). The plan
reports exactly which assignments were dropped.

:func:`dense_forward` is the slow, obviously right reference: every expert on every token,
then a weighted sum over the chosen ones. The tests check the two agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from .._checks import check_positive, check_positive_int, check_tensor
from ._checks import check_indices

__all__ = ["DispatchPlan", "expert_capacity", "plan_dispatch", "combine", "dense_forward"]


@dataclass
class DispatchPlan:
    """Where every kept assignment goes, sorted by expert.

    Attributes:
        assignment: ``(M,)`` long, flat assignment ids ``token * k + slot``, grouped by expert
            (expert 0's block first), within a block in priority order.
        tokens: ``(M,)`` long, the token of each row (``assignment // k``).
        counts: the number of kept rows per expert, a list of E ints (block sizes).
        load: ``(E,)`` long, assignments each expert was *asked* to take (before capacity).
        kept: ``(N, k)`` bool, False where the capacity dropped the assignment.
        capacity: rows per expert allowed, or None (no limit).
    """

    assignment: torch.Tensor
    tokens: torch.Tensor
    counts: list[int]
    load: torch.Tensor
    kept: torch.Tensor
    capacity: int | None

    @property
    def n_dropped(self) -> int:
        """How many token-expert assignments the capacity dropped."""
        return int(self.load.sum().item()) - sum(self.counts)


def expert_capacity(n_tokens: int, top_k: int, n_experts: int, factor: float) -> int:
    """Rows one expert may take: ``ceil(factor * N * k / E)`` (factor 1: a perfectly even share)."""
    check_positive_int(n_tokens, "n_tokens", allow_zero=True)
    check_positive_int(top_k, "top_k")
    check_positive_int(n_experts, "n_experts")
    check_positive(factor, "capacity_factor")
    return max(1, math.ceil(factor * n_tokens * top_k / n_experts))


def plan_dispatch(indices: torch.Tensor, n_experts: int, *, capacity: int | None = None) -> DispatchPlan:
    """Sort the ``(N, k)`` expert choices into per-expert blocks (and apply a capacity).

    Args:
        indices: ``(N, k)`` long, chosen experts per token (from :class:`~llmviz.moe.Routing`).
        n_experts: E.
        capacity: rows each expert may take (see :func:`expert_capacity`); None: no limit.

    Returns:
        A :class:`DispatchPlan`. One host read (the E block sizes), needed to split the rows.
    """
    check_indices(indices)
    check_positive_int(n_experts, "n_experts")
    if capacity is not None:
        check_positive_int(capacity, "capacity")
    N, k = indices.shape
    M = N * k
    flat = indices.reshape(-1)  # (M,) expert of assignment token*k + slot
    if M and (flat.min() < 0 or flat.max() >= n_experts):
        raise ValueError(f"indices hold expert ids outside [0, n_experts={n_experts}): "
                         f"min {int(flat.min())}, max {int(flat.max())}")
    load = torch.bincount(flat, minlength=n_experts)  # (E,)
    ids = torch.arange(M, device=indices.device)
    priority = (ids % k) * N + ids // k  # rank-major: all first choices, then all second ...
    order = torch.argsort(flat * M + priority)  # (M,) grouped by expert, priority inside
    if capacity is None:
        kept = torch.ones(N, k, dtype=torch.bool, device=indices.device)
        counts = load.tolist()
    else:
        start = torch.cumsum(load, 0) - load  # (E,) first row of each block
        rank_in_expert = torch.arange(M, device=indices.device) - start[flat[order]]  # (M,)
        keep_sorted = rank_in_expert < capacity
        kept = torch.zeros(M, dtype=torch.bool, device=indices.device)
        kept[order] = keep_sorted
        kept = kept.view(N, k)
        order = order[keep_sorted]
        counts = load.clamp(max=capacity).tolist()
    return DispatchPlan(assignment=order, tokens=order // k, counts=counts, load=load,
                        kept=kept, capacity=capacity)


def combine(
    rows: torch.Tensor, plan: DispatchPlan, weights: torch.Tensor, n_tokens: int
) -> torch.Tensor:
    """Weigh the ``(M, C)`` expert outputs and add each into its token's row: ``(N, C)``.

    ``weights`` is the ``(N, k)`` routing weights; a dropped assignment adds nothing.
    """
    if not isinstance(plan, DispatchPlan):
        raise TypeError(f"plan must be a DispatchPlan (from plan_dispatch), got {type(plan).__name__}")
    check_tensor(rows, "rows", ndim=2, floating=True)
    check_tensor(weights, "weights", ndim=2, floating=True)
    check_positive_int(n_tokens, "n_tokens", allow_zero=True)
    if rows.shape[0] != plan.assignment.shape[0] or weights.shape != plan.kept.shape:
        raise ValueError(f"rows {tuple(rows.shape)} and weights {tuple(weights.shape)} do not fit "
                         f"the plan: {plan.assignment.shape[0]} rows and (N, k) = {tuple(plan.kept.shape)}")
    w = weights.reshape(-1)[plan.assignment].to(rows.dtype)  # (M,)
    out = rows.new_zeros(n_tokens, rows.shape[-1])  # (N, C)
    return out.index_add(0, plan.tokens, rows * w[:, None])


def dense_forward(
    x: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor,
    experts: list[Callable[[torch.Tensor], torch.Tensor]],
    *,
    kept: torch.Tensor | None = None,
) -> torch.Tensor:
    """The reference: run every expert on every token, keep the chosen ones, weigh and sum.

    E times the compute of the real thing, but each step is plain: ``y[e] = expert_e(x)``, then
    ``out[t] = sum_j weights[t, j] * y[indices[t, j], t]``.

    Args:
        x: ``(N, C)`` tokens.
        indices, weights: ``(N, k)`` routing.
        experts: E callables ``(N, C) -> (N, C)``.
        kept: optional ``(N, k)`` bool; False assignments add nothing (capacity drops).
    """
    check_tensor(x, "x", ndim=2, floating=True)
    y = torch.stack([expert(x) for expert in experts])  # (E, N, C)
    N = x.shape[0]
    chosen = y[indices, torch.arange(N, device=x.device)[:, None]]  # (N, k, C)
    w = weights.to(x.dtype)
    if kept is not None:
        w = w * kept.to(x.dtype)
    return (chosen * w[..., None]).sum(dim=1)  # (N, C)
