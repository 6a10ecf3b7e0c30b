"""Chapter 9's experiments: the length-extrapolation race and the RoPE stretch sweep.

* :func:`race` trains one position scheme with one seed on short windows (T bytes of the prose
  corpus) and measures it on the same targets at 1, 2, 4 and 8 T, against an in-distribution
  reference (each target read with exactly T tokens before it), by position inside the longest
  window, and through its attention (share past T against uniform attention).
* :func:`stretch` takes the RoPE model of the same recipe and seed, rescales its frequencies
  (PI, NTK-aware, dynamic NTK, YaRN, Llama 3) and fine-tunes it on windows of 8T.

Both build every model and tensor on :func:`llmviz.device` and return plain numbers, so a run
can be stored as a record. ``prefix=k`` stops at the first curve point at or after k training
steps and returns the held-out curve measured so far (``curve[i]`` = loss on the scored targets at T after ``i * curve_every``
steps, from step 0), which is what a reproducibility check re-runs.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import os
import tempfile
from pathlib import Path

import torch

from .. import runtime
from ..evidence import Experiment
from ..evidence.records import RECORDING_ENV
from ..model import DecoderLM
from ..model.config import ModelConfig
from ..position.rope import RopeScaling
from ..position.t5_bias import T5BiasSettings
from ..training import TrainConfig, train
from ..training.data import ByteTokenizer, load_corpus, train_val_split
from ..training.evaluation import score_tails, tail_ends, tail_targets
from ._ch09_probes import (attention_probe, rope_score_ratios, sinusoidal_norms, sliding_losses,
                           window_losses)

__all__ = ["RACE", "STRETCH", "SCHEMES", "STRETCHES", "RACE_SIZES", "STRETCH_SIZES", "FACTORS", "data", "config_for",
           "stretch_scaling", "race", "stretch", "trained_model"]

#: scheme name -> ``ModelConfig.position``
SCHEMES = {"ALiBi": "alibi", "sinusoidal": "sinusoidal", "learned": "learned", "RoPE": "rope",
           "NoPE": "none", "T5": "t5"}
#: the ways of stretching a trained RoPE model (``dynamic NTK`` is zero-shot only)
STRETCHES = ("RoPE", "PI", "NTK-aware", "YaRN", "YaRN, no temperature", "Llama 3", "dynamic NTK")
FACTORS = (1, 2, 4, 8)  # evaluation lengths, in units of the training length T
_MODEL = dict(d_model=48, n_layers=2, n_heads=4, seq_len=64, lr=5e-3, n_ends=96, mech_windows=8)
#: ``cpu`` is the chapter's live run; ``long`` is where every model beats the byte bigram
RACE_SIZES = {
    "cpu": dict(_MODEL, batch_size=10, steps=200, curve_every=25),
    "long": dict(_MODEL, batch_size=32, steps=1600, curve_every=100),
    # full: a larger model trained longer on the same task geometry (T and the 96 scored
    # windows of the record), so the page reads the live and recorded runs on the same targets
    "full": dict(d_model=256, n_layers=4, n_heads=8, seq_len=64, lr=2e-3, n_ends=96,
                 mech_windows=8, batch_size=32, steps=4000, curve_every=250),
}
STRETCH_SIZES = {size: dict(p, ft_steps=ft, ft_batch=fb) for (size, p), (ft, fb) in zip(
    RACE_SIZES.items(), (([8, 32], 1), ([16, 64, 160], 1), ([25, 100, 400], 8)))}


class _Prefix(Exception):
    """Raised by the curve callback to stop a run after its prefix."""


@functools.lru_cache(maxsize=1)
def data() -> tuple[torch.Tensor, torch.Tensor]:
    """The byte streams: (training tokens, held-out tokens), the last 10 % held out."""
    tokens = ByteTokenizer().encode(load_corpus("prose"))
    return train_val_split(tokens, 0.1)


def _ends(p: dict) -> torch.Tensor:
    return tail_ends(len(data()[1]), max_length=FACTORS[-1] * p["seq_len"], tail=p["seq_len"],
                     n_ends=p["n_ends"])


def config_for(scheme: str, p: dict, scaling: RopeScaling | None = None) -> ModelConfig:
    """The shared recipe of size ``p`` with position scheme ``scheme`` (and a RoPE scaling)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; use one of {list(SCHEMES)}")
    T = p["seq_len"]
    return ModelConfig(
        vocab_size=256, d_model=p["d_model"], n_layers=p["n_layers"], n_heads=p["n_heads"],
        max_seq_len=FACTORS[-1] * T, norm="layer", ffn="mlp", position=SCHEMES[scheme],
        embed_scale=scheme == "sinusoidal", rope_scaling=scaling,
        # T5's bias: one table of causal buckets for the stack (as in T5), ending at T
        t5_bias=T5BiasSettings(num_buckets=32, max_distance=T, per_layer=False)
        if scheme == "T5" else None)


def stretch_scaling(name: str, p: dict) -> RopeScaling | None:
    """The RoPE scaling called ``name`` for a stretch by the largest factor (8) from T."""
    T, s = p["seq_len"], float(FACTORS[-1])
    table = {"RoPE": None, "PI": RopeScaling("linear", factor=s),
             "NTK-aware": RopeScaling("ntk", factor=s),
             "YaRN": RopeScaling("yarn", factor=s, original_max_position_embeddings=T),
             "YaRN, no temperature": RopeScaling("yarn", factor=s, attention_factor=1.0,
                                                 original_max_position_embeddings=T),
             "Llama 3": RopeScaling("llama3", factor=s, original_max_position_embeddings=T),
             "dynamic NTK": RopeScaling("dynamic", factor=1.0, original_max_position_embeddings=T)}
    if name not in table:
        raise ValueError(f"unknown stretch {name!r}; use one of {list(table)}")
    return table[name]


def _check_prefix(prefix: int | None, steps: int) -> None:
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or not 1 <= prefix <= steps):
        raise ValueError(f"prefix must be an int number of training steps in [1, {steps}], "
                         f"got {prefix!r}")


def _held_out(model, p: dict) -> float:
    return float(score_tails(model, data()[1], p["seq_len"], _ends(p), tail=p["seq_len"]).mean())


def _pretrain(scheme: str, seed: int, p: dict, prefix: int | None) -> tuple[DecoderLM, list]:
    """Train the scheme on windows of T; returns (model, held-out curve from step 0)."""
    _check_prefix(prefix, p["steps"])
    torch.manual_seed(seed)  # the seed sets the initialisation and (below) the batches
    model = DecoderLM(config_for(scheme, p)).to(runtime.device())
    curve = [_held_out(model, p)]

    def point(step: int, m) -> float:
        curve.append(_held_out(m, p))
        if prefix is not None and step >= prefix:  # the first curve point at or past the prefix
            raise _Prefix
        return curve[-1]

    cfg = TrainConfig(steps=p["steps"], lr=p["lr"], warmup=p["steps"] // 10, seed=seed,
                      batch_size=p["batch_size"], seq_len=p["seq_len"], eval_every=p["curve_every"])
    try:
        with torch.enable_grad():  # callers may compute without gradients (a chapter's no_grad)
            train(model, data()[0], config=cfg, callbacks={"curve": point}, progress=False)
    except _Prefix:
        pass
    return model, curve


def _cache_path(scheme: str, seed: int, p: dict) -> Path:
    key = json.dumps([scheme, seed, p, _code_hash()], sort_keys=True)
    return Path(tempfile.gettempdir()) / "llmviz_ch09" / (hashlib.sha1(key.encode()).hexdigest() + ".pt")


#: the library code a trained model depends on (the cache of trained models is keyed on it)
_TRAINING_CODE = ("model", "position", "attention", "norm", "training", "ffn.py", "runtime.py",
                  "_checks.py")


@functools.lru_cache(maxsize=1)
def _code_hash() -> str:
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha1()
    for part in _TRAINING_CODE:
        for f in sorted((root / part).rglob("*.py")) if (root / part).is_dir() else [root / part]:
            h.update(f.read_bytes())
    for fn in (data, _ends, config_for, _held_out, _pretrain):
        h.update(inspect.getsource(fn).encode())
    return h.hexdigest()


def _save(model, curve: list, scheme: str, seed: int, p: dict) -> None:
    path = _cache_path(scheme, seed, p)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{seed}.{id(model)}.tmp")
    torch.save({"state": {k: v.cpu() for k, v in model.state_dict().items()}, "curve": curve}, tmp)
    tmp.replace(path)


def _trained(scheme: str, seed: int, p: dict) -> dict:
    """{"state", "curve"} of the (scheme, seed, size) run: from this machine's cache, or trained."""
    path = _cache_path(scheme, seed, p)
    if os.environ.get(RECORDING_ENV):  # a record is being made: run the code, do not read a cache
        model, curve = _pretrain(scheme, seed, p, None)
        return {"state": model.state_dict(), "curve": curve}
    if not path.exists():
        model, curve = _pretrain(scheme, seed, p, None)
        _save(model, curve, scheme, seed, p)
    return torch.load(path, map_location=runtime.device())


def _load(scheme: str, p: dict, state: dict, scaling: RopeScaling | None = None) -> DecoderLM:
    model = DecoderLM(config_for(scheme, p, scaling)).to(runtime.device())
    model.load_state_dict(state)
    return model.eval()


def trained_model(scheme: str, seed: int, p: dict, scaling: RopeScaling | None = None) -> DecoderLM:
    """The model :func:`race` trained for (scheme, seed, size ``p``), on :func:`llmviz.device`
    (read back from this machine's cache, trained if absent), with ``scaling`` on RoPE."""
    p = {k: v for k, v in p.items() if k not in ("ft_steps", "ft_batch")}
    return _load(scheme, p, _trained(scheme, seed, p)["state"], scaling)


def _lengths_nll(model, p: dict) -> tuple[dict, torch.Tensor]:
    """Mean loss on the scored tails at each factor, and loss by position at the longest."""
    tokens, T = data()[1], p["seq_len"]
    out, by_pos = {}, None
    for f in FACTORS:
        losses = window_losses(model, tokens, _ends(p), f * T)  # (n_ends, f T)
        out[f"{f}x"] = float(losses[:, -T:].mean())
        by_pos = losses.mean(0)
    return out, by_pos


def race(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """Train scheme ``variant`` with ``seed`` at size ``p`` (a ``RACE_SIZES`` entry), measure it.

    Returns ``curve`` (held-out loss at T from step 0, every ``curve_every`` steps), ``nll``
    (mean loss of the scored tails at each factor), ``sliding`` (the same targets, each read
    with exactly T tokens before it), ``by_position`` (loss at 8T by position, in bins of T/8),
    ``attention`` (last layer at 8T: share past T, entropy, uniform attention's entropy),
    RoPE's ``score_ratio`` per layer (plain and PI) and sinusoidal's embedding ``norms``.
    """
    if prefix is not None:
        return {"curve": _pretrain(variant, seed, p, prefix)[1]}
    trained = _trained(variant, seed, p)  # trained here, or by an earlier call
    curve, model = trained["curve"], _load(variant, p, trained["state"])
    tokens, T, ends = data()[1], p["seq_len"], _ends(p)
    nll, by_pos = _lengths_nll(model, p)
    mech = ends[: p["mech_windows"]]
    out = {"curve": curve, "nll": nll,
           "sliding": float(sliding_losses(model, tokens, tail_targets(ends, T), T).mean()),
           "by_position": by_pos.view(-1, T // 8).mean(1).tolist(),
           "attention": attention_probe(model, tokens, mech, FACTORS[-1] * T, T)}
    if variant == "RoPE":
        pi = _load("RoPE", p, trained["state"], stretch_scaling("PI", p))
        out["score_ratio"] = {"plain": rope_score_ratios(model, tokens, mech, FACTORS[-1] * T, T),
                              "PI": rope_score_ratios(pi, tokens, mech, FACTORS[-1] * T, T)}
    if variant == "sinusoidal":
        used = torch.bincount(data()[0], minlength=256) > 0
        torch.manual_seed(seed)
        init = DecoderLM(config_for(variant, p)).to(runtime.device())
        out["norms"] = {"trained": sinusoidal_norms(model, used, T),
                        "init": sinusoidal_norms(init, used, T)}
    return out


def stretch(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """The RoPE model of :func:`race` (same size and seed) stretched by ``variant``: zero-shot
    ``nll`` at each factor, then (all but dynamic NTK) a fine-tune on windows of 8T with a
    constant lr/3, the same batches for every variant, scored at 8T at each of ``ft_steps``
    (``ft_nll``, step 0 = zero-shot). ``curve`` is the pretraining curve (see :func:`race`)."""
    scaling = stretch_scaling(variant, p)
    if prefix is not None:
        return {"curve": _pretrain("RoPE", seed, p, prefix)[1]}
    race_p = {k: v for k, v in p.items() if k not in ("ft_steps", "ft_batch")}
    trained = _trained("RoPE", seed, race_p)
    model = _load("RoPE", race_p, trained["state"], scaling)
    out = {"curve": trained["curve"]}
    out["nll"], by_pos = _lengths_nll(model, race_p)
    out["by_position"] = by_pos.view(-1, p["seq_len"] // 8).mean(1).tolist()
    if variant == "dynamic NTK":
        return out
    tokens, T, ends = data()[1], p["seq_len"], _ends(p)
    steps = list(p["ft_steps"])
    ft = [out["nll"][f"{FACTORS[-1]}x"]]

    def checkpoint(step: int, m) -> float:
        if step in steps:
            ft.append(float(score_tails(m, tokens, FACTORS[-1] * T, ends, tail=T).mean()))
        return 0.0

    every = math.gcd(*steps)
    cfg = TrainConfig(steps=steps[-1], lr=p["lr"] / 3, warmup=2, schedule="constant",
                      batch_size=p["ft_batch"], seq_len=FACTORS[-1] * T, eval_every=every,
                      seed=100 + seed)
    train(model, data()[0], config=cfg, callbacks={"checkpoint": checkpoint}, progress=False)
    out["ft_nll"] = ft
    return out


RACE = Experiment("ch09_race", race, variants=list(SCHEMES), seeds=[0, 1, 2], sizes=RACE_SIZES,
                  prefix=100, description="six position schemes trained at T, scored at 1-8 T")
STRETCH = Experiment("ch09_stretch", stretch, variants=list(STRETCHES), seeds=[0, 1, 2],
                     sizes=STRETCH_SIZES, prefix=100,
                     description="the race's RoPE model stretched 8x, zero-shot and fine-tuned")
