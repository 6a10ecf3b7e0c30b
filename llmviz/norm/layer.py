"""LayerNorm and RMSNorm: the model norms, statistics over the features C of each token.

Each takes ``(..., C)``, so the same code serves the residual stream ``(B, T, C)`` and per-head
QK-norm on ``(B, H, T, D)``. Pure functions first; the modules only own ``weight``/``bias``.

Conventions: ``eps`` is added inside the square root, ``(x - mean) / sqrt(var + eps)``, as in
torch and Hugging Face; the functions compute in at least float32 and cast back to the input's
dtype, like Hugging Face Llama.

References:
    Ba et al. 2016, "Layer Normalization"; Zhang & Sennrich 2019, "Root Mean Square Layer
    Normalization".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_dtype_matches, check_flags, check_positive_int, check_tensor
from ._common import affine, check_eps, check_last_dim, check_param, upcast

__all__ = ["layer_norm", "rms_norm", "LayerNorm", "RMSNorm"]


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
    check_tensor(x, "x", min_ndim=1, floating=True)
    check_eps(eps)
    check_param(weight, x.shape[-1], "weight")
    check_param(bias, x.shape[-1], "bias")
    h = upcast(x)
    centred = h - h.mean(dim=-1, keepdim=True)  # (..., C), computed once
    var = centred.pow(2).mean(dim=-1, keepdim=True)  # (..., 1), biased
    y = centred * torch.rsqrt(var + eps)
    return affine(y.to(x.dtype), weight, bias)


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
    check_flags(unit_offset=unit_offset)
    check_tensor(x, "x", min_ndim=1, floating=True)
    check_eps(eps)
    check_param(weight, x.shape[-1], "weight")
    h = upcast(x)
    y = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., C)
    if unit_offset:
        if weight is not None:
            y = y * (1.0 + weight.float())
        return y.to(x.dtype)
    return affine(y.to(x.dtype), weight, None)


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
        check_flags(bias=bias, fused=fused)
        super().__init__()
        check_positive_int(d, "d")
        check_eps(eps)
        self.d, self.eps, self.fused = d, eps, fused
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        """``(..., C) -> (..., C)``."""
        check_tensor(x, "x", floating=True)
        check_last_dim(x, self.d, "LayerNorm")
        check_dtype_matches(x, self.weight, "LayerNorm", low_precision_ok=True)
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
        check_flags(unit_offset=unit_offset, fused=fused)
        super().__init__()
        check_positive_int(d, "d")
        check_eps(eps)
        self.d, self.eps, self.unit_offset, self.fused = d, eps, unit_offset, fused
        self.weight = nn.Parameter(torch.zeros(d) if unit_offset else torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        """``(..., C) -> (..., C)``."""
        check_tensor(x, "x", floating=True)
        check_last_dim(x, self.d, "RMSNorm")
        check_dtype_matches(x, self.weight, "RMSNorm", low_precision_ok=True)
        if not self.fused:
            return rms_norm(x, self.weight, eps=self.eps, unit_offset=self.unit_offset)
        if self.unit_offset:
            y = F.rms_norm(upcast(x), (self.d,), 1.0 + self.weight.float(), self.eps)
            return y.to(x.dtype)
        return F.rms_norm(x, (self.d,), self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, unit_offset={self.unit_offset}, fused={self.fused}"
