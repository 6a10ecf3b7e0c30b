"""Chapter 19's side experiment: softmax attention on the recall task *without* the short
causal convolution that every model of :mod:`llmviz.experiments.ch19` has.

Chapter 19 gives every layer, softmax included, the same 4-tap convolution on q, k and v, so
that no mixer alone has the one-token shift that turns a stated value's position into its key.
This experiment measures what that choice is worth: the same two-layer softmax model, the same
task, sizes, seeds, batches and evaluation sequences as ``ch19_recall``, with the convolution left
out. The runner repeats :func:`~llmviz.experiments.ch19.recall_run`'s loop rather than calling
it, so that the recorded ``ch19_recall`` run (fingerprinted on that function) stays as it is.
"""

from __future__ import annotations

import torch

from ..evidence import Experiment
from . import ch19

__all__ = ["VARIANTS", "SEEDS", "SIZES", "NOCONV", "noconv_run"]

VARIANTS = ("softmax, no convolution",)
SEEDS = ch19.SEEDS
#: The sizes of ``ch19_recall`` (copied, so the two records share every setting).
SIZES = {name: dict(params) for name, params in ch19.SIZES.items()}


def _build(*, n_keys, n_values, d_model, n_layers, n_heads, n_pairs, n_queries, **_):
    from ..training.recall import recall_model

    return recall_model("softmax", vocab_size=n_keys + n_values, d_model=d_model,
                        n_layers=n_layers, n_heads=n_heads, max_seq_len=2 * (n_pairs + n_queries))


class _Prefix(Exception):
    """Ends a prefix run at its step (the schedule stays the full run's)."""


def noconv_run(variant: str, seed: int, *, prefix: int | None = None, **params) -> dict:
    """Train the softmax model without convolution on ``seed``; the same outputs as
    :func:`~llmviz.experiments.ch19.recall_run`: ``{"acc", "by_position", "curve", "params"}``,
    or ``{"curve"}`` alone with ``prefix``."""
    from ..runtime import device as best_device
    from ..training import TrainConfig, train
    from ..training.recall import recall_accuracy, recall_by_position

    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}")
    steps = params["steps"]
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or not 1 <= prefix <= steps):
        raise ValueError(f"prefix must be an int number of training steps in [1, {steps}], "
                         f"got {prefix!r}")
    dev = best_device()
    torch.manual_seed(seed)
    model = _build(**params).to(dev)
    ev = ch19.eval_task(**params, device=dev)
    curve = [float(recall_accuracy(model, ev))]

    def score(step, m):
        acc = float(recall_accuracy(m, ev))
        if prefix is not None and step >= prefix and step % params["eval_every"] == 0:
            curve.append(acc)
            raise _Prefix
        return {"acc": acc}

    def batches(gen):
        from ..training.recall import multi_query_recall

        return multi_query_recall(batch_size=params["batch"], n_pairs=params["n_pairs"],
                                  n_queries=params["n_queries"], n_keys=params["n_keys"],
                                  n_values=params["n_values"], replace=True, generator=gen)

    try:
        hist = train(model, batches, config=TrainConfig(
            steps=steps, lr=params["lr"], warmup=params["warmup"], seed=seed,
            eval_every=params["eval_every"], device=dev), progress=False,
            callbacks={"acc": score})
    except _Prefix:
        return {"curve": curve}
    curve += [float(a) for s, a in zip(hist.metric_steps, hist.metrics["acc.acc"])
              if s % params["eval_every"] == 0]
    return {"acc": float(recall_accuracy(model, ev)),
            "by_position": [float(a) for a in recall_by_position(model, ev)],
            "curve": curve, "params": float(sum(p.numel() for p in model.parameters()))}


NOCONV = Experiment(
    "ch19_noconv", noconv_run, variants=VARIANTS, seeds=SEEDS, sizes=SIZES, prefix=100,
    description="the recall task of ch19_recall with softmax attention and no convolution")
