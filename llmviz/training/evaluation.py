"""Evaluation of a language model at several context lengths on the same stretch of text.

:func:`evaluate_lengths` scores ``n_windows`` windows per length (evenly spaced over the stream,
see :func:`llmviz.training.data.eval_windows`), optionally only their last ``tail`` positions;
:class:`LengthEval` holds the result. :func:`llmviz.training.train` calls it during a run.

Shape letters: B batch, T sequence length (window length), V vocabulary size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_choice, check_positive_int, check_tensor
from .data import eval_windows
from .losses import logits_of

__all__ = ["LengthEval", "evaluate_lengths", "model_device"]


def model_device(model: nn.Module) -> torch.device:
    """The device of ``model``'s first parameter (the CPU for a model without parameters)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


@dataclass
class LengthEval:
    """Loss at several evaluation lengths (mean next-token cross-entropy in nats)."""

    lengths: tuple[int, ...]
    loss: tuple[float, ...]
    n_tokens: tuple[int, ...]  # scored positions per length
    tail: int | None = None

    @property
    def perplexity(self) -> tuple[float, ...]:
        return tuple(math.exp(x) if math.isfinite(x) else math.inf for x in self.loss)

    def as_dict(self, metric: str = "loss") -> dict[int, float]:
        """``{length: loss}`` or ``{length: perplexity}``."""
        check_choice(metric, "metric", ("loss", "perplexity"))
        values = self.loss if metric == "loss" else self.perplexity
        return dict(zip(self.lengths, values))



@torch.no_grad()
def evaluate_lengths(
    model: nn.Module,
    tokens: torch.Tensor,
    lengths: int | tuple[int, ...] | list[int],
    *,
    n_windows: int = 16,
    tail: int | None = None,
    batch_tokens: int = 16_384,
) -> LengthEval:
    """Next-token loss of ``model`` on windows of each length in ``lengths``.

    Each length uses ``n_windows`` windows with evenly spaced starts over ``tokens`` (see
    :func:`llmviz.training.data.eval_windows`), so every length reads the same stretch of text.

    ``tail`` scores only the last ``tail`` positions of every window. With ``tail`` fixed, each
    length scores the same number of positions, and every scored position has at least
    ``length - tail`` tokens of context: what changes with length is only how far back the
    model must cope with positions it saw in training. Scoring all positions instead mixes in
    the early, short-context positions every window has, which hides what happens far out
    (the evaluation of Press et al. 2022, "Train Short, Test Long", ALiBi).

    Args:
        model: as in :func:`train`; it is put in eval mode.
        tokens: ``(N,)`` int64 stream, longer than the longest length.
        lengths: window lengths ``T``.
        n_windows: windows per length.
        tail: positions scored at the end of each window (None: all ``T``).
        batch_tokens: windows per forward pass are chosen so ``B * T`` stays under this.

    Returns:
        A :class:`LengthEval` (losses in nats; ``.perplexity`` is ``exp(loss)``).
    """
    lengths = (lengths,) if isinstance(lengths, int) else tuple(int(n) for n in lengths)
    if not lengths:
        raise ValueError("lengths must name at least one evaluation length")
    check_tensor(tokens, "tokens", ndim=1)
    if tail is not None:
        check_positive_int(tail, "tail")
        short = [n for n in lengths if n < tail]
        if short:
            raise ValueError(
                f"tail ({tail}) is longer than length(s) {short}; every window must hold the tail"
            )
    device = model_device(model)
    model.eval()
    losses, counts = [], []
    for length in lengths:
        inputs, targets = eval_windows(tokens, seq_len=length, n_windows=n_windows)
        per_batch = max(1, batch_tokens // length)
        total, count = 0.0, 0
        for i in range(0, len(inputs), per_batch):
            x = inputs[i : i + per_batch].to(device)  # (B, T)
            y = targets[i : i + per_batch].to(device)  # (B, T)
            logits = logits_of(model(x))  # (B, T, V)
            nll = F.cross_entropy(logits.float().transpose(1, 2), y, reduction="none")  # (B, T)
            if tail is not None:
                nll = nll[:, -tail:]  # (B, tail)
            total += float(nll.sum())
            count += nll.numel()
        losses.append(total / count)
        counts.append(count)
    return LengthEval(tuple(lengths), tuple(losses), tuple(counts), tail)
