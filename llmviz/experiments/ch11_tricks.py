"""Chapter 11's stability tricks trained long enough to see whether they let a run train.

The chapter's live trick runs are 16 steps at a constant lr 0.1 (pre-norm, no warmup): the
baseline ends on the unigram plateau. lr 0.1 is above pre-norm's own range without warmup (the
chapter's learning-rate sweep), so the question a stabiliser answers there is whether the run
trains with it where it does not without it. :data:`TRICKS` (``ch11_tricks``) trains the same
recipe (the stability map's pre-norm model: 6 layers, C = 32, 8 windows of 32 bytes per step, no
clipping, no weight decay; constant lr 0.1, no warmup) for 600 steps on six paired seeds, as the
baseline, with QK-norm (RMS) and with z-loss (weight 1e-3), and, as the positive control, the
baseline at ``control_lr`` (3e-2, the sweep's largest rate at which pre-norm trains without
warmup), so that a baseline stuck at lr 0.1 is about the rate and not a broken set-up. It records
the held-out loss on :func:`llmviz.experiments.ch11.val_targets` (whose plateau is
``ch11.baselines(n)["unigram"]``) every ``curve_every`` steps, and, after the last step,
``log_z``, ``min_attention_entropy`` and ``max_abs_logit`` on the first 16 of those windows
(:func:`llmviz.analysis.stability_stats`). Seed ``s`` gives every variant the same initial
weights (the shared ones) and batches.

Everything is built on :func:`llmviz.device`; nothing runs at import.
"""

from __future__ import annotations

import torch

from ..analysis import stability_stats
from ..evidence import Experiment
from ..model import DecoderLM
from ..model.config import ModelConfig
from ..training import TrainConfig, train, z_loss_term
from .. import runtime
from . import ch11

__all__ = ["TRICKS", "VARIANTS", "CONTROL", "trick_run"]

#: the positive control's variant: the baseline at the size's ``control_lr``
CONTROL = "baseline at control_lr"
#: variant -> (architecture switches, z-loss weight, which size parameter is its learning rate)
VARIANTS = {"baseline": ({}, 0.0, "lr"), "QK-norm (RMS)": ({"qk_norm": "rms"}, 0.0, "lr"),
            "z-loss (w=1e-3)": ({}, 1e-3, "lr"), CONTROL: ({}, 0.0, "control_lr")}


class _Prefix(Exception):
    """Raised by the curve callback to stop a run after its prefix."""


def trick_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One run: ``curve`` (held-out loss from step 0, every ``curve_every`` steps), ``loss`` (its
    last point), ``diverged`` (1.0 or 0.0), and, for a full run, ``log_z``,
    ``min_attention_entropy`` and ``max_abs_logit`` after the last step."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; pick one of {list(VARIANTS)}")
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or not 1 <= prefix <= p["steps"]):
        raise ValueError(f"prefix must be an int number of steps in [1, {p['steps']}], got {prefix!r}")
    arch, z_weight, rate = VARIANTS[variant]
    torch.manual_seed(seed)
    cfg = ModelConfig(d_model=p["d_model"], n_layers=p["n_layers"], n_heads=4, max_seq_len=64,
                      placement="pre", norm="layer", ffn="mlp", bias=True,
                      init_std=p["d_model"] ** -0.5, embed_scale=True, **arch)
    model = DecoderLM(cfg).to(runtime.device())
    n_val = p["val_windows"]
    curve = [ch11.val_loss(model, n_val)]

    def point(step: int, m) -> float:
        curve.append(ch11.val_loss(m, n_val))
        if prefix is not None and step >= prefix:
            raise _Prefix
        return curve[-1]

    tcfg = TrainConfig(steps=p["steps"], lr=p[rate], warmup=0, schedule="constant", grad_clip=None,
                       weight_decay=0.0, batch_size=p["batch"], seq_len=ch11.SEQ, seed=seed,
                       eval_every=p["curve_every"], max_loss=2 * ch11.UNIFORM)
    terms = {"z-loss": z_loss_term(z_weight)} if z_weight else {}
    try:
        hist = train(model, ch11.data()[0], config=tcfg, loss_terms=terms, callbacks={"val_loss": point},
                     progress=False)
    except _Prefix:
        return {"curve": curve, "loss": curve[-1], "diverged": 0.0}
    n_points = p["steps"] // p["curve_every"] + 1
    curve += [ch11.UNIFORM] * (n_points - len(curve))
    windows = ch11._windows(16).to(runtime.device())
    model.eval()
    stats = stability_stats(model, windows[:, :-1], windows[:, 1:])
    return {"curve": curve, "loss": curve[-1], "diverged": float(bool(hist.diverged)),
            **{k: float(stats[k]) for k in ("log_z", "min_attention_entropy", "max_abs_logit")}}


TRICKS = Experiment(
    "ch11_tricks", trick_run, variants=list(VARIANTS), seeds=list(range(6)),
    sizes={"cpu": dict(d_model=32, n_layers=6, steps=50, lr=0.1, control_lr=3e-2, batch=8, curve_every=25,
                       val_windows=64),
           "long": dict(d_model=32, n_layers=6, steps=600, lr=0.1, control_lr=3e-2, batch=8, curve_every=50,
                        val_windows=256)},
    prefix=50, description="chapter 11: pre-norm at lr 0.1 for 600 steps, baseline, QK-norm and "
                           "z-loss, and the baseline at lr 3e-2 as the control, six paired seeds")
