"""Attention inputs of any rank, as torch's ``scaled_dot_product_attention`` takes them
(private to llmviz): the leading dims of ``(..., H, T, D)`` flattened into one batch for the
``(B, H, T, D)`` kernels of :mod:`llmviz.attention.functional`, and the results laid back.
"""

from __future__ import annotations

import math

import torch

from .._checks import check_tensor
from ._checks import check_mask, check_same_dtype

__all__ = ["Layout"]


class Layout:
    """How inputs of any rank ``(..., H, T, D)`` map to the ``(B, H, T, D)`` this module
    computes on, and back: the leading dims (broadcast between q, k and v, as torch does) are
    flattened into B; 2-D ``(T, D)`` inputs get one head, 3-D ``(H, T, D)`` one batch."""

    def __init__(self, q, k, v, enable_gqa: bool | None) -> None:
        names = (("q", q), ("k", k)) + ((("v", v),) if v is not None else ())
        for name, t in names:
            check_tensor(t, name, min_ndim=2, floating=True)
        check_same_dtype(q, k, q if v is None else v)
        if enable_gqa is not None and not isinstance(enable_gqa, bool):
            raise TypeError(f"enable_gqa must be True, False or None, got {enable_gqa!r}")
        self.ndim = max(t.ndim for _, t in names)
        self.lead: tuple[int, ...] | None = None  # None: already (B, H, T, D)
        if not all(t.ndim == 4 and t.shape[0] == q.shape[0] for _, t in names):
            full = max(self.ndim, 3)
            padded = [t.view((1,) * (full - t.ndim) + tuple(t.shape)) for _, t in names]
            try:
                self.lead = tuple(torch.broadcast_shapes(*(t.shape[:-3] for t in padded)))
            except RuntimeError:
                shapes = ", ".join(f"{n} {tuple(t.shape)}" for n, t in names)
                raise ValueError(
                    f"the leading dims of {shapes} do not broadcast; q must be (..., H, T, D) and "
                    "k, v (..., G, S, D) with the same (or broadcastable) leading dims '...'"
                ) from None
            B = math.prod(self.lead)
            flat = [t.expand(*self.lead, *t.shape[-3:]).reshape(B, *t.shape[-3:]) for t in padded]
            q, k = flat[0], flat[1]
            v = flat[2] if v is not None else None
        self.q, self.k, self.v = q, k, v
        H, G = q.shape[-3], k.shape[-3]
        if enable_gqa is False and H != G:
            raise ValueError(
                f"q has {H} heads but k and v have {G}, and enable_gqa=False; pass "
                "enable_gqa=True (or None) to share each key/value head among H // G query heads"
            )

    def target(self, T: int, S: int) -> tuple[int, ...]:
        """The scores' shape as the caller sees it, ``(..., H, T, S)``, for mask checks."""
        H = self.q.shape[1]
        if self.lead is None:
            return (self.q.shape[0], H, T, S)
        return (*self.lead, H, T, S) if self.ndim > 2 else (T, S)

    def mask(self, m: torch.Tensor | None, name: str, T: int, S: int) -> torch.Tensor | None:
        """``m`` checked against the caller's scores shape, then laid out for ``(B, H, T, S)``."""
        check_mask(m, self.target(T, S), name)
        if m is None or self.lead is None or m.ndim <= 3:
            return m  # (h, T, S) and lower broadcast over (B, H, T, S) as they are
        n = len(self.lead)
        m = m.view((1,) * (n + 3 - m.ndim) + tuple(m.shape))
        if all(d == 1 for d in m.shape[:n]):
            return m.reshape(1, *m.shape[n:])
        return m.expand(*self.lead, *m.shape[n:]).reshape(-1, *m.shape[n:])

    def back(self, x: torch.Tensor) -> torch.Tensor:
        """A ``(B, H, T, X)`` result in the caller's layout ``(..., H, T, X)``."""
        if self.lead is None:
            return x
        if self.ndim == 2:
            return x.reshape(x.shape[-2:])
        return x.reshape(*self.lead, *x.shape[1:])
