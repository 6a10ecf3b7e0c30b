"""Reading a learning-rate sweep out of a record or a live run (chapters 12 and 13).

A record of variants named ``"<group>@<lr>"`` trains every group (a feed-forward, a depth) at a
few peak rates on the same seeds. :func:`best_rates` picks each group's rate by the mean over
seeds of the final held-out loss (the same seeds the comparison then uses: a small selection
bias, shared by every group), and :func:`inside_grid` is the validity check that the chosen rate
is not at the edge of the grid, where a better rate may lie outside it.
"""

from __future__ import annotations

import math
from typing import Any

from ..evidence import Check, Runs

__all__ = ["rates_of", "best_rates", "inside_grid", "mean_loss", "merge_runs"]


def merge_runs(*runs: Any) -> Runs:
    """One :class:`~llmviz.evidence.Runs` holding the variants of several runs on the same seeds
    (a record and its supplement): ValueError if the seeds differ or a variant is in two."""
    if not runs:
        raise ValueError("merge_runs needs at least one run, e.g. merge_runs(record.runs, extra.runs)")
    seeds = list(runs[0].seeds)
    for r in runs[1:]:
        if list(r.seeds) != seeds:
            raise ValueError(f"cannot merge runs on seeds {list(r.seeds)} with runs on seeds {seeds}")
    merged: dict = {s: {} for s in seeds}
    for r in runs:
        for s in seeds:
            both = set(merged[s]) & set(r[s])
            if both:
                raise ValueError(f"variants {sorted(both)} are in more than one of the merged runs")
            merged[s].update(r[s])
    return Runs(merged)


def _split(name: str) -> tuple[str, float]:
    if not isinstance(name, str) or "@" not in name:
        raise ValueError(f"variant {name!r} is not of the form '<group>@<lr>'")
    group, lr = name.rsplit("@", 1)
    return group, float(lr)


def rates_of(variants: Any) -> dict[str, list[float]]:
    """``{group: sorted peak rates}`` of variants named ``"<group>@<lr>"``."""
    out: dict[str, list[float]] = {}
    for name in variants:
        group, lr = _split(name)
        out.setdefault(group, []).append(lr)
    return {g: sorted(r) for g, r in out.items()}


def mean_loss(runs: Any, variant: str, key: str = "val_loss") -> float:
    """Mean over seeds of ``key`` (``nan`` if any seed diverged)."""
    values = runs.values(variant, key)
    return sum(values) / len(values) if all(math.isfinite(v) for v in values) else math.nan


def best_rates(runs: Any, variants: Any, key: str = "val_loss") -> dict[str, float]:
    """``{group: the rate with the lowest mean key over seeds}`` (a diverged rate never wins)."""
    best = {}
    for group, rates in rates_of(variants).items():
        losses = {lr: mean_loss(runs, f"{group}@{lr:g}", key) for lr in rates}
        finite = {lr: v for lr, v in losses.items() if math.isfinite(v)}
        if not finite:
            raise ValueError(f"every rate of {group!r} diverged: {losses}")
        best[group] = min(finite, key=finite.get)
    return best


def inside_grid(group: str, rate: float, rates: Any) -> Check:
    """Check: ``rate``, chosen for ``group``, lies strictly inside the grid ``rates``."""
    rates = sorted(rates)
    ok = len(rates) >= 3 and rates[0] < rate < rates[-1]
    where = "inside" if ok else "at the edge of"
    return Check(f"{group}: best rate inside the grid", ok,
                 f"{rate:g} is {where} the grid {', '.join(f'{r:g}' for r in rates)}")
