"""A small, honest training loop for the book's experiments, and evaluation at several lengths.

* AdamW with decoupled weight decay on matrices only (biases, norm gains and other vectors are
  not decayed), betas (0.9, 0.95) as in GPT-3 / nanoGPT.
* Learning rate: linear warmup from ``lr / warmup`` to ``lr``, then cosine decay to ``min_lr``
  (or constant).
* Gradient clipping by global norm; the pre-clipping norm is recorded every step.
* Divergence: a non-finite loss or gradient norm (or a loss above ``max_loss``) stops the run
  cleanly and marks :attr:`History.diverged`.
* Deterministic under ``TrainConfig.seed`` on the CPU: batches come from a seeded generator and
  the global RNG (dropout) is forked, seeded and restored, so the caller's RNG is untouched.

The model is any ``nn.Module`` whose ``forward(input_ids)`` returns an object with ``.logits``
``(B, T, V)`` (as :class:`llmviz.models.DecoderLM` and Hugging Face models do) or the logits
tensor itself. The loss is computed here from already-shifted targets, so models that shift
``labels`` internally are never asked to.

Shape letters: B batch, T sequence length, V vocabulary size.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_choice, check_positive, check_tensor
from .data import eval_windows, random_batches

__all__ = [
    "TrainConfig",
    "History",
    "LengthEval",
    "lr_at",
    "logits_of",
    "masked_cross_entropy",
    "train",
    "evaluate_lengths",
]

_SCHEDULES = ("cosine", "constant")


@dataclass(frozen=True)
class TrainConfig:
    """Everything :func:`train` needs besides the model and the data."""

    steps: int = 400  # optimiser steps
    lr: float = 3e-3  # peak learning rate (reached at the end of warmup)
    warmup: int = 40  # linear warmup steps (0: start at the peak)
    min_lr: float | None = None  # learning rate at the last cosine step (None: lr / 10)
    schedule: str = "cosine"  # "cosine" decay after warmup, or "constant"
    weight_decay: float = 0.1  # decoupled (AdamW) decay, matrices only
    betas: tuple[float, float] = (0.9, 0.95)  # AdamW moment coefficients
    grad_clip: float | None = 1.0  # max global gradient norm (None: no clipping)
    batch_size: int = 32  # sequences per step (B)
    seq_len: int = 64  # training context length (T)
    eval_every: int = 0  # evaluate every this many steps (0: only after the last step)
    eval_lengths: tuple[int, ...] = ()  # evaluation window lengths (empty: seq_len)
    eval_windows: int = 16  # windows per evaluation length
    eval_tail: int | None = None  # score only the last positions of each window (None: all)
    max_loss: float | None = None  # a loss above this also counts as divergence
    seed: int = 0  # seeds the batch sampler and the RNG used inside the run
    device: str | None = None  # move the model here first (None: leave it where it is)

    def __post_init__(self) -> None:
        check_positive(self.steps, "steps")
        check_positive(self.lr, "lr")
        check_positive(self.warmup, "warmup", allow_zero=True)
        if self.min_lr is None:
            object.__setattr__(self, "min_lr", self.lr / 10)
        check_positive(self.min_lr, "min_lr", allow_zero=True)
        if self.min_lr > self.lr:
            raise ValueError(f"min_lr ({self.min_lr}) must not exceed lr ({self.lr})")
        check_choice(self.schedule, "schedule", _SCHEDULES)
        check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        if self.grad_clip is not None:
            check_positive(self.grad_clip, "grad_clip")
        check_positive(self.batch_size, "batch_size")
        check_positive(self.seq_len, "seq_len")
        check_positive(self.eval_every, "eval_every", allow_zero=True)
        object.__setattr__(self, "eval_lengths", tuple(int(n) for n in self.eval_lengths))
        for n in self.eval_lengths:
            check_positive(n, "each of eval_lengths")
        check_positive(self.eval_windows, "eval_windows")
        if self.eval_tail is not None:
            check_positive(self.eval_tail, "eval_tail")
            short = [n for n in self.lengths if n < self.eval_tail]
            if short:
                raise ValueError(
                    f"eval_tail ({self.eval_tail}) is longer than eval length(s) {short}; "
                    "use a tail no longer than the shortest evaluation window"
                )

    @property
    def lengths(self) -> tuple[int, ...]:
        """The evaluation lengths actually used (``eval_lengths`` or ``(seq_len,)``)."""
        return self.eval_lengths or (self.seq_len,)


def lr_at(step: int, config: TrainConfig) -> float:
    """Learning rate of optimiser step ``step`` (0-based): linear warmup, then cosine or constant.

    Warmup reaches ``lr`` at step ``warmup - 1``; the cosine then falls to ``min_lr`` at the last
    step ``steps - 1``.
    """
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    if config.schedule == "constant":
        return config.lr
    decay_steps = config.steps - config.warmup
    if decay_steps <= 1:
        return config.lr
    progress = (step - config.warmup) / (decay_steps - 1)
    return config.min_lr + 0.5 * (config.lr - config.min_lr) * (1 + math.cos(math.pi * progress))


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


@dataclass
class History:
    """What a training run recorded, one entry per completed optimiser step."""

    config: TrainConfig
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    evals: list[LengthEval] = field(default_factory=list)
    diverged: bool = False
    diverged_at: int | None = None  # step whose loss/gradient was non-finite or too large
    seconds: float = 0.0

    @property
    def steps(self) -> list[int]:
        return list(range(len(self.loss)))

    @property
    def final_loss(self) -> float:
        """Mean training loss over the last 10% of steps (``nan`` if the run diverged)."""
        if self.diverged or not self.loss:
            return math.nan
        k = max(1, len(self.loss) // 10)
        return sum(self.loss[-k:]) / k

    def eval_loss(self, length: int) -> list[float]:
        """Validation loss at ``length`` for each evaluation in :attr:`eval_steps`."""
        if self.evals and length not in self.evals[0].lengths:
            raise ValueError(
                f"length {length} was not evaluated; evaluated lengths: {self.evals[0].lengths}"
            )
        return [e.loss[e.lengths.index(length)] for e in self.evals]

    def __repr__(self) -> str:
        state = f"diverged at step {self.diverged_at}" if self.diverged else f"final loss {self.final_loss:.3f}"
        return f"History({len(self.loss)} steps, {state}, {self.seconds:.1f} s)"


def logits_of(output: Any) -> torch.Tensor:
    """The ``(B, T, V)`` logits from a model's output: ``.logits`` or the tensor itself."""
    logits = output if isinstance(output, torch.Tensor) else getattr(output, "logits", None)
    if not isinstance(logits, torch.Tensor):
        raise TypeError(
            f"the model returned {type(output).__name__}; it must return the logits tensor "
            "or an object with a .logits tensor of shape (B, T, V)"
        )
    if logits.ndim != 3:
        raise ValueError(f"logits must have shape (B, T, V), got {tuple(logits.shape)}")
    return logits


def masked_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean cross-entropy over positions where ``mask`` is True (all positions if None).

    Args:
        logits: ``(B, T, V)``.
        targets: ``(B, T)`` int64, already aligned with ``logits`` (no shifting here).
        mask: ``(B, T)`` bool, True = the position counts.
    """
    losses = F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")  # (B, T)
    if mask is None:
        return losses.mean()
    return losses[mask].mean()


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def train(
    model: nn.Module,
    train_tokens: torch.Tensor,
    *,
    config: TrainConfig,
    val_tokens: torch.Tensor | None = None,
    progress: bool = True,
) -> History:
    """Train ``model`` for next-token prediction on random windows of ``train_tokens``.

    Args:
        model: ``forward(input_ids (B, T))`` -> logits ``(B, T, V)`` or an object with ``.logits``.
        train_tokens: ``(N,)`` int64 token stream.
        config: the run's hyper-parameters and seed.
        val_tokens: optional ``(M,)`` stream evaluated with :func:`evaluate_lengths` every
            ``config.eval_every`` steps and after the last step.
        progress: show a tqdm progress bar.

    Returns:
        A :class:`History`. On divergence the run stops at once: ``history.diverged`` is True,
        the model keeps its last (non-finite) parameters, and no evaluation runs.
    """
    from tqdm.auto import tqdm

    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    check_tensor(train_tokens, "train_tokens", ndim=1)
    if val_tokens is not None:
        check_tensor(val_tokens, "val_tokens", ndim=1)
    if config.device is not None:
        model.to(config.device)
    device = _model_device(model)
    history = History(config=config)
    # A model whose config carries a z-loss weight (llmviz ModelConfig.z_loss_weight) is trained
    # with that auxiliary term, exactly as its own ``loss`` adds it.
    z_weight = float(getattr(getattr(model, "config", None), "z_loss_weight", 0.0) or 0.0)
    optimizer = torch.optim.AdamW(
        _param_groups(model, config.weight_decay), lr=config.lr, betas=config.betas
    )
    generator = torch.Generator().manual_seed(config.seed)
    fork = [device.index or 0] if device.type == "cuda" else []
    start = time.perf_counter()
    with torch.random.fork_rng(devices=fork):
        torch.manual_seed(config.seed)
        model.train()
        bar = tqdm(range(config.steps), disable=not progress, leave=False, desc="train")
        for step in bar:
            lr = lr_at(step, config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            inputs, targets = random_batches(
                train_tokens, batch_size=config.batch_size, seq_len=config.seq_len,
                generator=generator, device=device,
            )
            logits = logits_of(model(inputs))  # (B, T, V)
            loss = masked_cross_entropy(logits, targets)
            if z_weight > 0:  # PaLM's z-loss, when the model's config asks for it
                loss = loss + z_weight * torch.logsumexp(logits.float(), dim=-1).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            max_norm = config.grad_clip if config.grad_clip is not None else math.inf
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
            value = float(loss.detach())
            history.loss.append(value)
            history.lr.append(lr)
            history.grad_norm.append(grad_norm)
            too_big = config.max_loss is not None and value > config.max_loss
            if not (math.isfinite(value) and math.isfinite(grad_norm)) or too_big:
                history.diverged, history.diverged_at = True, step
                break
            optimizer.step()
            if progress and step % 10 == 0:
                bar.set_postfix(loss=f"{value:.3f}", lr=f"{lr:.2e}")
            last = step == config.steps - 1
            due = config.eval_every and (step + 1) % config.eval_every == 0
            if val_tokens is not None and (last or due):
                history.evals.append(
                    evaluate_lengths(model, val_tokens, config.lengths,
                                     n_windows=config.eval_windows, tail=config.eval_tail)
                )
                history.eval_steps.append(step + 1)
                model.train()
        bar.close()
    model.eval()
    history.seconds = time.perf_counter() - start
    return history


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
    :func:`llmviz.data.eval_windows`), so every length reads the same stretch of text.

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
        check_positive(tail, "tail")
        short = [n for n in lengths if n < tail]
        if short:
            raise ValueError(
                f"tail ({tail}) is longer than length(s) {short}; every window must hold the tail"
            )
    device = _model_device(model)
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
