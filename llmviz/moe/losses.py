"""Auxiliary losses of a router: load balancing (Switch/Mixtral) and the router z-loss (ST-MoE).

Shape letters: N tokens, E experts, k experts per token.

**Load balancing** (Fedus et al. 2021, "Switch Transformers", eq. 4-6). With ``f_i`` the share
of the routing decisions that went to expert ``i`` and ``P_i`` the mean router probability of
expert ``i`` over the tokens,

``loss = E * sum_i f_i * P_i``.

``f`` counts hard choices (no gradient); ``P`` carries the gradient and is pushed down where
``f`` is large. Two normalisations of ``f`` are in use, and they differ by a factor k:

* ``"assignments"`` (default, the Switch form generalised to k): ``f_i`` = share of the N*k
  assignments, so ``sum_i f_i = 1``. Perfectly uniform routing (``f_i = P_i = 1/E``) gives
  exactly **1**, and so does any routing whose choices are spread evenly (``f_i = 1/E``),
  whatever ``P`` is; routing collapsed onto one expert gives up to E.
* ``"tokens"`` (Hugging Face ``load_balancing_loss_func`` for Mixtral, Qwen3-MoE): ``f_i`` =
  share of the N tokens that chose expert ``i``, so ``sum_i f_i = k`` and uniform routing gives
  **k**. The trainers of those models multiply it by ``router_aux_loss_coef`` (0.001-0.02).

In what sense 1 is the minimum: the loss is a differentiable stand-in for ``E * sum_i f_i^2``
(``P`` standing in for the non-differentiable ``f``), and when ``P = f`` the Cauchy-Schwarz
inequality gives ``E * sum_i f_i^2 >= 1``, with equality only for uniform ``f``. It is not a
bound on every batch: ``P`` and ``f`` can disagree (with k > 1, ``f`` counts a token's weak
picks as fully as its strong one), and a small batch can score below 1; the tests show one.

**Router z-loss** (Zoph et al. 2022, "ST-MoE", eq. 5): ``mean_t (logsumexp_i logits_ti)^2``,
which keeps router logits small (large ones make the softmax brittle in low precision). It is the
same quantity as PaLM's output z-loss, applied to the router's E logits instead of the
vocabulary; :func:`llmviz.training.losses.z_loss` computes both.
"""

from __future__ import annotations

import torch

from .._checks import check_choice, check_positive_int, check_tensor
from ._checks import check_indices
from ..training.losses import z_loss

__all__ = ["BALANCE_FORMS", "load_balancing_loss", "router_z_loss", "expert_fractions", "load_imbalance"]

#: How the dispatch fractions ``f`` are normalised (see the module docstring).
BALANCE_FORMS = ("assignments", "tokens")


def _check_token_mask(mask: torch.Tensor | None, N: int) -> torch.Tensor | None:
    if mask is None:
        return None
    check_tensor(mask, "mask", ndim=(1, 2))
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be bool (True = a real token), got dtype {mask.dtype}; use mask.bool()")
    if mask.numel() != N:
        raise ValueError(f"mask has {mask.numel()} entries but there are N={N} tokens")
    return mask.reshape(-1)


def expert_fractions(
    indices: torch.Tensor, n_experts: int, *, mask: torch.Tensor | None = None, form: str = "assignments"
) -> torch.Tensor:
    """``(E,)`` float32 ``f``: the share of routing decisions per expert (see the docstring).

    Args:
        indices: ``(N, k)`` chosen experts.
        n_experts: E.
        mask: optional ``(N,)`` or ``(B, T)`` bool, True = the token counts (padding excluded).
        form: ``"assignments"`` (sums to 1) or ``"tokens"`` (sums to k).
    """
    check_indices(indices)
    check_positive_int(n_experts, "n_experts")
    check_choice(form, "form", BALANCE_FORMS)
    N, k = indices.shape
    keep = _check_token_mask(mask, N)
    w = torch.ones(N, k, device=indices.device) if keep is None else keep.float()[:, None].expand(N, k)
    counts = torch.zeros(n_experts, device=indices.device).scatter_add_(
        0, indices.reshape(-1), w.reshape(-1))  # (E,)
    n_tokens = w[:, 0].sum().clamp_min(1)
    return counts / (n_tokens * (k if form == "assignments" else 1))


def load_imbalance(load: torch.Tensor) -> float:
    """The busiest expert's load over the mean load: 1 for perfectly even routing, E when one
    of E experts takes everything. ``load``: ``(E,)`` counts or shares per expert (e.g.
    :attr:`~llmviz.moe.MoEInfo.load` or :func:`expert_fractions`).

    Raises:
        TypeError: ``load`` is not a tensor.
        ValueError: ``load`` is not 1-D with at least one entry, holds a negative or non-finite
            value, or is all zero (no assignments to compare).
    """
    check_tensor(load, "load", ndim=1)
    load = load.detach().float()
    if load.numel() == 0 or not bool(torch.isfinite(load).all()) or bool((load < 0).any()):
        raise ValueError(f"load must be finite, non-negative counts per expert, got {load.tolist()}")
    if float(load.sum()) == 0.0:
        raise ValueError("load is all zero: no routing decisions to compare; route some tokens first")
    return float(load.max() / load.mean())


def load_balancing_loss(
    probs: torch.Tensor,
    indices: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    form: str = "assignments",
) -> torch.Tensor:
    """The Switch/Mixtral balancing loss ``E * sum_i f_i * P_i`` (scalar, float32).

    Args:
        probs: ``(N, E)`` router probabilities, rows summing to 1 (``Routing.probs``: the
            softmax, or sigmoid scores divided by their sum). Gradients flow through these.
        indices: ``(N, k)`` the chosen experts (no gradient).
        mask: optional ``(N,)`` or ``(B, T)`` bool, True = the token counts.
        form: ``"assignments"`` (1 at uniform routing) or ``"tokens"`` (HF's
            Mixtral/Qwen3-MoE value, k times larger: k at uniform routing).

    To pool several layers, concatenate their rows (``torch.cat`` over layers), as Hugging
    Face does with its tuple of per-layer logits.
    """
    check_tensor(probs, "probs", ndim=2, floating=True)
    check_indices(indices)
    if probs.shape[0] != indices.shape[0]:
        raise ValueError(f"probs {tuple(probs.shape)} and indices {tuple(indices.shape)} must share N")
    N, E = probs.shape
    f = expert_fractions(indices, E, mask=mask, form=form)  # (E,)
    keep = _check_token_mask(mask, N)
    p = probs.float()
    if keep is None:
        P = p.mean(dim=0)  # (E,)
    else:
        P = (p * keep.float()[:, None]).sum(dim=0) / keep.sum().clamp_min(1)
    return E * (f * P).sum()


def router_z_loss(logits: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
    """ST-MoE's router z-loss, ``mean over tokens of logsumexp(logits)^2`` (scalar, float32).

    Args:
        logits: ``(N, E)`` router logits (``Routing.logits``).
        mask: optional ``(N,)`` or ``(B, T)`` bool, True = the token counts.
    """
    check_tensor(logits, "logits", ndim=2, floating=True)
    keep = _check_token_mask(mask, logits.shape[0])
    return z_loss(logits[None], None if keep is None else keep[None])  # as (1, N, E)
