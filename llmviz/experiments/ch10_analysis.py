"""Reading chapter 10's LayerNorm-vs-RMSNorm runs (live or recorded): checks and claims.

"RMSNorm trains as well as LayerNorm" is an equivalence, so it is tested as two one-sided
claims on the paired difference loss(RMSNorm) - loss(LayerNorm): below +``MARGIN`` and above
-``MARGIN``. Both holding means the difference lies inside the margin. The checks: both models
beat the strongest byte n-gram on the same targets (:func:`llmviz.experiments.ch10.strongest_ngram`;
a comparison of models that have learned less than counting is not informative), and the seeds
can detect a difference of ``MARGIN``.
"""

from __future__ import annotations

from typing import Any

from ..evidence import Check, Claim, beats_baseline, can_detect, paired
from . import ch10

__all__ = ["MARGIN", "norm_diff", "norm_checks", "norm_claims", "longer_training_floor"]

#: nats/byte: the largest held-out difference still read as "trains as well". A choice made
#: before the runs (about 2% of the record's loss), not derived from data; it is not small next
#: to other architecture effects (chapter 12's gated-vs-plain feed-forward gap), so "no worse"
#: means "within this margin", and the page says so
MARGIN = 0.03


def norm_diff(runs):
    """Paired estimate of loss(RMSNorm) - loss(LayerNorm) over the seeds (nats/byte)."""
    return paired(runs.values("RMSNorm", "val_loss"), runs.values("LayerNorm", "val_loss"))


def norm_checks(runs, baseline: float, baseline_name: str = "the byte n-gram") -> list[Check]:
    """Both norms beat ``baseline`` (the n-gram's loss); the seeds can detect ``MARGIN``."""
    losses = {v: runs.values(v, "val_loss") for v in ch10.VARIANTS}
    return [beats_baseline(losses, baseline, name=f"both models beat {baseline_name}"),
            can_detect(norm_diff(runs), MARGIN,
                       name=f"the seeds can detect a difference of {MARGIN:g} nats")]


def norm_claims(runs, size: Any, baseline: float, suffix: str = "",
                baseline_name: str = "the byte n-gram") -> dict[str, Claim]:
    """The two one-sided claims, decided from ``runs`` (labelled with ``size``) behind the gate
    ``baseline`` (the loss of the n-gram named ``baseline_name``)."""
    est, checks = norm_diff(runs), norm_checks(runs, baseline, baseline_name)
    q = "loss(RMSNorm) - loss(LayerNorm), nats/byte"
    kw = dict(quantity=q, size=size, checks=checks, fmt=".3f",
              chapter="10_normalisation")
    return {
        "not_worse": Claim(f"RMSNorm trains no worse than LayerNorm: its held-out loss ends less "
                           f"than {MARGIN:g} nats above", est, threshold=MARGIN, direction="<",
                           id=f"ch10_rms_not_worse{suffix}", **kw),
        "not_better": Claim(f"RMSNorm trains no better than LayerNorm: its held-out loss ends less "
                            f"than {MARGIN:g} nats below", est, threshold=-MARGIN, direction=">",
                            id=f"ch10_rms_not_better{suffix}", **kw),
    }


def longer_training_floor() -> dict[str, Any]:
    """What the book's longest-trained record says about passing the n-gram gate by training longer.

    Reads ``ch15_llama`` (a larger model than chapters 10, 12 and 13 train, trained for more steps)
    and compares the lowest point of each seed's held-out curve with the strongest byte n-gram on
    the same targets. Returns ``lows`` (per seed), ``gate``, ``steps``, ``passes`` (over the
    training text), ``d_model``, ``n_layers``, ``rises`` (the loss ends above its lowest point in
    every seed), ``passed`` (some seed's lowest point is below the gate) and ``text``, a sentence
    for the pages; raises FileNotFoundError when the record is absent.
    """
    from . import ch15

    rec = ch15.LLAMA.record("long")
    p = rec.params
    curves = rec.runs.curves("llama", "curve")
    lows = [min(c) for c in curves]
    gate = ch10.strongest_ngram(p["seq_len"])
    passes = p["steps"] * p["batch_size"] * p["seq_len"] / len(ch10.data()[0])
    rises = all(c[-1] - min(c) > 0.01 for c in curves)
    passed = min(lows) < gate.loss
    text = (f"the book's longest-trained record, ch15_llama (width {p['d_model']}, {p['n_layers']} layers, "
            f"{p['steps']} steps, {passes:.1f} passes over the training text), bottoms out at "
            f"{', '.join(f'{x:.3f}' for x in lows)} nats/byte per seed against the {gate.name}'s {gate.loss:.3f}"
            + (", and its loss rises after that low point" if rises else "")
            + (": at this scale the gate is not passed by training longer" if not passed else
               ": training longer does pass the gate at that size"))
    return {"lows": lows, "gate": gate.loss, "steps": p["steps"], "passes": passes, "d_model": p["d_model"],
            "n_layers": p["n_layers"], "rises": rises, "passed": passed, "text": text}
