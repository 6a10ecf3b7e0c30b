"""Hyper-parameter sweeps arranged for a figure, and the numbers that judge a training run.

* :func:`divergence_grid` turns ``{(learning rate, warmup): History}`` into the grid of final
  losses that :func:`llmviz.plots.norms.plot_stability_map` draws, with diverged runs as NaN.
* :func:`worst_spike`: the largest rise of a loss curve above the best value it had reached
  before (0 for a curve that never goes back up).
* :func:`unigram_loss`: the cross-entropy of the best context-free guess (token frequencies
  counted on the training stream) on given targets: the plateau a language model sits on
  before it uses any context. A run that ends near it has learned only token frequencies.

Shape letters: N tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Mapping

import numpy as np
import torch

from .._checks import check_positive, check_positive_int, check_tensor
from ..training import History

__all__ = ["divergence_grid", "worst_spike", "unigram_loss"]


def worst_spike(losses: Sequence[float]) -> float:
    """Largest rise of ``losses[t]`` above ``min(losses[:t])``, over t >= 1; 0 if it never rises.

    Raises:
        ValueError: fewer than two values, or a non-finite one (a diverged run has no spike
            size: report its divergence instead).
    """
    values = [float(v) for v in losses]
    if len(values) < 2:
        raise ValueError(f"worst_spike needs at least 2 losses, got {len(values)}")
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    if bad:
        raise ValueError(
            f"losses[{bad[0]}] is {values[bad[0]]}: a diverged run has no spike size; check "
            "History.diverged first"
        )
    best, worst = values[0], 0.0
    for v in values[1:]:
        worst = max(worst, v - best)
        best = min(best, v)
    return worst


def unigram_loss(
    train_tokens: torch.Tensor, targets: torch.Tensor, *, vocab_size: int = 256,
    smoothing: float = 1.0,
) -> float:
    """Cross-entropy (nats) on ``targets`` of token frequencies counted on ``train_tokens``.

    Args:
        train_tokens: ``(N,)`` int token stream the frequencies are counted on.
        targets: int tensor of any shape: the tokens to score.
        vocab_size: number of token ids.
        smoothing: count added to every id (add-one by default), so an id unseen in
            training costs a finite amount.
    """
    check_tensor(train_tokens, "train_tokens", ndim=1)
    check_tensor(targets, "targets")
    check_positive_int(vocab_size, "vocab_size")
    check_positive(smoothing, "smoothing")
    for name, t in (("train_tokens", train_tokens), ("targets", targets)):
        if t.dtype.is_floating_point or t.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer token ids, got dtype {t.dtype}")
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= vocab_size):
            raise ValueError(
                f"{name} holds ids in [{int(t.min())}, {int(t.max())}] but vocab_size is "
                f"{vocab_size}; pass the tokenizer's vocab_size"
            )
    if targets.numel() == 0:
        raise ValueError("targets is empty: nothing to score")
    counts = torch.bincount(train_tokens.flatten().cpu(), minlength=vocab_size).double()
    log_p = (counts + smoothing).log() - (counts.sum() + smoothing * vocab_size).log()
    return float(-log_p[targets.flatten().cpu()].mean())


def divergence_grid(
    histories: Mapping[tuple[float, int], History],
) -> tuple[list[float], list[int], np.ndarray]:
    """``{(lr, warmup): History}`` -> ``(lrs, warmups, final)``.

    Returns:
        ``lrs`` and ``warmups`` sorted ascending, and ``final`` of shape
        ``(len(warmups), len(lrs))`` holding each run's final loss; ``nan`` where the run
        diverged (:attr:`History.final_loss` is nan) or is missing from the sweep.
    """
    if not isinstance(histories, Mapping):
        raise TypeError(
            f"histories must be a mapping {{(lr, warmup): History}}, got {type(histories).__name__}"
        )
    if not histories:
        raise ValueError("histories is empty; pass {(lr, warmup): History}")
    lrs = sorted({float(k[0]) for k in histories})
    warmups = sorted({int(k[1]) for k in histories})
    final = np.full((len(warmups), len(lrs)), np.nan)
    for (lr, warmup), h in histories.items():
        final[warmups.index(int(warmup)), lrs.index(float(lr))] = h.final_loss  # nan if diverged
    return lrs, warmups, final
