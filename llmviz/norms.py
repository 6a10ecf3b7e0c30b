"""Normalisation layers for sequences: LayerNorm, RMSNorm, BatchNorm, GroupNorm, InstanceNorm.

Every norm here takes activations of shape ``(B, T, C)`` (LayerNorm and RMSNorm accept any
leading dimensions, ``(..., C)``, so they also serve as per-head QK-norm on ``(B, H, T, D)``).
They differ only in *which axes the statistics are taken over*:

============  =========================  ==========================================
norm          statistics over            one mean/variance per
============  =========================  ==========================================
LayerNorm     C                          token ``(b, t)``
RMSNorm       C (no mean subtracted)     token ``(b, t)``
BatchNorm     B and T                    channel ``c`` (running averages for eval)
GroupNorm     T and a group of C/G chans sequence and group ``(b, g)``
InstanceNorm  T                          sequence and channel ``(b, c)``
============  =========================  ==========================================

GroupNorm with one group normalises a whole sequence at once; with ``G = C`` groups it is
InstanceNorm: it sits between the two.

Conventions:
    * ``eps`` is added to the variance (or mean square) *inside* the square root:
      ``(x - mean) / sqrt(var + eps)``, as in torch and Hugging Face models.
    * Variances used for normalising are biased (divide by n); BatchNorm's running variance
      uses the unbiased estimate, as torch does.
    * Padding masks are ``(B, T)`` with True (or 1) = a real token, the Hugging Face
      ``attention_mask`` convention. Padded positions never enter the statistics; their
      outputs are normalised with the same statistics and carry no meaning.
    * The pure functions compute in at least float32 and cast back, like Hugging Face Llama.

References:
    Ba et al. 2016, "Layer Normalization"; Zhang & Sennrich 2019, "Root Mean Square Layer
    Normalization"; Ioffe & Szegedy 2015, "Batch Normalization"; Wu & He 2018, "Group
    Normalization"; Ulyanov et al. 2016, "Instance Normalization".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._utils import check_choice, check_positive, check_tensor

__all__ = [
    "layer_norm",
    "rms_norm",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "LayerNorm",
    "RMSNorm",
    "BatchNormSeq",
    "GroupNormSeq",
    "InstanceNormSeq",
    "make_norm",
    "NORM_KINDS",
]

#: Names accepted by :func:`make_norm`.
NORM_KINDS = ("layer", "layer_nobias", "rms", "rms_gemma", "batch", "group", "instance", "none")


# ----------------------------------------------------------------------------- helpers
def _upcast(x: Tensor) -> Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _check_eps(eps: float) -> None:
    if not eps > 0:
        raise ValueError(
            f"eps must be positive (it keeps the square root away from zero), got {eps}; "
            "typical values are 1e-5 or 1e-6"
        )


def _check_last_dim(x: Tensor, d: int, who: str) -> None:
    if x.shape[-1] != d:
        raise ValueError(
            f"{who} was built for d={d} features but the input's last dimension is "
            f"{x.shape[-1]} (shape {tuple(x.shape)})"
        )


def _check_param(p: Tensor | None, d: int, name: str) -> None:
    if p is not None and p.shape != (d,):
        raise ValueError(f"{name} must have shape ({d},), got {tuple(p.shape)}")


def _check_mask(mask: Tensor | None, x: Tensor) -> Tensor | None:
    """Validate a (B, T) padding mask (True/1 = real token) and return it as (B, T, 1) float."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.shape != x.shape[:2]:
        raise ValueError(
            f"mask must have shape (B, T) = {tuple(x.shape[:2])} with True/1 = real token, "
            f"got {tuple(mask.shape)}"
        )
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("mask must hold only 0/1 (or False/True), 1 = real token")
    return mask.to(device=x.device, dtype=torch.float32).unsqueeze(-1)  # (B, T, 1)


def _moments(x: Tensor, dims: tuple[int, ...], w: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Mean, biased variance and count over ``dims``; ``w`` (broadcastable 0/1) weights entries."""
    if w is None:
        n = torch.tensor(
            float(torch.Size([x.shape[d] for d in dims]).numel()), device=x.device
        )
        mean = x.mean(dim=dims, keepdim=True)
        var = (x - mean).pow(2).mean(dim=dims, keepdim=True)
        return mean, var, n
    w = w.expand_as(x)
    n = w.sum(dim=dims, keepdim=True)
    safe = n.clamp_min(1.0)
    mean = (x * w).sum(dim=dims, keepdim=True) / safe
    var = ((x - mean).pow(2) * w).sum(dim=dims, keepdim=True) / safe
    return mean, var, n


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


# ----------------------------------------------------------------------------- functions
def layer_norm(
    x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, *, eps: float = 1e-5
) -> Tensor:
    """LayerNorm over the last dimension: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    Args:
        x: ``(..., C)``.
        weight, bias: optional ``(C,)`` gain and shift.
        eps: added to the biased variance inside the square root.

    Returns:
        ``(..., C)``, same dtype as ``x``. Each token has mean 0 and variance
        ``var / (var + eps)`` (just under 1) before the affine step.
    """
    check_tensor(x, "x", floating=True)
    _check_eps(eps)
    _check_param(weight, x.shape[-1], "weight")
    _check_param(bias, x.shape[-1], "bias")
    h = _upcast(x)
    mean = h.mean(dim=-1, keepdim=True)  # (..., 1)
    var = (h - mean).pow(2).mean(dim=-1, keepdim=True)  # (..., 1), biased
    y = (h - mean) * torch.rsqrt(var + eps)
    return _affine(y.to(x.dtype), weight, bias)


def rms_norm(
    x: Tensor, weight: Tensor | None = None, *, eps: float = 1e-6, unit_offset: bool = False
) -> Tensor:
    """RMSNorm over the last dimension: ``x / sqrt(mean(x**2) + eps) * weight``.

    No mean is subtracted and there is no bias: on mean-centred input it equals LayerNorm
    without bias. It is scale invariant: ``rms_norm(a * x) == rms_norm(x)`` for ``a > 0``
    (up to ``eps``).

    Args:
        x: ``(..., C)``.
        weight: optional ``(C,)`` gain.
        eps: added to the mean square inside the square root.
        unit_offset: Gemma's convention: scale by ``1 + weight`` (the weight is stored
            as an offset from one and initialised to zero). The product is then taken in
            float32 before casting back, as Gemma does; Llama casts first, then scales.

    Returns:
        ``(..., C)``, same dtype as ``x``.
    """
    check_tensor(x, "x", floating=True)
    _check_eps(eps)
    _check_param(weight, x.shape[-1], "weight")
    h = _upcast(x)
    y = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., C)
    if unit_offset:
        if weight is not None:
            y = y * (1.0 + weight.float())
        return y.to(x.dtype)
    return _affine(y.to(x.dtype), weight, None)


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
    _check_eps(eps)
    C = x.shape[-1]
    for p, name in ((running_mean, "running_mean"), (running_var, "running_var"),
                    (weight, "weight"), (bias, "bias")):
        _check_param(p, C, name)
    if not 0 < momentum <= 1:
        raise ValueError(f"momentum must be in (0, 1], got {momentum}")
    w = _check_mask(mask, x)
    h = _upcast(x)
    if training:
        mean, var, n = _moments(h, (0, 1), w)  # (1, 1, C) each
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
    return _affine(y.to(x.dtype), weight, bias)


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
    _check_eps(eps)
    B, T, C = x.shape
    if not isinstance(n_groups, int) or n_groups <= 0 or C % n_groups:
        raise ValueError(
            f"the number of channels C ({C}) must be divisible by n_groups ({n_groups})"
        )
    _check_param(weight, C, "weight")
    _check_param(bias, C, "bias")
    w = _check_mask(mask, x)
    h = _upcast(x).reshape(B, T, n_groups, C // n_groups)  # (B, T, G, C/G)
    w4 = None if w is None else w.unsqueeze(-1)  # (B, T, 1, 1)
    mean, var, n = _moments(h, (1, 3), w4)  # (B, 1, G, 1)
    if bool((n < 1).any()):
        raise ValueError("every sequence needs at least one real token in mask")
    y = ((h - mean) * torch.rsqrt(var + eps)).reshape(B, T, C)  # (B, T, C)
    return _affine(y.to(x.dtype), weight, bias)


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


# ----------------------------------------------------------------------------- modules
class LayerNorm(nn.Module):
    """LayerNorm over the last dimension with learnable gain (and bias, unless ``bias=False``).

    Args:
        d: feature size C.
        eps: added to the variance inside the square root (torch/GPT-2 default 1e-5).
        bias: learn a shift (GPT-2) or not (e.g. OLMo, PaLM-style "no bias").
        fused: run ``torch.nn.functional.layer_norm`` (one kernel) instead of the readable
            :func:`layer_norm`; both compute the same function (tested).
    """

    def __init__(self, d: int, *, eps: float = 1e-5, bias: bool = True, fused: bool = True) -> None:
        super().__init__()
        check_positive(d, "d")
        _check_eps(eps)
        self.d, self.eps, self.fused = d, eps, fused
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        """``(..., C) -> (..., C)``."""
        check_tensor(x, "x", floating=True)
        _check_last_dim(x, self.d, "LayerNorm")
        if self.fused:
            return F.layer_norm(x, (self.d,), self.weight, self.bias, self.eps)
        return layer_norm(x, self.weight, self.bias, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, bias={self.bias is not None}, fused={self.fused}"


class RMSNorm(nn.Module):
    """RMSNorm over the last dimension with a learnable gain ``weight``.

    Args:
        d: feature size C.
        eps: added to the mean square inside the square root (Llama 2: 1e-5 or 1e-6).
        unit_offset: Gemma convention, scale by ``1 + weight`` with ``weight`` initialised
            to zero (Hugging Face ``GemmaRMSNorm``).
        fused: run ``torch.nn.functional.rms_norm`` instead of the readable :func:`rms_norm`.
            Never slower: one kernel on CUDA; on the CPU (torch 2.13) it is a composite of
            the same elementwise ops, so it only saves Python overhead on small inputs
            (``benchmarks/bench_norms.py`` measures it).
    """

    def __init__(
        self, d: int, *, eps: float = 1e-6, unit_offset: bool = False, fused: bool = True
    ) -> None:
        super().__init__()
        check_positive(d, "d")
        _check_eps(eps)
        self.d, self.eps, self.unit_offset, self.fused = d, eps, unit_offset, fused
        self.weight = nn.Parameter(torch.zeros(d) if unit_offset else torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        """``(..., C) -> (..., C)``."""
        check_tensor(x, "x", floating=True)
        _check_last_dim(x, self.d, "RMSNorm")
        if not self.fused:
            return rms_norm(x, self.weight, eps=self.eps, unit_offset=self.unit_offset)
        if self.unit_offset:
            y = F.rms_norm(_upcast(x), (self.d,), 1.0 + self.weight.float(), self.eps)
            return y.to(x.dtype)
        return F.rms_norm(x, (self.d,), self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, unit_offset={self.unit_offset}, fused={self.fused}"


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
        super().__init__()
        check_positive(d, "d")
        _check_eps(eps)
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
        _check_last_dim(x, self.d, "BatchNormSeq")
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
        super().__init__()
        check_positive(d, "d")
        _check_eps(eps)
        if n_groups <= 0 or d % n_groups:
            raise ValueError(
                f"the number of channels C ({d}) must be divisible by n_groups ({n_groups})"
            )
        self.d, self.n_groups, self.eps = d, n_groups, eps
        self.weight = nn.Parameter(torch.ones(d)) if affine else None
        self.bias = nn.Parameter(torch.zeros(d)) if affine else None

    def forward(self, x: Tensor, *, mask: Tensor | None = None) -> Tensor:
        """``(B, T, C) -> (B, T, C)``; ``mask`` (B, T), True = real token."""
        check_tensor(x, "x", ndim=3, floating=True)
        _check_last_dim(x, self.d, "GroupNormSeq")
        return group_norm(x, self.n_groups, self.weight, self.bias, mask=mask, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.d}, n_groups={self.n_groups}, eps={self.eps}"


class InstanceNormSeq(GroupNormSeq):
    """InstanceNorm over T for each sequence and channel (GroupNorm with ``G = C``)."""

    def __init__(self, d: int, *, eps: float = 1e-5, affine: bool = True) -> None:
        super().__init__(d, d, eps=eps, affine=affine)


def make_norm(kind: str, d: int, *, eps: float | None = None, **kwargs) -> nn.Module:
    """Build a norm by name (used by blocks and for per-head QK-norm).

    Args:
        kind: one of :data:`NORM_KINDS`: ``"layer"``, ``"layer_nobias"``, ``"rms"``,
            ``"rms_gemma"`` (1 + weight), ``"batch"``, ``"group"`` (pass ``n_groups=``),
            ``"instance"``, ``"none"`` (identity).
        d: feature size C.
        eps: overrides the class default when given.
        **kwargs: passed to the class (e.g. ``fused=False``, ``n_groups=4``, ``momentum``).
    """
    check_choice(kind, "norm kind", NORM_KINDS)
    if eps is not None:
        _check_eps(eps)
        kwargs["eps"] = eps
    if kind == "layer":
        return LayerNorm(d, **kwargs)
    if kind == "layer_nobias":
        return LayerNorm(d, bias=False, **kwargs)
    if kind == "rms":
        return RMSNorm(d, **kwargs)
    if kind == "rms_gemma":
        return RMSNorm(d, unit_offset=True, **kwargs)
    if kind == "batch":
        return BatchNormSeq(d, **kwargs)
    if kind == "group":
        if "n_groups" not in kwargs:
            raise ValueError("make_norm('group', ...) needs n_groups=, e.g. n_groups=4")
        return GroupNormSeq(d, kwargs.pop("n_groups"), **kwargs)
    if kind == "instance":
        return InstanceNormSeq(d, **kwargs)
    return nn.Identity()
