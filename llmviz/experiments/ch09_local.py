"""Chapter 9's local comparator and matched score ratio, on the race's own RoPE models.

Two questions the race record cannot answer from what it kept:

- **Does plain locality explain ALiBi's flat curve?** The same trained RoPE weights, read through
  a sliding window of T keys (``ModelConfig.sliding_window``), never see a distance they did not
  train on. Their loss on the race's scored tails at 1-8 T (``windowed_nll``) is the comparator
  the locality check needs: a model as local as this with no scheme of ALiBi's at all.
- **Are the scores past T larger when both maxima run over as many keys?** Per layer, the last
  query's largest score over the keys past T, against its largest over the T keys within T
  (``score_page``: the race's statistic, far maximum over 7T keys), and the same with the far
  maximum over a random T of the far keys, averaged over ``draws`` draws (``score_matched``).

The models are the race's (:func:`llmviz.experiments.ch09._trained`: same recipe and seed, so the
record re-trains them bit for bit); ``curve`` is their pretraining curve, as in the race.
"""

from __future__ import annotations

import dataclasses

import torch

from ..evidence import Experiment
from ..model import DecoderLM
from .. import runtime
from . import ch09
from ._ch09_probes import last_query_scores

__all__ = ["LOCAL", "LOCAL_SIZES", "matched_score_ratios", "local"]

#: the race's sizes, plus the number of random draws of T far keys for the matched ratio
LOCAL_SIZES = {size: dict(p, draws=200) for size, p in ch09.RACE_SIZES.items() if size != "full"}


@torch.no_grad()
def matched_score_ratios(model, p: dict, draws: int) -> dict[str, list[float]]:
    """Per layer: ``page``, the mean over windows and heads of (largest score past T) / (largest
    within T) for the last query of an 8T input, and ``matched``, the same with the far maximum
    taken over a random T of the far keys (mean of ``draws`` draws, seed 0)."""
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise ValueError(f"draws must be a positive int, got {draws!r}")
    T = p["seq_len"]
    L = ch09.FACTORS[-1] * T
    ends = ch09._ends(p)[: p["mech_windows"]]
    idx = ends[:, None] - L + torch.arange(L)
    gen = torch.Generator().manual_seed(0)
    pick = torch.stack([torch.randperm(L - T, generator=gen)[:T] for _ in range(draws)])
    out: dict[str, list[float]] = {"page": [], "matched": []}
    for s in last_query_scores(model, ch09.data()[1][idx]):  # (B, H, L); key j at distance L-1-j
        s = s.float().cpu()
        near = s[..., L - T:].amax(-1).mean()
        out["page"].append(float(s[..., : L - T].amax(-1).mean() / near))
        out["matched"].append(float(s[..., : L - T][..., pick].amax(-1).mean() / near))
    return out


def local(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """The race's RoPE model for ``seed`` at size ``p`` (a ``LOCAL_SIZES`` entry): ``windowed_nll``
    (mean loss of the race's scored tails at each factor, read through a window of T keys),
    ``nll`` (the same, unwindowed), ``score_page`` / ``score_matched`` (per layer, see
    :func:`matched_score_ratios`) and the pretraining ``curve``."""
    if variant != "RoPE":
        raise ValueError(f"ch09_local measures the race's RoPE models only, got variant {variant!r}")
    race_p = {k: v for k, v in p.items() if k != "draws"}
    if prefix is not None:
        return {"curve": ch09._pretrain("RoPE", seed, race_p, prefix)[1]}
    trained = ch09._trained("RoPE", seed, race_p)
    model = ch09._load("RoPE", race_p, trained["state"])
    windowed_cfg = dataclasses.replace(ch09.config_for("RoPE", race_p), sliding_window=race_p["seq_len"])
    windowed = DecoderLM(windowed_cfg).to(runtime.device())
    windowed.load_state_dict(trained["state"])
    windowed.eval()
    scores = matched_score_ratios(model, race_p, p["draws"])
    return {"curve": trained["curve"], "nll": ch09._lengths_nll(model, race_p)[0],
            "windowed_nll": ch09._lengths_nll(windowed, race_p)[0],
            "score_page": scores["page"], "score_matched": scores["matched"]}


LOCAL = Experiment("ch09_local", local, variants=["RoPE"], seeds=[0, 1, 2], sizes=LOCAL_SIZES,
                   prefix=100, description="the race's RoPE models read through a window of T keys, "
                                           "and their score ratio with both maxima over T keys")
