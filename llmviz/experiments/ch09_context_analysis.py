"""Reading chapter 9's context record: the gain from a planted copy at growing distance (read as
retrieval only where the copy's bytes must be in order, :func:`order_check`), and the
spread (dilution) of the attention with length, each with the checks that make it decidable."""

from __future__ import annotations

import math
from typing import Any

from ..evidence import Check, Claim, beats_baseline, positive_control, summarize
from . import ch09
from .ch09_analysis import not_broken_at_8t, works_within_t

__all__ = ["copy_gain", "order_check", "retrieval_claims", "dilution", "dilution_claims"]


def _context_checks(cx, v: str, bigram: float) -> list[Check]:
    """``v`` beats the byte bigram at T (its last held-out point), and the planted-copy test sees
    retrieval where the model has trained: a copy T/2 back inside a window of T lowers the loss
    of the repeat by more than 0.02 nats per byte (whole interval)."""
    control = summarize(copy_gain(cx, v, "control"))
    at_t = [math.exp(r[v]["curve"][-1]) for _, r in cx.items()]
    return [beats_baseline(at_t, bigram, name=f"{v} beats the byte bigram at T (1x tail)"),
            positive_control("the copy test sees retrieval within T (gain at T/2 > 0.02 nats)",
                             control.low > 0.02, f"{v}: {control.format('.3f')} nats per byte")]


def copy_gain(cx, v: str, key: str) -> list[float]:
    """Per seed: loss of the repeated segment without the planted copy minus with it (nats per
    byte), for the copy ``key`` bytes back (``"2T"``, ..., or ``"control"``)."""
    node = (lambda r: r[v]["control"]) if key == "control" else (lambda r: r[v]["copy"][key])
    return [node(r)["none"] - node(r)["plant"] for _, r in cx.items()]


def order_check(v: str, order: list[float], where: str = "") -> Check:
    """Whether the planted-copy test measures retrieval at all for ``v``: per seed, the loss of
    the repeat with a shuffled copy (the same bytes in a random order) minus with the copy in
    order, within T (:func:`.ch09_shuffle.order_gain`). It passes when the order is worth more
    than 0.02 nats per byte (whole interval), the bar the copy test's own control uses; a model
    that gains as much from the shuffled bytes profits from their presence, not from the string.
    ``where`` names the models it was measured on."""
    est = summarize(order)
    return positive_control("the copy's gain within T needs its bytes in order (in order minus "
                            f"shuffled > 0.02 nats{where})", est.low > 0.02,
                            f"{v}: {est.format('.3f')} nats per byte")


def retrieval_claims(cx, size: Any, bigram: float, key: str, race=None,
                     order: dict[str, list[float]] | None = None) -> dict[str, Claim]:
    """For each scheme of the context record ``cx``: a copy planted ``key`` back (in units of T)
    in a window of 8T lowers the loss of the repeat at least half as much as one T/2 back inside
    a window of T (the ratio of the two gains, per seed). With the race's runs ``race`` (the same
    models), each scheme must also work within T (:func:`works_within_t`) and not be broken at
    8T (:func:`not_broken_at_8t`): a broken model's loss at 8T has room a copy can lower without
    any retrieval. With ``order`` (per scheme, per seed: what the order of the copy's bytes is
    worth within T, :func:`order_check`), the gain must also need the bytes in order before it
    is read as retrieval."""
    out = {}
    for v in cx[cx.seeds[0]]:
        extra = [] if race is None else [works_within_t(race, v), not_broken_at_8t(race, v)]
        if order is not None:
            if v not in order:
                raise ValueError(f"order has no entry for {v!r}; pass the order gains of "
                                 f"every scheme of the record: {', '.join(cx[cx.seeds[0]])}")
            extra.append(order_check(v, order[v], " on the live models of the same recipe"))
        # a control gain at or below 0 fails the check (the verdict is then "cannot decide")
        far, near = copy_gain(cx, v, key), copy_gain(cx, v, "control")
        ratio = [a / max(b, 1e-6) for a, b in zip(far, near)]
        out[v] = Claim(f"a copy planted {key} back lowers {v}'s loss on the repeat at least half "
                       "as much as one within T", summarize(ratio), threshold=0.5, direction=">",
                       quantity=f"{v}: gain from a copy {key} back in a window of 8T / gain from "
                       "a copy T/2 back in a window of T",
                       id=f"ch09_retrieves_{key.replace('.', '_').lower()}_{v.lower()}",
                       checks=[*_context_checks(cx, v, bigram), *extra], size=size, fmt=".2f")
    return out


def dilution(cx, v: str) -> list[float]:
    """Per seed: growth of the last layer's attention entropy from T to 8T, as a share of the
    growth uniform attention's entropy makes over the same lengths (0: attention keeps its
    spread; 1: it spreads like uniform attention)."""
    a, b = f"{ch09.FACTORS[0]}x", f"{ch09.FACTORS[-1]}x"
    return [(r[v]["attention"][b]["entropy"] - r[v]["attention"][a]["entropy"])
            / (r[v]["attention"][b]["uniform_entropy"] - r[v]["attention"][a]["uniform_entropy"])
            for _, r in cx.items()]


def dilution_claims(cx, size: Any, bigram: float, race=None) -> dict[str, Claim]:
    """For each scheme: its last-layer attention dilutes with length, i.e. its entropy grows from
    T to 8T by more than half as much as uniform attention's. With the race's runs ``race``, each
    scheme must also work within T (:func:`works_within_t`)."""
    return {v: Claim(f"{v}'s attention dilutes with length like uniform attention",
                     summarize(dilution(cx, v)), threshold=0.5, direction=">",
                     quantity=f"{v}: entropy growth T to 8T / uniform attention's",
                     id=f"ch09_dilutes_{v.lower()}",
                     checks=[*_context_checks(cx, v, bigram)[:1],
                             *([] if race is None else [works_within_t(race, v)])],
                     size=size, fmt=".2f") for v in cx[cx.seeds[0]]}
