"""Sequence norms: BatchNorm, GroupNorm and InstanceNorm over ``(B, T, C)`` activations.

They differ from the model norms in *which axes the statistics are taken over*:

============  =========================  ==========================================
norm          statistics over            one mean/variance per
============  =========================  ==========================================
BatchNorm     B and T                    channel ``c`` (running averages for eval)
GroupNorm     T and a group of C/G chans sequence and group ``(b, g)``
InstanceNorm  T                          sequence and channel ``(b, c)``
============  =========================  ==========================================

GroupNorm with one group normalises a whole sequence at once; with ``G = C`` groups it is
InstanceNorm. Padding masks are ``(B, T)`` with True (or 1) = a real token, the Hugging Face
``attention_mask`` convention: padded positions never enter the statistics. Variances used
for normalising are biased (divide by n); BatchNorm's running variance uses the unbiased
estimate, as torch does.

References:
    Ioffe & Szegedy 2015, "Batch Normalization"; Wu & He 2018, "Group Normalization";
    Ulyanov et al. 2016, "Instance Normalization".
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .._checks import check_flags, check_positive_int, check_real, check_tensor
from ._common import (
    affine,
    check_eps,
    check_last_dim,
    check_mask,
    check_param,
    moments,
    upcast,
)

__all__ = ["batch_norm", "group_norm", "instance_norm", "BatchNormSeq", "GroupNormSeq", "InstanceNormSeq"]


def batch_norm(
    x: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    *,
    mask: Tensor | None = None,
    training: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """BatchNorm for sequences: one mean/variance per channel over the batch and time axes.

    In training mode the statistics come from the current batch (only real tokens, if
    ``mask`` is given) and, if running buffers are passed, they are updated in place:
    ``running = (1 - momentum) * running + momentum * batch_stat`` (unbiased variance).
    In eval mode the running statistics are used and the batch plays no part.

    Args:
        x: ``(B, T, C)``.
        running_mean, running_var: optional ``(C,)`` buffers (required when not training).
        weight, bias: optional ``(C,)`` affine parameters.
        mask: optional ``(B, T)`` bool/0-1, True = real token; padded positions are excluded
            from the statistics.
        training: use batch statistics (True) or running statistics (False).
        momentum: weight of the new batch in the running averages, in (0, 1].
        eps: added to the variance inside the square root.

    Returns:
        ``(B, T, C)``.
    """
    check_tensor(x, "x", ndim=3, floating=True)
    check_eps(eps)
    C = x.shape[-1]
    for p, name in ((running_mean, "running_mean"), (running_var, "running_var"),
                    (weight, "weight"), (bias, "bias")):
        check_param(p, C, name)
    check_real(momentum, "momentum")
    if not 0 < momentum <= 1:
        raise ValueError(f"momentum must be in (0, 1], got {momentum}")
    w = check_mask(mask, x)
    h = upcast(x)
    if training:
        mean, var, n = moments(h, (0, 1), w)  # (1, 1, C) each
        if bool((n <= 1).any()):
            raise ValueError(
                f"batch_norm in training mode needs more than one real value per channel, "
                f"got {int(n.min())} (shape {tuple(x.shape)}); use a larger batch or eval mode"
            )
        if running_mean is not None and running_var is not None:
            with torch.no_grad():
                unbiased = var * n / (n - 1)
                running_mean.mul_(1 - momentum).add_(momentum * mean.flatten().to(running_mean.dtype))
                running_var.mul_(1 - momentum).add_(momentum * unbiased.flatten().to(running_var.dtype))
    else:
        if running_mean is None or running_var is None:
            raise ValueError(
                "batch_norm in eval mode (training=False) needs running_mean and running_var"
            )
        mean, var = running_mean.float(), running_var.float()
    y = (h - mean) * torch.rsqrt(var + eps)
    return affine(y.to(x.dtype), weight, bias)


def group_norm(
    x: Tensor,
    n_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    *,
    mask: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """GroupNorm for sequences: the C channels split into ``n_groups`` contiguous groups; one
    mean/variance per (sequence, group), over time and the group's channels.

    ``n_groups=1`` normalises each whole sequence; ``n_groups=C`` is :func:`instance_norm`.
    Equals ``torch.nn.GroupNorm`` applied to ``x.transpose(1, 2)``.

    Args:
        x: ``(B, T, C)``; C must be divisible by ``n_groups``.
        n_groups: number of channel groups G.
        weight, bias: optional ``(C,)`` per-channel affine parameters.
        mask: optional ``(B, T)``, True = real token; pads are left out of the statistics.
        eps: added to the variance inside the square root.

    Returns:
        ``(B, T, C)``.
    """
    check_tensor(x, "x", ndim=3, floating=True)
    check_eps(eps)
    B, T, C = x.shape
    check_positive_int(n_groups, "n_groups")
    if C % n_groups:
        raise ValueError(
            f"the number of channels C ({C}) must be divisible by n_groups ({n_groups})"
        )
    check_param(weight, C, "weight")
    check_param(bias, C, "bias")
    w = check_mask(mask, x)
    h = upcast(x).reshape(B, T, n_groups, C // n_groups)  # (B, T, G, C/G)
    w4 = None if w is None else w.unsqueeze(-1)  # (B, T, 1, 1)
    mean, var, n = moments(h, (1, 3), w4)  # (B, 1, G, 1)
    if bool((n < 1).any()):
        raise ValueError("every sequence needs at least one real token in mask")
    y = ((h - mean) * torch.rsqrt(var + eps)).reshape(B, T, C)  # (B, T, C)
    return affine(y.to(x.dtype), weight, bias)


def instance_norm(
    x: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    *,
    mask: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """InstanceNorm for sequences: one mean/variance per (sequence, channel), over time.

    Equals ``torch.nn.InstanceNorm1d`` applied to ``x.transpose(1, 2)``.

    Args:
        x: ``(B, T, C)``.
        weight, bias: optional ``(C,)`` affine parameters.
        mask: optional ``(B, T)``, True = real token; pads are left out of the statistics.
        eps: added to the variance inside the square root.
    """
    check_tensor(x, "x", ndim=3, floating=True)
    return group_norm(x, x.shape[-1], weight, bias, mask=mask, eps=eps)




class BatchNormSeq(nn.Module):
    """BatchNorm over ``(B, T)`` for each of C channels, with running statistics.

    ``train()`` mode normalises with the batch's statistics (real tokens only, given a mask)
    and updates ``running_mean``/``running_var``; ``eval()`` mode uses the running ones.
    Equals ``torch.nn.BatchNorm1d`` on ``x.transpose(1, 2)`` when there is no padding.

    Args:
        d: number of channels C.
        eps: added to the variance inside the square root.
        momentum: weight of each new batch in the running averages.
        affine: learn ``weight``/``bias`` (initialised to one and zero).
    """

    def __init__(self, d: int, *, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True) -> None:
        check_flags(affine=affine)
        super().__init__()
        check_positive_int(d, "d")
        check_eps(eps)
        check_real(momentum, "momentum")
        if not 0 < momentum <= 1:
            raise ValueError(f"momentum must be in (0, 1], got {momentum}")
        self.d, self.eps, self.momentum = d, eps, momentum
        self.weight = nn.Parameter(torch.ones(d)) if affine else None
        self.bias = nn.Parameter(torch.zeros(d)) if affine else None
        self.register_buffer("running_mean", torch.zeros(d))
        self.register_buffer("running_var", torch.ones(d))

    def forward(self, x: Tensor, *, mask: Tensor | None = None) -> Tensor:
        """``(B, T, C) -> (B, T, C)``; ``mask`` (B, T), True = real token."""
        check_tensor(x, "x", ndim=3, floating=True)
        check_last_dim(x, self.d, "BatchNormSeq")
        return batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias,
            mask=mask, training=self.training, momentum=self.momentum, eps=self.eps,
        )

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, momentum={self.momentum}"


class GroupNormSeq(nn.Module):
    """GroupNorm over ``(T, C/G)`` for each sequence and group (see :func:`group_norm`).

    Args:
        d: number of channels C (divisible by ``n_groups``).
        n_groups: number of groups G.
        eps: added to the variance inside the square root.
        affine: learn per-channel ``weight``/``bias``.
    """

    def __init__(self, d: int, n_groups: int, *, eps: float = 1e-5, affine: bool = True) -> None:
        check_flags(affine=affine)
        super().__init__()
        check_positive_int(d, "d")
        check_eps(eps)
        check_positive_int(n_groups, "n_groups")
        if d % n_groups:
            raise ValueError(
                f"the number of channels C ({d}) must be divisible by n_groups ({n_groups})"
            )
        self.d, self.n_groups, self.eps = d, n_groups, eps
        self.weight = nn.Parameter(torch.ones(d)) if affine else None
        self.bias = nn.Parameter(torch.zeros(d)) if affine else None

    def forward(self, x: Tensor, *, mask: Tensor | None = None) -> Tensor:
        """``(B, T, C) -> (B, T, C)``; ``mask`` (B, T), True = real token."""
        check_tensor(x, "x", ndim=3, floating=True)
        check_last_dim(x, self.d, "GroupNormSeq")
        return group_norm(x, self.n_groups, self.weight, self.bias, mask=mask, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.d}, n_groups={self.n_groups}, eps={self.eps}"


class InstanceNormSeq(GroupNormSeq):
    """InstanceNorm over T for each sequence and channel (GroupNorm with ``G = C``)."""

    def __init__(self, d: int, *, eps: float = 1e-5, affine: bool = True) -> None:
        check_flags(affine=affine)
        super().__init__(d, d, eps=eps, affine=affine)
