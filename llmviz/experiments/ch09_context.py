"""Chapter 9: does a model that survives a long input *use* it? Measured on the race's models.

:func:`context` takes the model :func:`llmviz.experiments.ch09.race` trains for a scheme and a
seed (the same recipe, so the same weights: its held-out curve is recorded and must equal the
race's) and measures three things the race's aggregate perplexities cannot show:

* ``by_position`` / ``sliding_by_position``: loss at every position of a window of 8T, and the
  same targets each read with exactly T tokens before it (the model's training distribution), in
  bins of T/8. Past T, the first below the second means the model reads further back than T.
* ``copy``: retrieval of a planted string. The last ``copy_len`` bytes of a window are a segment
  from elsewhere in the held-out text; the same segment is planted ``d`` bytes earlier. The loss
  of the last copy (its first byte excepted) with and without the planted one: the difference is
  what reading ``d`` bytes back is worth. ``control`` is the same test inside a window of T.
* ``attention``: the last layer's attention of the scored queries at each evaluation length
  (share at distance >= T, entropy, uniform attention's entropy at that length, and the weight
  the 5 largest weights of a query carry), per query, then averaged.
* ``scores`` (RoPE only, plain and under PI): per layer, the largest score of the last query
  over the keys past T and over the keys within T, per window and head, then averaged.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..evidence import Experiment
from ..training.evaluation import model_device
from . import ch09
from ._ch09_probes import last_query_scores, sliding_losses, window_losses

__all__ = ["CONTEXT", "CONTEXT_SCHEMES", "CONTEXT_SIZES", "copy_losses", "position_losses",
           "attention_spread", "max_scores", "context"]

#: the schemes that survive past T in the race, and RoPE, which does not (a reference)
CONTEXT_SCHEMES = ("ALiBi", "T5", "NoPE", "RoPE")
_EXTRA = ("copy_len", "copy_distances")  # this experiment's parameters on top of the race's
CONTEXT_SIZES = {size: dict(p, copy_len=16, copy_distances=[0.5, 2, 4, 7])
                 for size, p in ch09.RACE_SIZES.items()}


@torch.no_grad()
def copy_losses(model, tokens: torch.Tensor, ends: torch.Tensor, length: int, distance: int,
                copy_len: int) -> dict[str, float]:
    """Mean loss of the last ``copy_len - 1`` targets of windows of ``length`` (inputs) ending at
    ``ends``, whose last ``copy_len`` targets are replaced by a segment taken half the held-out
    text away; ``plant``: with the segment also ``distance`` bytes earlier, ``none``: without."""
    if copy_len < 2 or distance < copy_len:
        raise ValueError(f"need copy_len >= 2 and distance >= copy_len (no overlap), got "
                         f"copy_len={copy_len}, distance={distance}")
    start = length + 1 - copy_len - distance  # where the planted copy begins in the window
    if start < 0:
        raise ValueError(f"distance {distance} + copy_len {copy_len} does not fit a window of "
                         f"{length}; use a distance up to {length + 1 - copy_len}")
    device = model_device(model)
    model.eval()
    n = len(ends)
    windows = tokens[ends[:, None] - length + torch.arange(length + 1)]  # (n, L + 1)
    source = ends.roll(n // 2)  # another window's last bytes, far from this one
    segment = tokens[source[:, None] - copy_len + 1 + torch.arange(copy_len)]
    windows[:, -copy_len:] = segment
    planted = windows.clone()
    planted[:, start:start + copy_len] = segment
    out = {}
    for key, w in (("none", windows), ("plant", planted)):
        w = w.to(device)
        logits = model(w[:, :-1]).logits[:, 1 - copy_len:].float()  # they predict segment[1:]
        out[key] = float(F.cross_entropy(logits.transpose(1, 2), w[:, 1 - copy_len:]))
    return out


def position_losses(model, tokens: torch.Tensor, ends: torch.Tensor, length: int, context: int,
                    bins: int) -> tuple[list[float], list[float]]:
    """Loss by position in windows of ``length`` (``bins`` equal bins), and the same targets each
    read with exactly ``context`` tokens before it. Windows too close to the start of ``tokens``
    for every target to have ``context`` tokens before it are left out of both."""
    if length % bins:
        raise ValueError(f"bins ({bins}) must divide length ({length})")
    ends = ends[ends - length + 1 >= context]
    if not len(ends):
        raise ValueError(f"no window of {length} leaves {context} tokens before its first target")
    targets = ends[:, None] - length + 1 + torch.arange(length)  # (n, L)
    full = window_losses(model, tokens, ends, length)
    slide = sliding_losses(model, tokens, targets, context).view(len(ends), length)
    return ([float(x) for x in full.mean(0).view(bins, -1).mean(1)],
            [float(x) for x in slide.mean(0).view(bins, -1).mean(1)])


@torch.no_grad()
def attention_spread(model, tokens: torch.Tensor, ends: torch.Tensor, length: int, tail: int,
                     top: int = 5) -> dict[str, float]:
    """Last layer, the last ``tail`` queries of windows of ``length``: share of attention at
    distance >= ``tail``, entropy (nats) and uniform attention's, and the weight of the ``top``
    largest weights; each per query (and head), then averaged."""
    model.eval()
    idx = ends[:, None] - length + torch.arange(length)
    w = model(tokens[idx].to(model_device(model)), return_weights=True).weights[-1]
    w = w[:, :, -tail:, :].float()  # (B, H, tail, length)
    query = torch.arange(length - tail, length, device=w.device)[:, None]
    far = (torch.arange(length, device=w.device)[None] <= query - tail).float()  # distance >= tail
    return {"far_mass": float((w * far).sum(-1).mean()),
            "entropy": float(-(w * w.clamp_min(1e-30).log()).sum(-1).mean()),
            "uniform_entropy": sum(math.log(q + 1) for q in range(length - tail, length)) / tail,
            "top_mass": float(w.topk(min(top, length), dim=-1).values.sum(-1).mean())}


def max_scores(model, tokens: torch.Tensor, ends: torch.Tensor, length: int,
               train_len: int) -> dict[str, list[float]]:
    """RoPE, per layer: the largest score q.k/sqrt(d) of the last query over the keys at
    distance >= ``train_len`` (``far``) and below it (``near``), per window and head, averaged."""
    idx = ends[:, None] - length + torch.arange(length)
    out: dict[str, list[float]] = {"far": [], "near": []}
    for s in last_query_scores(model, tokens[idx]):  # (B, H, L); key j is at distance L-1-j
        out["far"].append(float(s[..., : length - train_len].amax(-1).mean()))
        out["near"].append(float(s[..., length - train_len:].amax(-1).mean()))
    return out


def context(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """Measure the race's model for ``variant`` and ``seed`` at size ``p`` (a ``CONTEXT_SIZES``
    entry). ``curve`` is its pretraining curve, as in :func:`llmviz.experiments.ch09.race`."""
    race_p = {k: v for k, v in p.items() if k not in _EXTRA}
    if prefix is not None:
        return {"curve": ch09._pretrain(variant, seed, race_p, prefix)[1]}
    trained = ch09._trained(variant, seed, race_p)
    model = ch09._load(variant, race_p, trained["state"])
    tokens, T, ends = ch09.data()[1], p["seq_len"], ch09._ends(race_p)
    longest = ch09.FACTORS[-1] * T
    full, slide = position_losses(model, tokens, ends, longest, T, longest // (T // 8))
    k = p["copy_len"]
    copy = {f"{d}T": copy_losses(model, tokens, ends, longest, round(d * T), k)
            for d in p["copy_distances"]}
    control = copy_losses(model, tokens, ends, T, T // 2, k)
    mech = ends[: p["mech_windows"]]
    attention = {f"{f}x": attention_spread(model, tokens, mech, f * T, T) for f in ch09.FACTORS}
    out = {"curve": trained["curve"], "by_position": full, "sliding_by_position": slide,
           "copy": copy, "control": control, "attention": attention}
    if variant == "RoPE":
        pi = ch09._load(variant, race_p, trained["state"], ch09.stretch_scaling("PI", race_p))
        out["scores"] = {k: max_scores(m, tokens, mech, longest, T)
                         for k, m in (("plain", model), ("PI", pi))}
    return out


CONTEXT = Experiment("ch09_context", context, variants=list(CONTEXT_SCHEMES), seeds=[0, 1, 2],
                     sizes=CONTEXT_SIZES, prefix=100,
                     description="the race's models: loss by position against a sliding window, "
                                 "planted-string retrieval, attention entropy by length")
