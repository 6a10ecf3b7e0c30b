"""Reading chapter 10's LayerNorm-vs-RMSNorm runs (live or recorded): checks and claims.

"RMSNorm trains as well as LayerNorm" is an equivalence, so it is tested as two one-sided
claims on the paired difference loss(RMSNorm) - loss(LayerNorm): below +``MARGIN`` and above
-``MARGIN``. Both holding means the difference lies inside the margin. The checks: both models
beat the byte 5-gram on the same targets (a comparison of models that have learned less than
counting is not informative), and the seeds can detect a difference of ``MARGIN``.
"""

from __future__ import annotations

from typing import Any

from ..evidence import Check, Claim, beats_baseline, can_detect, paired
from . import ch10

__all__ = ["MARGIN", "norm_diff", "norm_checks", "norm_claims"]

#: nats/byte: the largest held-out difference still read as "trains as well"
MARGIN = 0.03


def norm_diff(runs):
    """Paired estimate of loss(RMSNorm) - loss(LayerNorm) over the seeds (nats/byte)."""
    return paired(runs.values("RMSNorm", "val_loss"), runs.values("LayerNorm", "val_loss"))


def norm_checks(runs, ngram5: float) -> list[Check]:
    """Both norms beat the byte 5-gram; the seeds can detect a difference of ``MARGIN``."""
    losses = {v: runs.values(v, "val_loss") for v in ch10.VARIANTS}
    return [beats_baseline(losses, ngram5, name="both models beat the byte 5-gram"),
            can_detect(norm_diff(runs), MARGIN,
                       name=f"the seeds can detect a difference of {MARGIN:g} nats")]


def norm_claims(runs, size: Any, ngram5: float, suffix: str = "") -> dict[str, Claim]:
    """The two one-sided claims, decided from ``runs`` (labelled with ``size``)."""
    est, checks = norm_diff(runs), norm_checks(runs, ngram5)
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
