"""Losses shared by the model and the trainer: next-token cross-entropy and PaLM's z-loss.

Both take logits already aligned with their targets (no shifting here) and an optional loss
mask, boolean with True = THIS POSITION COUNTS. :meth:`llmviz.model.DecoderLM.loss` and
:func:`llmviz.training.train` call these same functions, so a model trained by either path
optimises the same quantity.

Shape letters: B batch, T sequence length, V vocabulary size.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from .._checks import check_positive, check_tensor

__all__ = ["logits_of", "masked_cross_entropy", "z_loss", "z_loss_term"]


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


def _check_mask(mask: torch.Tensor, shape: torch.Size) -> None:
    check_tensor(mask, "mask", ndim=2)
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = the position counts), got dtype {mask.dtype}; "
            "use mask.bool() or a comparison such as targets != -100"
        )
    if mask.shape != shape:
        raise ValueError(
            f"mask has shape {tuple(mask.shape)}, expected (B, T) = {tuple(shape)} like the targets"
        )


def masked_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean cross-entropy over positions where ``mask`` is True (all positions if None).

    Args:
        logits: ``(B, T, V)``.
        targets: ``(B, T)`` int64, already aligned with ``logits`` (no shifting here).
        mask: ``(B, T)`` bool, True = the position counts.

    Returns:
        A scalar tensor (nats). An all-False mask (or ``T = 0``) gives 0: a sum over no
        position, so such a batch adds nothing to training (and has zero gradient).
    """
    check_tensor(logits, "logits", ndim=3, floating=True)
    check_tensor(targets, "targets", ndim=2)
    if targets.is_floating_point() or targets.dtype == torch.bool:
        raise TypeError(f"targets must be integer class ids, got dtype {targets.dtype}; use .long()")
    if targets.shape != logits.shape[:2]:
        raise ValueError(
            f"targets {tuple(targets.shape)} must match logits' (B, T) = {tuple(logits.shape[:2])}"
        )
    try:
        losses = F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")  # (B, T)
    except IndexError as err:
        raise ValueError(
            f"targets hold a class id outside [0, V={logits.shape[-1]}); mask such positions out"
        ) from err
    if mask is None:
        return losses.sum() / max(losses.numel(), 1)
    _check_mask(mask, targets.shape)
    return losses.where(mask, 0.0).sum() / mask.sum().clamp_min(1)  # no read back of the mask


def z_loss(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """PaLM's z-loss: ``mean(logsumexp(logits) ** 2)`` over the kept positions.

    ``logsumexp`` over the vocabulary is ``log Z``, the log of the softmax normaliser; pulling it
    towards 0 keeps the logits from drifting (Chowdhery et al. 2022, "PaLM", section 5, weight
    1e-4). Only positions that count in the loss are averaged, the same positions as the
    cross-entropy beside it.

    Args:
        logits: ``(B, T, V)``.
        mask: ``(B, T)`` bool, True = the position counts (None: all positions).

    Returns:
        A scalar tensor (the caller multiplies it by its weight).
    """
    check_tensor(logits, "logits", ndim=3)
    z = torch.logsumexp(logits.float(), dim=-1)  # (B, T) log partition function per position
    if mask is None:
        return z.square().mean()
    _check_mask(mask, logits.shape[:2])
    # over kept positions, 0 when there is none; no boolean indexing (no read back)
    return z.square().where(mask, 0.0).sum() / mask.sum().clamp_min(1)


def z_loss_term(weight: float) -> Callable[[Any, Any], torch.Tensor]:
    """A loss term for :func:`llmviz.training.train`: ``weight * z_loss`` over the batch's kept
    positions (``loss_terms={"z-loss": z_loss_term(1e-4)}``).

    A model whose config sets ``z_loss_weight`` already gets this term from the trainer; use
    this for a model without one (for example a Hugging Face model).
    """
    check_positive(weight, "weight")

    def term(output: Any, batch: Any) -> torch.Tensor:
        return weight * z_loss(logits_of(output), batch.mask)

    term.__name__ = "z_loss"
    return term
