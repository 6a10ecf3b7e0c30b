"""Helpers shared by the model norms and the sequence norms (private to :mod:`llmviz.norm`)."""

from __future__ import annotations

import torch
from torch import Tensor

from .._checks import check_real


def upcast(x: Tensor) -> Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def check_eps(eps: float) -> None:
    check_real(eps, "eps")
    if not eps > 0:
        raise ValueError(
            f"eps must be positive (it keeps the square root away from zero), got {eps}; "
            "typical values are 1e-5 or 1e-6"
        )


def check_last_dim(x: Tensor, d: int, who: str) -> None:
    if x.shape[-1] != d:
        raise ValueError(
            f"{who} was built for d={d} features but the input's last dimension is "
            f"{x.shape[-1]} (shape {tuple(x.shape)})"
        )


def check_param(p: Tensor | None, d: int, name: str) -> None:
    if p is not None and p.shape != (d,):
        raise ValueError(f"{name} must have shape ({d},), got {tuple(p.shape)}")


def check_mask(mask: Tensor | None, x: Tensor) -> Tensor | None:
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


def moments(x: Tensor, dims: tuple[int, ...], w: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
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


def affine(y: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """``y * weight + bias``, returned in ``y``'s dtype: a float32 gain applied to bfloat16 or
    float16 activations (a module left in float32, or mixed precision) must not promote them."""
    dtype = y.dtype
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y.to(dtype)
