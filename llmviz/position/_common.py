"""Helpers shared by the RoPE modules (:mod:`.rope`, :mod:`.rotary` and :mod:`.rope_scaling`).

R is the rotary dim (R/2 rotation pairs).
"""

from __future__ import annotations

from typing import Any

import torch

from .._checks import check_positive_int, check_tensor

__all__ = ["base_inv_freq", "check_rotary_dims", "positions_for", "seq_len_of"]


def base_inv_freq(base: float, dim: int, device: Any) -> torch.Tensor:
    """Unscaled RoPE frequencies ``theta_i = base ** (-2i / dim)``, ``i = 0 .. dim/2 - 1``:
    ``(dim/2,)`` float32, computed as the Hugging Face reference does (int64 arange, then
    float32) so the frequencies match it bit for bit."""
    exponent = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
    return 1.0 / (base**exponent)


def check_rotary_dims(head_dim: int, rotary_dim: int | None) -> int:
    """R (``rotary_dim``, default D) after checking D and R are even and ``R <= D``."""
    check_positive_int(head_dim, "head_dim")
    if head_dim % 2:
        raise ValueError(
            f"head_dim must be an even int (RoPE rotates feature pairs), got {head_dim}"
        )
    if rotary_dim is None:
        return head_dim
    check_positive_int(rotary_dim, "rotary_dim")
    if rotary_dim % 2:
        raise ValueError(
            f"rotary_dim must be an even int, got {rotary_dim}; "
            "use e.g. rotary_dim = head_dim // 2"
        )
    if rotary_dim > head_dim:
        raise ValueError(
            f"rotary_dim ({rotary_dim}) must be <= head_dim ({head_dim}): only the first "
            "rotary_dim features of a head can rotate"
        )
    return rotary_dim


def positions_for(x: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    """``positions`` checked against x (..., T, D) and on its device; ``arange(T)`` if None."""
    T = x.shape[-2]
    if positions is None:
        return torch.arange(T, device=x.device)
    check_tensor(positions, "positions", ndim=(1, 2))
    if positions.shape[-1] != T:
        raise ValueError(
            f"positions has length {positions.shape[-1]} but x has T={T} positions "
            f"(x shape {tuple(x.shape)})"
        )
    if positions.ndim == 2 and x.ndim != 4:
        raise ValueError(
            f"per-sequence positions (B, T) need x of shape (B, H, T, D), got {tuple(x.shape)}"
        )
    if positions.ndim == 2 and positions.shape[0] not in (1, x.shape[0]):
        raise ValueError(
            f"positions has batch {positions.shape[0]} but x has batch B={x.shape[0]} (x shape "
            f"{tuple(x.shape)}); pass (B, T) positions with the same B, or (T,) shared by all"
        )
    if positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be integer or real, got dtype {positions.dtype}")
    return positions.to(x.device)


def seq_len_of(positions: torch.Tensor) -> int:
    """``max(positions) + 1`` (a host read: only for dynamic scaling without ``seq_len``)."""
    return int(positions.max().item()) + 1 if positions.numel() else 0
