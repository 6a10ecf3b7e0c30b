"""How far a lookup of the training text goes on chapter 9's scored targets.

The race's models lose to a byte n-gram (the gate of its ranking claims). These two measurements
say what that baseline is: the share of scored targets that occur, with the bytes before them,
verbatim in the training text, and the Kneser-Ney perplexity at each order (how few bytes of
context a table of training strings needs to beat a model).
"""

from __future__ import annotations

import math

import torch

from ..training.evaluation import tail_targets
from ..training.kneser_ney import KneserNey
from .._checks import check_positive_int
from . import ch09

__all__ = ["verbatim_share", "race_verbatim_share", "kn_ppl_by_order"]


def _targets(p: dict) -> torch.Tensor:
    return tail_targets(ch09._ends(p), p["seq_len"]).flatten()


def verbatim_share(tokens_train, tokens_eval, targets, context: int) -> float:
    """Share of ``targets`` (indices into ``tokens_eval``) whose ``context`` preceding tokens and
    the target itself occur as one string in ``tokens_train``. A target with fewer than
    ``context`` tokens before it counts as not found."""
    context = check_positive_int(context, "context")
    train = bytes(torch.as_tensor(tokens_train).to(torch.uint8).tolist())
    ev = torch.as_tensor(tokens_eval).to(torch.uint8).tolist()
    t = torch.as_tensor(targets).flatten().tolist()
    if not t:
        raise ValueError("targets is empty; pass the indices of the scored tokens")
    n = context + 1
    seen = {train[i:i + n] for i in range(len(train) - n + 1)}
    hits = sum(j >= context and bytes(ev[j - context:j + 1]) in seen for j in t)
    return hits / len(t)


def race_verbatim_share(p: dict, context: int) -> float:
    """:func:`verbatim_share` on the race's scored targets of size ``p`` (chapter 9's split)."""
    train, val = ch09.data()
    return verbatim_share(train, val, _targets(p), context)


def kn_ppl_by_order(p: dict, orders=range(2, 8)) -> dict[int, float]:
    """``{order: perplexity}`` of a Kneser-Ney byte n-gram fitted on chapter 9's training bytes,
    on the race's scored targets of size ``p`` (an n-gram of order n reads n - 1 bytes)."""
    train, val = ch09.data()
    targets = _targets(p)
    return {o: math.exp(float(KneserNey(o).fit(train).nll(val, targets).mean())) for o in orders}
