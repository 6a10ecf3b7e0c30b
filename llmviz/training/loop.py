"""A small, honest training loop for the book's experiments.

* Batches from any source (:mod:`llmviz.training.batches`): random windows of a token stream,
  a function of the run's seeded generator (synthetic tasks with a loss mask), or an iterable.
* Loss: masked next-token cross-entropy, plus PaLM's z-loss when the model's config carries a
  ``z_loss_weight`` (the same :func:`~llmviz.training.losses.z_loss` the model uses, over the
  same kept positions), plus the output's ``aux_loss`` when it has one (a mixture of experts'
  balancing and router z-loss, :class:`llmviz.model.LMOutput`), plus any extra terms
  ``(output, batch) -> scalar``. A model with ``update_router_biases`` (auxiliary-loss-free
  balancing, DeepSeek-V3) has it called after every optimiser step.
* AdamW with decoupled weight decay on matrices only (biases, norm gains and other vectors are
  not decayed), betas (0.9, 0.95) as in GPT-3 / nanoGPT.
* Learning rate: linear warmup from ``lr / warmup`` to ``lr``, then cosine decay to ``min_lr``
  (or constant).
* Gradient clipping by global norm; the pre-clipping norm is recorded every step.
* Divergence: a non-finite loss or gradient norm (or a loss above ``max_loss``) stops the run
  cleanly and marks :attr:`History.diverged`.
* Evaluation (:func:`~llmviz.training.evaluation.evaluate_lengths`) and metric callbacks every
  ``eval_every`` steps and after the last one, recorded in the :class:`History`.
* Deterministic under ``TrainConfig.seed`` on the CPU: batches come from a seeded generator and
  the global RNG (dropout) is forked, seeded and restored, so the caller's RNG is untouched.

The model is any ``nn.Module`` whose ``forward(input_ids)`` returns an object with ``.logits``
``(B, T, V)`` (as :class:`llmviz.model.DecoderLM` and Hugging Face models do) or the logits
tensor itself. The loss is computed here from already-shifted targets, so models that shift
``labels`` internally are never asked to.

Speed on a CPU (``benchmarks/bench_train.py``; ratios in the README's "Benchmarks"): a model as
small as chapter 9's (d=48, 2 layers, B=32, T=64) spends most of a step in its matrix products
and attention kernels, not in Python. Stacking several seeds into one ``vmap``-ed model was
slower there (0.84x the tokens per second of one ``train()`` after another; its attention and
RoPE ops fall back to a per-model loop under ``vmap``) and compiling gained about 1.07x,
within noise. What is left is one run per core on ONE thread each, as
:func:`llmviz.evidence.run_seeds` / ``run_grid`` run seeds (two processes on a machine that
busy were not resolved faster: 0.91x the time, [0.67, 1.22]; on two idle cores they are
independent). A second intra-op thread on such small matrices is no faster on an idle machine
and many times slower on a busy one (17x, under a load of ~28 on 2 cores). Larger batches are
no way out: 4x the batch at the same tokens was not resolved faster (1.03x the time, [0.77,
1.38]) and ended 0.55 nats worse held out after 6,400 windows, even at twice the rate.
``TrainConfig.threads`` pins the count for one run, e.g.::

    history = train(model, tokens, config=TrainConfig(steps=1600, threads=1, seed=0))

Shape letters: B batch, T sequence length, V vocabulary size.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import nn

from .._checks import check_tensor
from ..runtime import threads as _threads
from .batches import Batch, BatchSource, batch_reader
from .config import TrainConfig, lr_at
from .evaluation import LengthEval, evaluate_lengths, model_device
from .losses import logits_of, masked_cross_entropy, z_loss

__all__ = ["History", "LossTerm", "Callback", "train"]

#: An extra loss term: ``term(output, batch) -> scalar tensor`` (``output`` is what the model
#: returned, ``batch`` a :class:`~llmviz.training.batches.Batch`); it is added to the loss as is.
LossTerm = Callable[[Any, Batch], torch.Tensor]
#: A metric callback: ``callback(step, model) -> number`` or ``{name: number}``.
Callback = Callable[[int, nn.Module], Any]


@dataclass
class History:
    """What a training run recorded, one entry per completed optimiser step.

    ``loss`` is what was optimised: cross-entropy, plus the model's z-loss when its config asks
    for one, plus every extra loss term; ``cross_entropy`` is the cross-entropy alone and
    ``terms[name]`` each extra term's value. ``metrics[name]`` holds one value per callback
    call, taken after the steps in ``metric_steps``.
    """

    config: TrainConfig
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    cross_entropy: list[float] = field(default_factory=list)  # the loss without extra terms
    terms: dict[str, list[float]] = field(default_factory=dict)  # each extra term, per step
    grad_norm: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    evals: list[LengthEval] = field(default_factory=list)
    metric_steps: list[int] = field(default_factory=list)  # steps after which callbacks ran
    metrics: dict[str, list[float]] = field(default_factory=dict)  # callback values
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


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]



def _named(fns: Any, what: str, example: str) -> dict[str, Callable[..., Any]]:
    """``{name: fn}`` from a mapping or a sequence of callables (names from ``__name__``)."""
    if fns is None:
        return {}
    if callable(fns):
        fns = [fns]
    items = list(fns.items()) if isinstance(fns, Mapping) else [
        (getattr(fn, "__name__", ""), fn) for fn in fns
    ]
    named: dict[str, Callable[..., Any]] = {}
    for i, (name, fn) in enumerate(items):
        if not callable(fn):
            raise TypeError(f"each of {what} must be callable {example}, got {type(fn).__name__}")
        name = str(name) if name and not str(name).startswith("<") else f"{what}_{i}"
        if name in named:
            raise ValueError(
                f"two {what} are named {name!r}; pass a mapping {{name: fn}} with distinct names"
            )
        named[name] = fn
    return named


def _scalar(value: Any, what: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise TypeError(
            f"{what} must return a scalar tensor (one element, with a gradient), got {shape}; "
            "reduce it, e.g. with .mean()"
        )
    return value.reshape(())


def _record_metrics(history: History, callbacks: dict[str, Callback], step: int,
                    model: nn.Module) -> None:
    history.metric_steps.append(step)
    model.eval()
    for name, fn in callbacks.items():
        value = fn(step, model)
        values = value.items() if isinstance(value, Mapping) else [(None, value)]
        for key, v in values:
            full = name if key is None else f"{name}.{key}"
            if isinstance(v, torch.Tensor):
                if v.numel() != 1:
                    raise TypeError(
                        f"callback {full!r} returned a tensor of shape {tuple(v.shape)}; "
                        "return a number, a one-element tensor or {name: number}"
                    )
                v = v.item()
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise TypeError(
                    f"callback {full!r} returned {type(v).__name__}; return a number, a "
                    "one-element tensor or {name: number}"
                )
            history.metrics.setdefault(full, []).append(float(v))
    model.train()


def train(
    model: nn.Module,
    data: BatchSource,
    *,
    config: TrainConfig,
    val_tokens: torch.Tensor | None = None,
    loss_terms: Sequence[LossTerm] | Mapping[str, LossTerm] = (),
    callbacks: Sequence[Callback] | Mapping[str, Callback] = (),
    progress: bool = True,
) -> History:
    """Train ``model`` for next-token prediction on batches from ``data``.

    Args:
        model: ``forward(input_ids (B, T))`` -> logits ``(B, T, V)`` or an object with ``.logits``.
        data: a ``(N,)`` int64 token stream (random windows of ``config.seq_len``,
            ``config.batch_size`` per step), a function ``generator -> batch`` called each step
            with the run's seeded CPU generator, or an iterable of batches; a batch is
            ``(inputs, targets)`` or ``(inputs, targets, mask)`` with ``(B, T)`` tensors and
            ``mask`` True where the position counts (see :mod:`llmviz.training.batches`).
        config: the run's hyper-parameters and seed.
        val_tokens: optional ``(M,)`` stream evaluated with :func:`evaluate_lengths` every
            ``config.eval_every`` steps and after the last step.
        loss_terms: extra terms ``term(output, batch) -> scalar tensor`` added to the loss
            (``output`` is what the model returned); a sequence or ``{name: term}``. Each
            term's value is recorded in ``history.terms[name]``.
        callbacks: ``callback(step, model) -> number or {key: number}``, called (model in eval
            mode) every ``config.eval_every`` steps and after the last step; values go to
            ``history.metrics[name]`` (``name.key`` for a mapping), steps to
            ``history.metric_steps``.
        progress: show a tqdm progress bar (a live widget in Jupyter; never during the book
            build, ``LLMVIZ_BUILD``, whose pages would keep its last frame, nor in a worker
            process of ``run_seeds``, whose bars would interleave).

    Returns:
        A :class:`History`. On divergence the run stops at once: ``history.diverged`` is True,
        the model keeps its last (non-finite) parameters, and no evaluation or callback runs.
    """
    from multiprocessing import parent_process

    from tqdm.auto import tqdm

    from ..runtime import in_book_build

    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    terms = _named(loss_terms, "loss_terms", "(output, batch) -> scalar tensor")
    metrics = _named(callbacks, "callbacks", "(step, model) -> number")
    if val_tokens is not None:
        check_tensor(val_tokens, "val_tokens", ndim=1)
    if config.device is not None:
        model.to(config.device)
    device = model_device(model)
    generator = torch.Generator().manual_seed(config.seed)
    next_batch = batch_reader(data, batch_size=config.batch_size, seq_len=config.seq_len,
                              generator=generator, device=device, steps=config.steps)
    history = History(config=config)
    history.terms.update({name: [] for name in terms})
    # A model whose config carries a z-loss weight (llmviz ModelConfig.z_loss_weight) is trained
    # with that auxiliary term, exactly as its own ``loss`` adds it.
    z_weight = float(getattr(getattr(model, "config", None), "z_loss_weight", 0.0) or 0.0)
    optimizer = torch.optim.AdamW(
        _param_groups(model, config.weight_decay), lr=config.lr, betas=config.betas
    )
    fork = [device.index or 0] if device.type == "cuda" else []
    start = time.perf_counter()
    with torch.random.fork_rng(devices=fork), _threads(config.threads):
        torch.manual_seed(config.seed)
        model.train()
        quiet = not progress or in_book_build() or parent_process() is not None
        bar = tqdm(range(config.steps), disable=quiet, leave=False, desc="train")
        for step in bar:
            lr = lr_at(step, config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch = next_batch(step)
            output = model(batch.inputs)
            logits = logits_of(output)  # (B, T, V)
            ce = masked_cross_entropy(logits, batch.targets, batch.mask)
            loss = ce
            if z_weight > 0:  # PaLM's z-loss, when the model's config asks for it
                loss = loss + z_weight * z_loss(logits, batch.mask)
            aux = getattr(output, "aux_loss", None)  # a mixture of experts' balancing terms
            if aux is not None:
                loss = loss + aux
            for name, term in terms.items():
                value = _scalar(term(output, batch), f"loss term {name!r}")
                history.terms[name].append(float(value.detach()))
                loss = loss + value
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            max_norm = config.grad_clip if config.grad_clip is not None else math.inf
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
            value = float(loss.detach())
            history.loss.append(value)
            history.cross_entropy.append(float(ce.detach()))
            history.lr.append(lr)
            history.grad_norm.append(grad_norm)
            too_big = config.max_loss is not None and value > config.max_loss
            if not (math.isfinite(value) and math.isfinite(grad_norm)) or too_big:
                history.diverged, history.diverged_at = True, step
                break
            optimizer.step()
            if hasattr(model, "update_router_biases"):  # auxiliary-loss-free MoE balancing
                model.update_router_biases()
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
            if metrics and (last or due):
                _record_metrics(history, metrics, step + 1, model)
        bar.close()
    model.eval()
    history.seconds = time.perf_counter() - start
    return history
