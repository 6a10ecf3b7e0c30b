"""Chapter 18's experiment: Gemma 3's own ablation, window size and local:global ratio against
held-out loss.

The Gemma 3 report trained models with sliding-window layers in different local:global ratios
and windows and found perplexity barely moved. :func:`window_run` trains one byte-level model of
six layers whose layer pattern is one of :data:`VARIANTS` (all global; 5 local : 1 global with a
short or a long window; every layer local, the control) and returns its
held-out loss on windows longer than the short span, so the local layers see less than the
whole context. Everything but the attention span is shared: width, depth, data, seeds, batches.
"""

from __future__ import annotations

import torch

from ..evidence import Experiment

__all__ = ["VARIANTS", "SEEDS", "SIZES", "WINDOWS", "layer_windows", "window_run"]

SEEDS = (0, 1, 2)
VARIANTS = ("all global", "5:1, short window", "5:1, long window", "all local, short window")
SIZES = {
    "cpu": dict(d_model=32, n_layers=6, n_heads=4, short=8, long=24, seq_len=64, steps=100,
                lr=3e-3, warmup=20, batch=16, eval_every=50, val_windows=32),
    "long": dict(d_model=48, n_layers=6, n_heads=4, short=12, long=36, seq_len=96, steps=250,
                 lr=3e-3, warmup=20, batch=16, eval_every=50, val_windows=48),
}
#: (local layers, global layers) per repeat and which window, per variant.
#: "2:1, short window" is kept for layer_windows (not run: the record holds the four variants).
WINDOWS = {"all global": (0, 1, None), "5:1, short window": (5, 1, "short"),
           "5:1, long window": (5, 1, "long"), "2:1, short window": (2, 1, "short"),
           "all local, short window": (1, 0, "short")}


def layer_windows(variant: str, *, n_layers: int, short: int, long: int, **_) -> tuple:
    """Each layer's window (None: global), local layers first in each repeat, as in Gemma 3."""
    if variant not in WINDOWS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}")
    local, glob, which = WINDOWS[variant]
    span = {"short": short, "long": long, None: None}[which]
    period = local + glob
    return tuple(span if i % period < local else None for i in range(n_layers))


def window_run(variant: str, seed: int, *, prefix: int | None = None, **params) -> dict:
    """Train ``variant`` on ``seed``: ``{"loss" (held-out nats/byte), "curve" (at step 0,
    eval_every, ...)}``; with ``prefix`` stop after that many steps, on the full run's learning-rate
    schedule (so a prefix reproduces the start of a recorded curve)."""
    from ..model import DecoderLM, ModelConfig
    from ..runtime import device as best_device
    from ..training import TrainConfig, train
    from .ch16 import data

    dev = best_device()
    steps = params["steps"]
    stop = None if prefix is None else min(int(prefix), steps)
    train_tokens, val = data()
    T = params["seq_len"]
    windows = val[: len(val) // T * T].view(-1, T)[: params["val_windows"]].to(dev)
    config = ModelConfig(vocab_size=256, d_model=params["d_model"], n_layers=params["n_layers"],
                         n_heads=params["n_heads"], max_seq_len=T, position="rope",
                         layer_windows=layer_windows(variant, **params))
    torch.manual_seed(seed)
    model = DecoderLM(config).to(dev)

    def val_loss(step, m):
        with torch.no_grad():
            logits = m(windows[:, :-1]).logits.float()
        return float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()))

    class _Stop(Exception):
        """Ends a prefix run at its step; the schedule stays the full run's."""

    def scored(step, m):
        value = val_loss(step, m)
        if stop is not None and step >= stop and step % params["eval_every"] == 0:
            curve.append(value)
            raise _Stop
        return value

    curve = [val_loss(0, model.eval())]
    if stop == 0:
        return {"loss": curve[0], "curve": curve}
    try:
        hist = train(model.train(), train_tokens, config=TrainConfig(
            steps=steps, lr=params["lr"], warmup=params["warmup"], batch_size=params["batch"],
            seq_len=T, eval_every=params["eval_every"], seed=seed, device=dev), progress=False,
            callbacks={"val": scored})
    except _Stop:
        return {"loss": curve[-1], "curve": curve}
    curve += [v for s, v in zip(hist.metric_steps, hist.metrics["val"])
              if s % params["eval_every"] == 0]
    return {"loss": val_loss(steps, model.eval()), "curve": curve}


WINDOW_ABLATION = Experiment(
    "ch18_windows", window_run, variants=VARIANTS, seeds=SEEDS, sizes=SIZES, prefix=50,
    description="Gemma 3's ablation at byte level: local:global ratio and window against loss")
