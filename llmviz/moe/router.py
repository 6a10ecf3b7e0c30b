"""The router of a mixture of experts: which ``k`` of the ``E`` experts see each token, and how
much each one's output counts.

Shape letters: N tokens (batch and sequence flattened), C model width, E experts, k experts
per token, G expert groups.

One linear map scores every expert for every token, ``logits = x @ W^T`` with ``W`` of shape
``(E, C)``. The scores come in two kinds:

* ``"softmax"`` (Switch, Mixtral, Qwen3-MoE): ``p = softmax(logits)`` over all E experts, then
  the k largest are kept. Renormalising the kept k to sum to 1 (Mixtral always,
  Qwen3-MoE when ``norm_topk_prob``) equals a softmax over the k chosen logits alone, so
  "softmax then top-k then renormalise" and "top-k then softmax" are the same router.
* ``"sigmoid"`` (DeepSeek-V3): ``s = sigmoid(logits)``, each expert scored on its own; the
  kept k are renormalised (``norm_topk_prob``) and multiplied by ``routed_scaling_factor``.

DeepSeek-V3 adds two things to the *choice* only, never to the weights:

* a per-expert bias ``b`` (auxiliary-loss-free balancing, Wang et al. 2024): experts are ranked
  by ``s + b`` but weighted by ``s``; after each step ``b`` moves by a fixed ``rate`` against
  the sign of each expert's load error (:func:`balance_bias_update`);
* group-limited routing: the E experts form G groups, each group is scored by the sum of its
  two best ``s + b``, and a token may only pick experts inside its ``topk_group`` best groups
  (which bounds how many devices a token talks to).

:func:`route` is the pure function from logits; :class:`Router` holds ``W`` (Hugging Face name
``gate.weight``) and the bias buffer (``e_score_correction_bias``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import (check_choice, check_dtype_matches, check_flags, check_positive,
                       check_positive_int, check_real, check_tensor)

__all__ = ["SCORE_KINDS", "Routing", "route", "Router", "balance_bias_update", "check_top_k", "check_groups"]

#: How router logits become per-expert scores.
SCORE_KINDS = ("softmax", "sigmoid")


@dataclass
class Routing:
    """What the router decided for N tokens.

    Attributes:
        logits: ``(N, E)`` raw router logits (the z-loss reads these).
        probs: ``(N, E)`` scores turned into a distribution over experts: the softmax, or the
            sigmoid scores divided by their row sum; the balancing loss reads these.
        indices: ``(N, k)`` long, the chosen experts of each token.
        weights: ``(N, k)`` how much each chosen expert's output counts (renormalised and
            scaled as configured); same dtype as the logits' input.
    """

    logits: torch.Tensor
    probs: torch.Tensor
    indices: torch.Tensor
    weights: torch.Tensor

    @property
    def n_experts(self) -> int:
        return self.logits.shape[-1]

    @property
    def top_k(self) -> int:
        return self.indices.shape[-1]

    def load(self) -> torch.Tensor:
        """``(E,)`` how many token-expert assignments each expert received (sums to N*k)."""
        counts = torch.zeros(self.n_experts, device=self.indices.device, dtype=torch.long)
        return counts.scatter_add_(0, self.indices.reshape(-1), torch.ones_like(self.indices.reshape(-1)))


def check_top_k(top_k: int, n_experts: int) -> int:
    """``top_k`` checked as an int in ``[1, n_experts]``."""
    check_positive_int(top_k, "top_k")
    check_positive_int(n_experts, "n_experts")
    if top_k > n_experts:
        raise ValueError(
            f"top_k ({top_k}) must be <= n_experts ({n_experts}): a token cannot pick more "
            "experts than exist; lower top_k or add experts"
        )
    return top_k


def _check_groups(n_experts: int, top_k: int, n_groups: int | None, topk_groups: int | None) -> None:
    if n_groups is None and topk_groups is None:
        return
    if n_groups is None or topk_groups is None:
        raise ValueError(
            f"n_groups ({n_groups}) and topk_groups ({topk_groups}) go together: give both "
            "(group-limited routing) or neither"
        )
    check_positive_int(n_groups, "n_groups")
    check_positive_int(topk_groups, "topk_groups")
    if n_experts % n_groups:
        raise ValueError(f"n_experts ({n_experts}) must be divisible by n_groups ({n_groups})")
    if topk_groups > n_groups:
        raise ValueError(f"topk_groups ({topk_groups}) must be <= n_groups ({n_groups})")
    if top_k > topk_groups * (n_experts // n_groups):
        raise ValueError(
            f"top_k ({top_k}) exceeds the experts in the {topk_groups} allowed groups "
            f"({topk_groups} * {n_experts // n_groups}); raise topk_groups or lower top_k"
        )


def check_groups(n_experts: int, top_k: int, n_groups: int | None, topk_groups: int | None) -> None:
    """Group-limited routing settings checked: both or neither, E divisible into the groups,
    ``topk_groups <= n_groups``, and enough experts in the allowed groups for ``top_k``."""
    _check_groups(n_experts, top_k, n_groups, topk_groups)


def _group_mask(choice: torch.Tensor, n_groups: int, topk_groups: int) -> torch.Tensor:
    """``(N, E)`` bool, True for experts in each token's ``topk_groups`` best groups."""
    N, E = choice.shape
    per_group = E // n_groups
    grouped = choice.view(N, n_groups, per_group)  # (N, G, E/G)
    # each group is scored by the sum of its two best experts (one if a group has one)
    group_scores = grouped.topk(min(2, per_group), dim=-1).values.sum(dim=-1)  # (N, G)
    best = group_scores.topk(topk_groups, dim=-1).indices  # (N, topk_groups)
    allowed = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best, True)
    return allowed[:, :, None].expand(N, n_groups, per_group).reshape(N, E)  # (N, E)


def route(
    logits: torch.Tensor,
    top_k: int,
    *,
    score: str = "softmax",
    normalize: bool = True,
    scaling: float = 1.0,
    bias: torch.Tensor | None = None,
    n_groups: int | None = None,
    topk_groups: int | None = None,
) -> Routing:
    """Choose ``top_k`` experts per token from router logits and weigh them.

    Scores are computed in float32 (or wider), as every reference implementation does: a
    bfloat16 softmax over experts can flip which expert is the k-th best.

    Args:
        logits: ``(N, E)`` router logits.
        top_k: k, experts per token (``1 <= k <= E``).
        score: ``"softmax"`` or ``"sigmoid"`` (see the module docstring).
        normalize: rescale the k kept scores to sum to 1 (Mixtral: always; Qwen3-MoE and
            DeepSeek-V3: ``norm_topk_prob``). False keeps the raw probabilities, whose sum is
            below 1.
        scaling: multiplies the final weights (DeepSeek-V3's ``routed_scaling_factor``, 2.5).
        bias: ``(E,)`` added to the scores for the choice only (auxiliary-loss-free
            balancing); the weights use the unbiased scores.
        n_groups, topk_groups: group-limited routing (DeepSeek-V3: 8 groups, 4 allowed).

    Returns:
        A :class:`Routing`; ``weights`` are cast back to ``logits.dtype``.
    """
    check_flags(normalize=normalize)
    check_tensor(logits, "logits", ndim=2, floating=True)
    check_choice(score, "score", SCORE_KINDS)
    N, E = logits.shape
    check_top_k(top_k, E)
    check_real(scaling, "scaling")
    _check_groups(E, top_k, n_groups, topk_groups)
    work = logits.to(torch.promote_types(logits.dtype, torch.float32))
    if score == "softmax":
        scores = torch.softmax(work, dim=-1)  # (N, E), rows sum to 1
        probs = scores
    else:
        scores = torch.sigmoid(work)  # (N, E), each in (0, 1)
        probs = scores / scores.sum(dim=-1, keepdim=True)
    choice = scores
    if bias is not None:
        check_tensor(bias, "bias", ndim=1, floating=True)
        if bias.shape[0] != E:
            raise ValueError(f"bias has {bias.shape[0]} entries but there are E={E} experts")
        choice = scores + bias.to(scores.dtype)
    if n_groups is not None:
        choice = choice.masked_fill(~_group_mask(choice, n_groups, topk_groups), float("-inf"))
    indices = choice.topk(top_k, dim=-1).indices  # (N, k), best first
    if normalize:
        # s_i / sum_j s_j over the chosen, computed as a softmax of the log-scores: the same
        # numbers, and no 0/0 when every chosen sigmoid score underflows
        chosen = work.gather(1, indices)  # (N, k) logits of the chosen experts
        weights = torch.softmax(chosen if score == "softmax" else F.logsigmoid(chosen), dim=-1)
    else:
        weights = scores.gather(1, indices)  # (N, k): unbiased scores of the chosen experts
    if scaling != 1.0:
        weights = weights * scaling
    return Routing(logits=logits, probs=probs, indices=indices, weights=weights.to(logits.dtype))


def balance_bias_update(bias: torch.Tensor, load: torch.Tensor, rate: float) -> torch.Tensor:
    """DeepSeek-V3's auxiliary-loss-free balancing step: ``b += rate * sign(mean load - load)``.

    An overloaded expert (load above the mean) gets its bias lowered by ``rate``, an
    underloaded one raised, so it is chosen more often at the next step; the gradient never
    sees ``b``. Returns a new tensor (the caller stores it).

    Args:
        bias: ``(E,)`` current biases.
        load: ``(E,)`` assignments per expert in the last step (e.g. :meth:`Routing.load`).
        rate: the update speed gamma (DeepSeek-V3: 0.001).
    """
    check_tensor(bias, "bias", ndim=1, floating=True)
    check_tensor(load, "load", ndim=1)
    check_positive(rate, "rate")
    if load.shape != bias.shape:
        raise ValueError(f"load {tuple(load.shape)} and bias {tuple(bias.shape)} must both be (E,)")
    load = load.to(bias.dtype)
    return bias + rate * torch.sign(load.mean() - load)


class Router(nn.Module):
    """The gate of a mixture-of-experts layer: a bias-free linear map to E logits, then
    :func:`route`.

    Args:
        d_model: model width C.
        n_experts: E.
        top_k: k experts per token.
        score, normalize, scaling, n_groups, topk_groups: see :func:`route`.
        bias_balancing: keep a per-expert choice bias (buffer ``e_score_correction_bias``, zeros
            at start) for auxiliary-loss-free balancing; :meth:`update_bias` moves it.
        bias_rate: the step of :meth:`update_bias`.
        logit_bias: a learned bias ``bias (E,)`` added to the logits (gpt-oss); unlike the
            balancing bias it shapes the weights too and is trained by the gradient.

    ``forward(x)``: ``x (..., C)`` -> :class:`Routing` over the ``N = prod(...)`` tokens.
    """

    e_score_correction_bias: torch.Tensor | None

    def __init__(
        self, d_model: int, n_experts: int, top_k: int, *, score: str = "softmax",
        normalize: bool = True, scaling: float = 1.0, n_groups: int | None = None,
        topk_groups: int | None = None, bias_balancing: bool = False, bias_rate: float = 1e-3,
        logit_bias: bool = False,
    ) -> None:
        check_flags(normalize=normalize, bias_balancing=bias_balancing, logit_bias=logit_bias)
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_positive_int(n_experts, "n_experts")
        check_top_k(top_k, n_experts)
        check_choice(score, "score", SCORE_KINDS)
        check_real(scaling, "scaling")
        check_positive(bias_rate, "bias_rate")
        _check_groups(n_experts, top_k, n_groups, topk_groups)
        self.d_model, self.n_experts, self.top_k = d_model, n_experts, top_k
        self.score, self.normalize, self.scaling = score, normalize, float(scaling)
        self.n_groups, self.topk_groups = n_groups, topk_groups
        self.bias_rate = float(bias_rate)
        self.weight = nn.Parameter(torch.empty(n_experts, d_model))
        nn.init.normal_(self.weight, std=d_model**-0.5)
        self.bias = nn.Parameter(torch.zeros(n_experts)) if logit_bias else None
        if bias_balancing:  # float32 always, like HF's _keep_in_fp32 for this buffer
            self.register_buffer("e_score_correction_bias", torch.zeros(n_experts))
        else:
            self.e_score_correction_bias = None

    def forward(self, x: torch.Tensor) -> Routing:
        check_tensor(x, "x", min_ndim=1, floating=True)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has width {x.shape[-1]} but the router was built for d_model={self.d_model}")
        check_dtype_matches(x, self.weight, "Router", low_precision_ok=self.score == "sigmoid")
        flat = x.reshape(-1, self.d_model)  # (N, C)
        if self.score == "sigmoid":  # DeepSeek-V3 computes these logits in float32
            work = torch.promote_types(x.dtype, torch.float32)
            bias = None if self.bias is None else self.bias.to(work)
            logits = F.linear(flat.to(work), self.weight.to(work), bias)  # (N, E)
        else:
            logits = F.linear(flat, self.weight, self.bias)  # (N, E)
        return route(
            logits, self.top_k, score=self.score, normalize=self.normalize, scaling=self.scaling,
            bias=self.e_score_correction_bias, n_groups=self.n_groups, topk_groups=self.topk_groups,
        )

    @torch.no_grad()
    def update_bias(self, load: torch.Tensor) -> None:
        """One auxiliary-loss-free balancing step from the last ``(E,)`` load (see
        :func:`balance_bias_update`); call it after the optimiser step."""
        if self.e_score_correction_bias is None:
            raise ValueError("this router has no balancing bias; build it with bias_balancing=True")
        self.e_score_correction_bias.copy_(
            balance_bias_update(self.e_score_correction_bias, load, self.bias_rate)
        )

    def extra_repr(self) -> str:
        extra = f", groups={self.topk_groups}/{self.n_groups}" if self.n_groups else ""
        bias = ", bias_balancing" if self.e_score_correction_bias is not None else ""
        return (f"d_model={self.d_model}, n_experts={self.n_experts}, top_k={self.top_k}, "
                f"score={self.score!r}, normalize={self.normalize}, scaling={self.scaling:g}{extra}{bias}")
