"""The verdicts: three decided from an interval and nothing else, a fourth from validity.

A claim says a quantity lies on one side of a threshold ("the loss difference is > 0",
"the time ratio is < 1"). Its verdict is:

* ``"holds"``: the whole interval lies on the claim's side of the threshold;
* ``"does not hold"``: the whole interval lies on the other side (touching the threshold
  counts as the other side: an effect of exactly 0 does not make "> 0" true);
* ``"not resolved at this size"``: the interval straddles the threshold, or there is no
  interval (a single run). More seeds or a larger size may resolve it.

:func:`decide` returns one of those three. A :class:`~llmviz.evidence.Claim` whose experiment
fails one of its validity checks (:mod:`llmviz.evidence.validity`: the models lose to their
baseline, a positive control fails) gets the fourth, ``"cannot decide at this size"``, whatever
its interval says: an experiment that cannot decide the claim neither confirms nor refutes it.
"""

from __future__ import annotations

import math
from typing import Literal

from .stats import Estimate

__all__ = ["HOLDS", "FAILS", "UNRESOLVED", "CANNOT_DECIDE", "VERDICTS", "DIRECTIONS", "decide"]

HOLDS = "holds"
FAILS = "does not hold"
UNRESOLVED = "not resolved at this size"
#: The verdict of a claim whose experiment failed a validity check (never returned by decide).
CANNOT_DECIDE = "cannot decide at this size"
VERDICTS = (HOLDS, FAILS, UNRESOLVED, CANNOT_DECIDE)
#: ``">"``: the claim is "quantity > threshold"; ``"<"``: "quantity < threshold".
DIRECTIONS = (">", "<")

Direction = Literal[">", "<"]


def decide(estimate: Estimate, *, threshold: float = 0.0, direction: Direction = ">") -> str:
    """The verdict on "``estimate`` ``direction`` ``threshold``" read off its interval.

    Args:
        estimate: the measured quantity with its interval.
        threshold: the value the claim compares against (0 for a difference, 1 for a ratio).
        direction: ``">"`` or ``"<"``: which side of ``threshold`` the claim puts the quantity.

    Returns one of :data:`VERDICTS`.
    """
    if not isinstance(estimate, Estimate):
        raise TypeError(
            f"estimate must be an llmviz Estimate (from summarize, paired, paired_ratio or "
            f"Estimate.exact), got {type(estimate).__name__}"
        )
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r} is not supported; choose one of {DIRECTIONS}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or math.isnan(
        threshold
    ):
        raise TypeError(f"threshold must be a number, got {threshold!r}")
    if not estimate.resolved:
        return UNRESOLVED
    low, high = estimate.low, estimate.high
    if direction == ">":
        if low > threshold:
            return HOLDS
        return FAILS if high <= threshold else UNRESOLVED
    if high < threshold:
        return HOLDS
    return FAILS if low >= threshold else UNRESOLVED
