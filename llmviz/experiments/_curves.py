"""Held-out loss curves of small byte-level models, shared by chapters 12 and 13's records.

:func:`train_curve` trains one :class:`~llmviz.model.DecoderLM` on the training head of the
prose corpus (the split chapter 15 uses, so the chapter 15 byte n-gram baselines score the same
targets) and scores it every ``curve_every`` steps, from step 0, on every held-out window
(:func:`llmviz.experiments.ch15.val_loss`). Everything runs on :func:`llmviz.device`.
"""

from __future__ import annotations

import torch

from .. import runtime
from ..model import DecoderLM
from ..training import TrainConfig, train
from . import ch15

__all__ = ["train_curve", "check_prefix"]


class _Prefix(Exception):
    """Raised by the curve callback to stop a run after its prefix."""


def check_prefix(prefix, steps: int) -> None:
    """Raise ValueError unless ``prefix`` is None or an int number of steps in ``[1, steps]``."""
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or not 1 <= prefix <= steps):
        raise ValueError(f"prefix must be an int number of training steps in [1, {steps}], "
                         f"got {prefix!r}")


def train_curve(config, seed: int, *, steps: int, lr: float, warmup: int, batch_size: int,
                seq_len: int, curve_every: int, prefix: int | None = None) -> dict:
    """Train ``config`` from ``seed`` (init and batches) and return its held-out curve.

    Returns ``{"curve": [loss at step 0, curve_every, ...], "val_loss": last point,
    "tokens_per_s": training tokens per second}`` (nats/byte). The peak rate ``lr`` warms up
    over ``warmup`` steps, then decays on a cosine to ``lr / 10``. With ``prefix`` the run stops
    at the first curve point at or past ``prefix`` steps (the schedule is the full run's).
    """
    check_prefix(prefix, steps)
    torch.manual_seed(seed)  # the initialisation; the run's config seeds the batches
    model = DecoderLM(config).to(runtime.device())
    curve = [ch15.val_loss(model, seq_len)]

    def point(step: int, m) -> float:
        curve.append(ch15.val_loss(m, seq_len))
        if prefix is not None and step >= prefix:
            raise _Prefix
        return curve[-1]

    cfg = TrainConfig(steps=steps, lr=lr, warmup=warmup, seed=seed, batch_size=batch_size,
                      seq_len=seq_len, eval_every=curve_every, min_lr=None)
    try:
        history = train(model, ch15.data()[0], config=cfg, callbacks={"val_loss": point},
                        progress=False)
    except _Prefix:
        return {"curve": curve, "val_loss": curve[-1]}
    if history.diverged:  # the curve stops where training did: pad it to the full length
        curve += [float("nan")] * (steps // curve_every + 1 - len(curve))
        return {"curve": curve, "val_loss": float("nan"), "tokens_per_s": float("nan")}
    seen = steps * batch_size * seq_len
    return {"curve": curve, "val_loss": curve[-1],
            "tokens_per_s": seen / history.seconds if history.seconds else float("nan")}
