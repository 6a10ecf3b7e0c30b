"""Llama 4's two query/key adjustments, as rotary-slot modules a
:class:`~llmviz.attention.module.MultiHeadAttention` calls with ``(q, k, positions)``:

* :class:`RotaryThenRMS` (RoPE layers, ``use_qk_norm``): rotate q and k, then divide each head
  by its root mean square, ``x / sqrt(mean(x^2) + eps)``, with no weight (transformers calls it
  ``Llama4TextL2Norm``; it is an RMS, not an L2, norm), computed in float32.
* :class:`QueryTemperature` (NoPE layers, ``attn_temperature_tuning``): no rotation; the query
  at position ``p`` is multiplied by ``1 + attn_scale * log(1 + floor((p + 1) / floor_scale))``,
  so attention sharpens slowly with distance from the start (Llama 4's long-context trick; 1 for
  the first ``floor_scale - 1`` positions). Keys are untouched.

Shape letters: B batch, H query heads, G kv heads, T tokens, D head dim.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_positive, check_real, check_tensor

__all__ = ["QueryTemperature", "RotaryThenRMS", "query_temperature"]


def _rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    f = x.float()
    return (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + eps)).type_as(x)


class RotaryThenRMS(nn.Module):
    """Rotate with ``rope`` (a :class:`~llmviz.position.rotary.RotaryEmbedding`), then RMS-normalise
    every head of q ``(B, H, T, D)`` and k ``(B, G, T, D)`` without a weight."""

    def __init__(self, rope: nn.Module, eps: float = 1e-5) -> None:
        super().__init__()
        if not isinstance(rope, nn.Module):
            raise TypeError(f"rope must be a rotary module, got {type(rope).__name__}")
        check_positive(eps, "eps")
        self.inner, self.eps = rope, float(eps)

    @property
    def cos_sin(self):
        """The rotary module's ``cos_sin`` (the layer passes ``seq_len`` on, as to a RotaryEmbedding)."""
        return self.inner.cos_sin

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None = None, *,
                seq_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = self.inner(q, k, positions, **({} if seq_len is None else {"seq_len": seq_len}))
        return _rms(q, self.eps), _rms(k, self.eps)

    def extra_repr(self) -> str:
        return f"eps={self.eps:g}"


def query_temperature(positions: torch.Tensor, floor_scale: float, attn_scale: float) -> torch.Tensor:
    """``1 + attn_scale * log1p(floor((positions + 1) / floor_scale))`` in float32."""
    check_tensor(positions, "positions")
    check_positive(floor_scale, "floor_scale")
    check_real(attn_scale, "attn_scale")
    return torch.log1p(torch.floor((positions.float() + 1.0) / floor_scale)) * attn_scale + 1.0


class QueryTemperature(nn.Module):
    """A NoPE layer's rotary slot: q times :func:`query_temperature` of its positions, k as is."""

    def __init__(self, floor_scale: float, attn_scale: float) -> None:
        super().__init__()
        check_positive(floor_scale, "floor_scale")
        self.floor_scale, self.attn_scale = float(floor_scale), float(attn_scale)

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None = None,
                **_: object) -> tuple[torch.Tensor, torch.Tensor]:
        if positions is None:
            raise ValueError("QueryTemperature needs the positions of the queries")
        t = query_temperature(positions, self.floor_scale, self.attn_scale)  # (T,) or (B, T)
        t = t[..., None, :, None] if t.dim() == 1 else t[:, None, :, None]  # (1, T, 1) or (B, 1, T, 1)
        return (q * t).to(q.dtype), k

    def extra_repr(self) -> str:
        return f"floor_scale={self.floor_scale:g}, attn_scale={self.attn_scale:g}"
