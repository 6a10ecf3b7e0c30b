"""Chapter 9's two sensitivity runs, on the race's own recipe and seeds.

- **What does a RoPE scaling's perplexity at 8T rank?** The race's RoPE models, stretched by PI,
  YaRN and Llama 3's scaling (the stretch run's factor, no fine-tune), scored on the race's tails
  at 1-8 T twice: with full attention (``nll``, as the stretch run does) and through a sliding
  window of T keys (``windowed_nll``), so that no key past T is ever read. Where the ranking
  among the scalings survives the window, it ranks what each scaling does to attention within
  T, not how well it uses context past T.
- **How much of T5's failure past T depends on its bucket layout?** The race's T5 arm with
  another layout: 16 causal buckets ending at T/4 (``max_distance = T // 4``) instead of 32
  ending at T, so that in training the last bucket holds most distances of a window, as T5's
  encoder's does, instead of a handful. That changes two things at once (the number of buckets
  and where they end), so the run compares two layouts and does not separate the two changes.
  Same data, seed, steps and evaluation as the race.

Variant ``"RoPE"`` gives the first (``curve``: the race model's pretraining curve), ``"T5 T/4"``
the second (``curve``: its own pretraining curve; ``nll``, ``sliding`` and ``attention`` as in
the race).
"""

from __future__ import annotations

import dataclasses

import torch

from .. import runtime
from ..evidence import Experiment
from ..model import DecoderLM
from ..position.t5_bias import T5BiasSettings
from ..training import TrainConfig, train
from ..training.evaluation import tail_targets
from . import ch09
from ._ch09_probes import attention_probe, sliding_losses

__all__ = ["SENSITIVITY", "SENSITIVITY_SIZES", "SCALINGS", "quarter_t5_config", "sensitivity"]

#: the race's sizes (the full size is left to a GPU)
SENSITIVITY_SIZES = {size: dict(p) for size, p in ch09.RACE_SIZES.items() if size != "full"}
#: the scalings scored with and without the window (the ones the stretch boxes rank)
SCALINGS = ("RoPE", "PI", "YaRN", "Llama 3")


def quarter_t5_config(p: dict):
    """The race's T5 recipe with 16 causal buckets ending at T/4 (the race: 32 ending at T)."""
    T = p["seq_len"]
    if T // 4 < 16:
        raise ValueError(f"buckets ending at T/4 need T >= 64 (16 exact buckets), got T={T}")
    return dataclasses.replace(ch09.config_for("T5", p),
                               t5_bias=T5BiasSettings(num_buckets=16, max_distance=T // 4,
                                                      per_layer=False))


def _pretrain_quarter_t5(seed: int, p: dict, prefix: int | None):
    """The race's ``_pretrain`` for T5 with :func:`quarter_t5_config` (same seed, batches, steps)."""
    torch.manual_seed(seed)
    model = DecoderLM(quarter_t5_config(p)).to(runtime.device())
    curve = [ch09._held_out(model, p)]

    class _Stop(Exception):
        pass

    def point(step: int, m) -> float:
        curve.append(ch09._held_out(m, p))
        if prefix is not None and step >= prefix:
            raise _Stop
        return curve[-1]

    cfg = TrainConfig(steps=p["steps"], lr=p["lr"], warmup=p["steps"] // 10, seed=seed,
                      batch_size=p["batch_size"], seq_len=p["seq_len"], eval_every=p["curve_every"])
    try:
        with torch.enable_grad():
            train(model, ch09.data()[0], config=cfg, callbacks={"curve": point}, progress=False)
    except _Stop:
        pass
    return model.eval(), curve


@torch.no_grad()
def sensitivity(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One seed of the sensitivity runs at size ``p`` (a ``SENSITIVITY_SIZES`` entry); see the
    module docstring for the two variants."""
    if variant == "T5 T/4":
        model, curve = _pretrain_quarter_t5(seed, p, prefix)
        if prefix is not None:
            return {"curve": curve}
        tokens, T, ends = ch09.data()[1], p["seq_len"], ch09._ends(p)
        return {"curve": curve, "nll": ch09._lengths_nll(model, p)[0],
                "sliding": float(sliding_losses(model, tokens, tail_targets(ends, T), T).mean()),
                "attention": attention_probe(model, tokens, ends[: p["mech_windows"]],
                                             ch09.FACTORS[-1] * T, T)}
    if variant != "RoPE":
        raise ValueError(f"ch09_sensitivity has variants 'RoPE' and 'T5 T/4', got {variant!r}")
    if prefix is not None:
        return {"curve": ch09._pretrain("RoPE", seed, p, prefix)[1]}
    trained = ch09._trained("RoPE", seed, p)
    out = {"curve": trained["curve"], "nll": {}, "windowed_nll": {}}
    for name in SCALINGS:
        cfg = ch09.config_for("RoPE", p, ch09.stretch_scaling(name, p))
        for key, c in (("nll", cfg), ("windowed_nll",
                                      dataclasses.replace(cfg, sliding_window=p["seq_len"]))):
            model = DecoderLM(c).to(runtime.device())
            model.load_state_dict(trained["state"])
            out[key][name] = ch09._lengths_nll(model.eval(), p)[0]
    return out


SENSITIVITY = Experiment("ch09_sensitivity", sensitivity, variants=["RoPE", "T5 T/4"],
                         seeds=[0, 1, 2], sizes=SENSITIVITY_SIZES, prefix=100,
                         description="the race's RoPE models under PI, YaRN and Llama 3 with and "
                                     "without a window of T keys, and T5 with buckets ending at T/4")
