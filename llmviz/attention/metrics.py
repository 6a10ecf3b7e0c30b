"""Per-head summaries of attention weights: what does each head look at?

Shape letters: L layers, B batch, H heads, T queries, S keys.

Input: weights ``(T, S)``, ``(H, T, S)``, ``(B, H, T, S)`` or a per-layer list of
``(B, H, T, S)`` (what Hugging Face returns with ``output_attentions=True``). Queries are the
last ``T`` of the ``S`` key positions (query ``i`` sits at ``S - T + i``).

Every metric is a number in ``[0, 1]`` per head, averaged over batch and over the query rows
where it is defined:

* ``entropy``: row entropy divided by ``log(n)``, ``n`` = number of keys the row may see
  (causal rows see ``S - T + i + 1`` keys). 0 = all mass on one key, 1 = uniform. Rows that
  see a single key are skipped (their entropy is 0/0).
* ``diagonal``: mass on the query's own position.
* ``previous``: mass on the key just before the query (rows at position 0 skipped).
* ``local``: mass within the ``window`` most recent keys (distance ``0..window-1``; both
  sides when not causal). It is the share of the row's own mass, so a purely local head scores
  exactly 1 whatever ``window`` and ``T`` are.
* ``first``: mass on key 0, the "attention sink" (Xiao et al. 2023); rows at position 0 skipped.

:func:`induction_score` needs the tokens as well: the mass a query puts on the positions just
after earlier occurrences of its own token (what an induction head reads).

Unlike a ``1 - std`` score or a local sum divided by the row length, these do not drift with
sequence length, and a causal mask does not make every head "backward-looking".
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from .._checks import check_positive_int, check_tensor
from .masks import query_positions

__all__ = ["head_metrics", "METRICS", "row_entropy", "mass_by_distance", "induction_score"]

#: Names of the metrics, in display order.
METRICS = ("entropy", "diagonal", "previous", "local", "first")


def _as_bhts(weights) -> torch.Tensor:
    if not isinstance(weights, torch.Tensor) and not hasattr(weights, "__array__"):
        raise TypeError(
            f"weights must be a tensor or array of attention weights ((T, S), (H, T, S) or "
            f"(B, H, T, S)) or a per-layer list of them; got {type(weights).__name__}"
        )
    w = torch.as_tensor(weights).detach().float()
    if w.ndim == 2:
        return w[None, None]  # (1, 1, T, S)
    if w.ndim == 3:
        return w[None]  # (1, H, T, S)
    if w.ndim == 4:
        return w
    raise ValueError(
        f"weights must be (T, S), (H, T, S), (B, H, T, S) or a list of (B, H, T, S) per layer; "
        f"got shape {tuple(w.shape)}"
    )


def row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Shannon entropy (nats) of each row of ``weights`` along the last axis, ``0 log 0 = 0``.

    Args:
        weights: ``(..., S)`` rows of probabilities (attention weights, a sampling
            distribution).

    Returns:
        ``(...)`` entropies: 0 for a one-hot row, ``log(S)`` for a uniform one.
    """
    w = _as_weights(weights)
    plogp = torch.where(w > 0, w * w.clamp_min(1e-30).log(), torch.zeros_like(w))
    return -plogp.sum(-1)


def _as_weights(weights) -> torch.Tensor:
    """A tensor (or a numpy array of) attention weights; anything else is a TypeError."""
    if not isinstance(weights, torch.Tensor) and hasattr(weights, "__array__"):
        weights = torch.as_tensor(weights)
    return check_tensor(weights, "weights", min_ndim=1)


def mass_by_distance(weights: torch.Tensor) -> torch.Tensor:
    """Attention mass at each backward distance ``d = i - j``, averaged over the queries.

    Args:
        weights: ``(H, T, S)`` attention weights, queries the last T of S.

    Returns:
        ``(H, S)``: entry ``[h, d]`` is the mean over queries ``i`` of ``w[h, i, i - d]`` (0
        where ``d > i``); keys after the query (``d < 0``) are not counted, so each row sums to
        the heads' average causal mass (1 for causal weights).
    """
    w = _as_weights(weights).detach()
    if not w.is_floating_point():
        w = w.float()
    if w.ndim != 3:
        raise ValueError(
            f"weights must be (H, T, S), got shape {tuple(w.shape)}; pick a layer and batch "
            "element first"
        )
    H, T, S = w.shape
    d = query_positions(T, S, device=w.device)[:, None] - torch.arange(S, device=w.device)  # (T, S)
    past = d >= 0
    out = torch.zeros(H, S, dtype=w.dtype, device=w.device)
    index = d.clamp_min(0).reshape(1, T * S).expand(H, -1)  # (H, T*S) distance of each cell
    out.scatter_add_(1, index, (w * past).reshape(H, T * S))
    return out / max(T, 1)


def _is_causal(w: torch.Tensor, d: torch.Tensor) -> bool:
    return bool((w.masked_select((d < 0).expand_as(w)).abs() <= 1e-6).all())


def _one_layer(w: torch.Tensor, window: int, causal: bool | None) -> dict[str, torch.Tensor]:
    B, H, T, S = w.shape
    if S < T:
        raise ValueError(f"weights have more queries ({T}) than keys ({S}); expected T <= S")
    q_pos = query_positions(T, S, device=w.device)  # (T,)
    d = q_pos[:, None] - torch.arange(S, device=w.device)[None, :]  # (T, S) query - key
    if causal is None:
        causal = _is_causal(w, d)
    n_allowed = (q_pos + 1).float() if causal else torch.full((T,), float(S), device=w.device)

    def avg(per_row: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        # per_row (B, H, T); average over batch and the selected rows -> (H,)
        sel = per_row[..., rows]
        if sel.shape[-1] == 0:
            return torch.full((H,), float("nan"), device=w.device)
        return sel.mean(dim=(0, 2))

    ent = row_entropy(w)  # (B, H, T)
    multi = n_allowed > 1
    ent = ent / torch.where(multi, n_allowed, torch.full_like(n_allowed, math.e)).log()
    local_band = (d.abs() < window) & ((d >= 0) if causal else torch.ones_like(d, dtype=torch.bool))
    has_prev = q_pos >= 1
    diag = w.gather(-1, q_pos.view(1, 1, T, 1).expand(B, H, T, 1)).squeeze(-1)  # (B, H, T)
    prev_idx = (q_pos - 1).clamp_min(0).view(1, 1, T, 1).expand(B, H, T, 1)
    prev = w.gather(-1, prev_idx).squeeze(-1)  # (B, H, T)
    return {
        "entropy": avg(ent, multi),
        "diagonal": avg(diag, torch.ones(T, dtype=torch.bool, device=w.device)),
        "previous": avg(prev, has_prev),
        "local": avg((w * local_band).sum(-1), torch.ones(T, dtype=torch.bool, device=w.device)),
        "first": avg(w[..., 0], has_prev),
    }


def head_metrics(
    weights: torch.Tensor | Sequence[torch.Tensor],
    *,
    window: int = 4,
    causal: bool | None = None,
) -> dict[str, torch.Tensor]:
    """Entropy, diagonal, previous-token, local-window and first-token mass per head.

    Args:
        weights: attention weights, ``(T, S)``, ``(H, T, S)``, ``(B, H, T, S)``, or a per-layer
            list of ``(B, H, T, S)``.
        window: local window size for ``local`` (keys at distance ``< window``).
        causal: whether rows could only see earlier keys (sets the entropy normaliser and the
            local band). None infers it: causal if no weight lies above the diagonal.

    Returns:
        dict ``name -> tensor`` with one value per head: shape ``(H,)`` for one layer,
        ``(L, H)`` for a list of layers. See the module docstring for definitions.
    """
    check_positive_int(window, "window")

    if isinstance(weights, (list, tuple)):
        if not weights:
            raise ValueError("weights is an empty list; expected one (B, H, T, S) per layer")
        per_layer = [_one_layer(_as_bhts(w), window, causal) for w in weights]
        return {k: torch.stack([m[k] for m in per_layer]) for k in METRICS}  # (L, H)
    return _one_layer(_as_bhts(weights), window, causal)


def induction_score(
    weights: torch.Tensor | Sequence[torch.Tensor], tokens: torch.Tensor
) -> torch.Tensor:
    """Induction score per head: mass on the keys just after earlier copies of the query's token.

    For a query at position ``i`` holding token ``x``, the induction keys are the positions
    ``j <= i`` whose predecessor is an earlier occurrence of ``x`` (``tokens[j - 1] == x``,
    ``j - 1 < i``): where an induction head looks to copy the token that followed ``x`` last
    time (Olsson et al. 2022). A query's score is its total weight on those keys (several
    earlier copies all count); queries whose token has not occurred before are skipped. No
    period or offset is needed, so the score works on any sequence.

    Args:
        weights: ``(T, S)``, ``(H, T, S)``, ``(B, H, T, S)`` or a per-layer list of
            ``(B, H, T, S)``; queries are the last ``T`` of the ``S`` keys.
        tokens: ``(S,)`` or ``(B, S)`` integer token ids of the key positions.

    Returns:
        ``(H,)`` for one layer, ``(L, H)`` for a list: the mean over batch and over the queries
        that have an earlier copy, in ``[0, 1]``; NaN where no query has one.
    """
    if isinstance(weights, (list, tuple)):
        if not weights:
            raise ValueError("weights is an empty list; expected one (B, H, T, S) per layer")
        return torch.stack([induction_score(w, tokens) for w in weights])  # (L, H)
    w = _as_bhts(weights)  # (B, H, T, S)
    B, H, T, S = w.shape
    tok = check_tensor(tokens, "tokens", min_ndim=1)
    if tok.is_floating_point() or tok.dtype == torch.bool:
        raise TypeError(f"tokens must be integer token ids, got dtype {tok.dtype}")
    if tok.ndim == 1:
        tok = tok[None].expand(B, -1)
    if tok.ndim != 2 or tok.shape[1] != S or tok.shape[0] not in (1, B):
        raise ValueError(
            f"tokens must be (S,) or (B, S) = ({B}, {S}) to match weights of shape "
            f"{tuple(w.shape)}, got {tuple(tokens.shape)}; pass the ids of the key positions"
        )
    if S < T:
        raise ValueError(f"weights have more queries ({T}) than keys ({S}); expected T <= S")
    tok = tok.expand(B, -1).to(w.device)
    q_pos = query_positions(T, S, device=w.device)  # (T,)
    keys = torch.arange(S, device=w.device)
    before = torch.cat([tok[:, :1], tok[:, :-1]], dim=1)  # (B, S) token before each key
    match = before[:, None, :] == tok[:, q_pos][:, :, None]  # (B, T, S)
    match &= (keys >= 1) & (keys[None, :] <= q_pos[:, None])  # j - 1 < i, i.e. 1 <= j <= i
    has_copy = match.any(-1)  # (B, T)
    n = has_copy.sum()
    if n == 0:
        return torch.full((H,), float("nan"), device=w.device)
    per_row = (w * match[:, None]).sum(-1)  # (B, H, T)
    return (per_row * has_copy[:, None]).sum(dim=(0, 2)) / n
