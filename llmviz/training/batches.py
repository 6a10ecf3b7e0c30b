"""Where :func:`llmviz.training.train` gets its batches: a token stream, a function, an iterator.

A *batch* is ``(inputs, targets)`` or ``(inputs, targets, mask)``: ``inputs`` and ``targets``
``(B, T)`` int64, already aligned (``targets[:, t]`` is what position ``t`` should predict),
``mask`` ``(B, T)`` bool with True = THIS POSITION COUNTS in the loss. A
:class:`llmviz.training.data.Task` (what :func:`~llmviz.training.data.copy_task`,
:func:`~llmviz.training.data.associative_recall` and :func:`~llmviz.training.data.induction_task`
return) is such a triple.

A *batch source* is one of

* a ``(N,)`` int64 token stream: random windows of ``config.seq_len`` tokens,
  ``config.batch_size`` per step (:func:`llmviz.training.data.random_batches`);
* a function called once per step with the run's seeded CPU ``torch.Generator`` (seeded with
  ``config.seed``), e.g. ``lambda g: induction_task(batch_size=32, seq_len=32, generator=g)``;
* an iterable of batches (a list, a generator expression), read one batch per step.

Shape letters: B batch, T sequence length.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, NamedTuple, Union

import torch

from .._checks import check_tensor
from .data import random_batches

__all__ = ["Batch", "BatchSource", "as_batch", "batch_reader"]


class Batch(NamedTuple):
    """One training batch, as every loss term receives it."""

    inputs: torch.Tensor  # (B, T) int64 token ids
    targets: torch.Tensor  # (B, T) int64, aligned with inputs (no shifting inside the loss)
    mask: torch.Tensor | None = None  # (B, T) bool, True = the position counts (None: all)


BatchSource = Union[torch.Tensor, Callable[[torch.Generator], Any], Iterable[Any]]


def as_batch(value: Any, *, device: torch.device | str | None = None) -> Batch:
    """Check one batch and move it to ``device``.

    Args:
        value: ``(inputs, targets)`` or ``(inputs, targets, mask)`` (a tuple, list, ``Task``
            or :class:`Batch`); ``mask`` may be None.
        device: where the tensors go (None: leave them).

    Returns:
        A :class:`Batch`.
    """
    if isinstance(value, torch.Tensor) or not isinstance(value, (tuple, list)) or len(value) not in (2, 3):
        raise TypeError(
            f"a batch must be (inputs, targets) or (inputs, targets, mask), got "
            f"{type(value).__name__}; return e.g. a data.Task or a tuple of (B, T) tensors"
        )
    inputs, targets = value[0], value[1]
    mask = value[2] if len(value) == 3 else None
    check_tensor(inputs, "batch inputs", ndim=2)
    check_tensor(targets, "batch targets", ndim=2)
    if targets.shape != inputs.shape:
        raise ValueError(
            f"batch targets have shape {tuple(targets.shape)} but inputs {tuple(inputs.shape)}; "
            "both must be (B, T), targets already shifted to line up with inputs"
        )
    if mask is not None:
        check_tensor(mask, "batch mask", ndim=2)
        if mask.dtype != torch.bool:
            raise TypeError(
                f"batch mask must be a bool tensor (True = the position counts), got dtype "
                f"{mask.dtype}; use mask.bool()"
            )
        if mask.shape != inputs.shape:
            raise ValueError(
                f"batch mask has shape {tuple(mask.shape)}, expected (B, T) = "
                f"{tuple(inputs.shape)} like the inputs"
            )
    if device is not None:
        inputs, targets = inputs.to(device), targets.to(device)
        mask = None if mask is None else mask.to(device)
    return Batch(inputs, targets, mask)


def _takes_generator(fn: Callable[..., Any]) -> bool:
    try:
        inspect.signature(fn).bind(torch.Generator())
    except TypeError:
        return False
    except ValueError:  # no signature (some builtins): try it
        return True
    return True


def batch_reader(
    data: BatchSource,
    *,
    batch_size: int,
    seq_len: int,
    generator: torch.Generator,
    device: torch.device,
    steps: int,
) -> Callable[[int], Batch]:
    """A function ``step -> Batch`` reading ``data`` (see the module docstring).

    ``batch_size`` and ``seq_len`` apply to token streams only; a function or iterable decides
    its own batch shape. ``steps`` is only used to word the error when an iterable runs out.
    """
    if isinstance(data, torch.Tensor):
        check_tensor(data, "train_tokens", ndim=1)

        def from_stream(step: int) -> Batch:
            inputs, targets = random_batches(
                data, batch_size=batch_size, seq_len=seq_len, generator=generator, device=device
            )
            return Batch(inputs, targets, None)

        return from_stream
    if callable(data):
        if not _takes_generator(data):
            raise TypeError(
                f"a batch function is called with one argument, the run's seeded "
                f"torch.Generator, but {getattr(data, '__name__', data)!r} does not take one; "
                "write e.g. lambda g: induction_task(batch_size=32, seq_len=32, generator=g)"
            )
        return lambda step: as_batch(data(generator), device=device)
    try:
        iterator = iter(data)
    except TypeError:
        raise TypeError(
            f"data must be a (N,) token tensor, a function generator -> batch or an iterable of "
            f"batches, got {type(data).__name__}"
        ) from None

    def from_iterator(step: int) -> Batch:
        try:
            value = next(iterator)
        except StopIteration:
            raise ValueError(
                f"the batch iterable ran out after {step} batches but config.steps is {steps}; "
                "give at least config.steps batches, or an endless iterator (itertools.cycle)"
            ) from None
        return as_batch(value, device=device)

    return from_iterator
