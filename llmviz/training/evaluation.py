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

__all__ = ["LengthEval", "evaluate_lengths", "model_device", "score_tails", "tail_ends", "tail_targets"]


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


def tail_ends(n_tokens: int, *, max_length: int, tail: int, n_ends: int | None = None) -> torch.Tensor:
    """Evenly spaced window ends whose scored tails do not overlap (aligned evaluation targets).

    An end ``e`` stands for the window ``tokens[e - L : e]`` at every length ``L`` (targets
    ``tokens[e - L + 1 : e + 1]``) and its scored tail, the targets ``tokens[e - tail + 1 : e + 1]``.
    Fixing the ends, not the starts, makes every length score exactly the same targets, so a
    difference between lengths is the model's, not the text's.

    Args:
        n_tokens: length of the evaluation stream.
        max_length: the longest window that must fit before every end.
        tail: scored positions per window; consecutive tails do not overlap.
        n_ends: how many ends (None: every tail the stream holds).

    Returns:
        ``(n_ends,)`` int64 indices, increasing, each in ``[max_length, n_tokens - 1]``.
    """
    check_positive_int(n_tokens, "n_tokens")
    check_positive_int(max_length, "max_length")
    check_positive_int(tail, "tail")
    if tail > max_length:
        raise ValueError(f"tail ({tail}) is longer than max_length ({max_length}); "
                         "every window must hold its tail")
    room = n_tokens - 1 - max_length  # ends lie in [max_length, n_tokens - 1]
    if room < 0:
        raise ValueError(
            f"a stream of {n_tokens} tokens cannot hold a window of {max_length} plus its next "
            f"token; use a longer stream or a shorter max_length"
        )
    available = room // tail + 1
    if n_ends is None:
        n_ends = available
    check_positive_int(n_ends, "n_ends")
    if n_ends > available:
        raise ValueError(
            f"n_ends={n_ends} non-overlapping tails of {tail} do not fit: the stream holds "
            f"{available} after a first window of {max_length}; ask for at most {available}"
        )
    # spread the ends over the whole stream, keeping them at least `tail` apart
    step = room // max(n_ends - 1, 1) if n_ends > 1 else 0
    step = max(step, tail) if n_ends > 1 else 0
    return max_length + torch.arange(n_ends, dtype=torch.int64) * step


def tail_targets(ends: torch.Tensor, tail: int) -> torch.Tensor:
    """Indices into the stream of the targets each end's tail scores: ``(n_ends, tail)``."""
    check_tensor(ends, "ends", ndim=1)
    check_positive_int(tail, "tail")
    return ends[:, None] - tail + 1 + torch.arange(tail)


@torch.no_grad()
def score_tails(
    model: nn.Module,
    tokens: torch.Tensor,
    lengths: int | tuple[int, ...] | list[int],
    ends: torch.Tensor,
    *,
    tail: int,
    batch_tokens: int = 16_384,
) -> torch.Tensor:
    """Mean next-token loss of each aligned tail, at every length: ``(len(lengths), n_ends)``.

    Entry ``[i, k]`` is the mean loss (nats) over the ``tail`` targets that end at ``ends[k]``,
    read in a window of ``lengths[i]`` tokens ending there (see :func:`tail_ends`). Every row
    scores the same targets, so rows compare paired, target by target.

    Args:
        model: ``forward(ids (B, L))`` -> logits ``(B, L, V)`` (or an output with ``.logits``).
        tokens: ``(N,)`` integer stream.
        lengths: window lengths, each at least ``tail``.
        ends: ``(n_ends,)`` window ends, each in ``[max(lengths), N - 1]``.
        tail: scored positions at the end of each window.
        batch_tokens: windows per forward pass are chosen so ``B * L`` stays under this.
    """
    lengths = (lengths,) if isinstance(lengths, int) else tuple(int(n) for n in lengths)
    if not lengths:
        raise ValueError("lengths must name at least one evaluation length")
    check_tensor(tokens, "tokens", ndim=1)
    check_tensor(ends, "ends", ndim=1)
    check_positive_int(tail, "tail")
    if tokens.is_floating_point() or ends.is_floating_point():
        raise TypeError("tokens and ends must be integer tensors (token ids, stream indices)")
    short = [n for n in lengths if n < tail]
    if short:
        raise ValueError(f"tail ({tail}) is longer than length(s) {short}; every window must "
                         "hold the tail")
    if len(ends) == 0:
        raise ValueError("ends is empty; build them with tail_ends(...)")
    lo, hi = int(ends.min()), int(ends.max())
    if lo < max(lengths) or hi > len(tokens) - 1:
        raise ValueError(
            f"ends must lie in [{max(lengths)}, {len(tokens) - 1}] (the longest window before "
            f"each end, its next token inside the stream); got [{lo}, {hi}]"
        )
    device = model_device(model)
    model.eval()
    out = torch.empty(len(lengths), len(ends), dtype=torch.float64)
    for i, length in enumerate(lengths):
        idx = ends[:, None] - length + torch.arange(length + 1)  # (n_ends, L + 1)
        windows = tokens[idx]
        per_batch = max(1, batch_tokens // length)
        for k in range(0, len(ends), per_batch):
            w = windows[k : k + per_batch].to(device)
            logits = logits_of(model(w[:, :-1]))[:, -tail:]  # (B, tail, V)
            nll = F.cross_entropy(logits.float().transpose(1, 2), w[:, -tail:], reduction="none")
            out[i, k : k + per_batch] = nll.double().mean(dim=1).cpu()
    return out
