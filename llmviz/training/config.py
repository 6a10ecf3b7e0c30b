"""What a training run is told: :class:`TrainConfig`, and the learning-rate schedule it implies.

:func:`lr_at` gives the rate of every optimiser step: linear warmup from ``lr / warmup`` to
``lr``, then cosine decay to ``min_lr`` (or constant), as in GPT-3 / nanoGPT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._checks import check_choice, check_positive, check_positive_int, check_real

__all__ = ["TrainConfig", "lr_at"]

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
    batch_size: int = 32  # sequences per step (B), when training on a token stream
    seq_len: int = 64  # training context length (T), when training on a token stream
    eval_every: int = 0  # evaluate (and call callbacks) every this many steps (0: only after the last)
    eval_lengths: tuple[int, ...] = ()  # evaluation window lengths (empty: seq_len)
    eval_windows: int = 16  # windows per evaluation length
    eval_tail: int | None = None  # score only the last positions of each window (None: all)
    max_loss: float | None = None  # a loss above this also counts as divergence
    seed: int = 0  # seeds the batch generator and the RNG used inside the run
    device: str | None = None  # move the model here first (None: leave it where it is)
    threads: int | None = None  # torch CPU threads during the run, restored after (None: as is)

    def __post_init__(self) -> None:
        check_positive_int(self.steps, "steps")
        check_positive_int(self.seed, "seed", allow_zero=True)
        check_positive(self.lr, "lr")
        if not (isinstance(self.betas, (tuple, list)) and len(self.betas) == 2):
            raise TypeError(f"betas must be AdamW's two moment coefficients, e.g. (0.9, 0.95), "
                            f"got {type(self.betas).__name__} {self.betas!r}")
        check_real(self.betas[0], "betas[0]")
        check_real(self.betas[1], "betas[1]")
        if not (0.0 <= self.betas[0] < 1.0 and 0.0 <= self.betas[1] < 1.0):
            raise ValueError(f"betas must both lie in [0, 1) (AdamW's moment decay), got "
                             f"{tuple(self.betas)}; e.g. (0.9, 0.95)")
        check_positive_int(self.warmup, "warmup", allow_zero=True)
        if self.min_lr is None:
            object.__setattr__(self, "min_lr", self.lr / 10)
        check_positive(self.min_lr, "min_lr", allow_zero=True)
        if self.min_lr > self.lr:
            raise ValueError(f"min_lr ({self.min_lr}) must not exceed lr ({self.lr})")
        check_choice(self.schedule, "schedule", _SCHEDULES)
        check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        if self.grad_clip is not None:
            check_positive(self.grad_clip, "grad_clip")
        check_positive_int(self.batch_size, "batch_size")
        check_positive_int(self.seq_len, "seq_len")
        check_positive_int(self.eval_every, "eval_every", allow_zero=True)
        object.__setattr__(self, "eval_lengths", tuple(int(n) for n in self.eval_lengths))
        for n in self.eval_lengths:
            check_positive_int(n, "each of eval_lengths")
        check_positive_int(self.eval_windows, "eval_windows")
        if self.threads is not None:
            check_positive_int(self.threads, "threads")
        if self.eval_tail is not None:
            check_positive_int(self.eval_tail, "eval_tail")
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
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    check_positive_int(step, "step", allow_zero=True)
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    if config.schedule == "constant":
        return config.lr
    decay_steps = config.steps - config.warmup
    if decay_steps <= 1:
        return config.lr
    progress = (step - config.warmup) / (decay_steps - 1)
    return config.min_lr + 0.5 * (config.lr - config.min_lr) * (1 + math.cos(math.pi * progress))
