"""The RoPE module of one attention layer: :class:`RotaryEmbedding` owns the frequencies
(float32 under ``.to(torch.bfloat16)``, recomputed past the trained length for ``dynamic``
scaling) and rotates q and k with the functional core of :mod:`llmviz.position.rope`.

Shapes: B batch, H heads, G kv heads, T sequence length, D head dim, R rotary dim (``R <= D``).
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_choice, check_tensor
from ._common import check_rotary_dims, positions_for, seq_len_of
from .rope import LAYOUTS, apply_rotary, rope_cos_sin, rope_frequencies
from .rope_scaling import RopeScaling

__all__ = ["RotaryEmbedding"]


class RotaryEmbedding(nn.Module):
    """RoPE for the queries and keys of one attention layer.

    Holds ``inv_freq`` as a non-persistent buffer (so it follows ``.to(device)`` and never
    enters a state dict; it stays float32 under ``.to(torch.bfloat16)``/``.half()``) and rotates
    q and k with the same cos/sin, computed in float32 and cast to the query dtype.

    Args:
        head_dim: D, features per head.
        base: theta base.
        layout: ``"half"`` (HF/GPT-NeoX) or ``"interleaved"`` (RoFormer/Meta).
        rotary_dim: R <= D rotating features (default D).
        scaling: optional :class:`RopeScaling`; ``dynamic`` recomputes frequencies when a
            forward call reaches past the trained length.
    """

    inv_freq: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        scaling: RopeScaling | None = None,
    ) -> None:
        super().__init__()
        check_choice(layout, "layout", LAYOUTS)
        self.head_dim = head_dim
        self.rotary_dim = check_rotary_dims(head_dim, rotary_dim)
        self.base = float(base)
        self.layout = layout
        self.scaling = scaling
        inv_freq, self.attention_factor = rope_frequencies(
            head_dim, base=base, rotary_dim=rotary_dim, scaling=scaling
        )
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _apply(self, fn, recurse: bool = True):
        """Keep ``inv_freq`` float32 under ``.to(torch.bfloat16)`` (as HF): 8-bit frequencies put
        the angle at position 4095 off by up to 0.7 rad. Only cos/sin take the query dtype."""
        super()._apply(fn, recurse)
        if self.inv_freq.dtype not in (torch.float32, torch.float64):
            inv_freq, _ = rope_frequencies(
                self.head_dim, base=self.base, rotary_dim=self.rotary_dim, scaling=self.scaling,
                device=self.inv_freq.device,
            )
            self.inv_freq = inv_freq
        return self

    @property
    def dynamic(self) -> bool:
        """Whether the frequencies depend on the length reached (``dynamic`` scaling)."""
        return self.scaling is not None and self.scaling.kind == "dynamic"

    def frequencies(self, seq_len: int | None, device: torch.device) -> tuple[torch.Tensor, float]:
        """inv_freq and attention factor for a pass reaching ``seq_len`` (read by dynamic only)."""
        if self.dynamic and seq_len is not None:
            if seq_len > self.scaling.original_max_position_embeddings:
                return rope_frequencies(
                    self.head_dim, base=self.base, rotary_dim=self.rotary_dim,
                    scaling=self.scaling, seq_len=seq_len, device=device,
                )
        return self.inv_freq.to(device), self.attention_factor

    def cos_sin(
        self, positions: torch.Tensor, *, dtype: torch.dtype | None = None,
        seq_len: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin tables (T, R) or (B, T, R) for ``positions``; compute once, reuse for q and k.

        ``seq_len`` (cache + T, from shapes) sizes ``dynamic`` scaling; without it, dynamic
        reads ``positions.max() + 1`` from the device (a GPU stall, a compile graph break).
        """
        if self.dynamic and seq_len is None:
            seq_len = seq_len_of(positions)
        inv_freq, factor = self.frequencies(seq_len, positions.device)
        if dtype == torch.float64:
            inv_freq = inv_freq.double()
        return rope_cos_sin(
            positions, inv_freq, layout=self.layout, attention_factor=factor, dtype=dtype
        )

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None = None, *,
        seq_len: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate q (B, H, T, D) and k (B, G, T, D) at ``positions``; ``seq_len``: see cos_sin.

        Returns:
            ``(q, k)`` rotated, shapes and dtypes unchanged.
        """
        check_tensor(q, "q", ndim=4, floating=True)
        check_tensor(k, "k", ndim=4, floating=True)
        if q.shape[-1] != self.head_dim or k.shape[-1] != self.head_dim:
            raise ValueError(
                f"q/k head dim ({q.shape[-1]}, {k.shape[-1]}) must equal this "
                f"RotaryEmbedding's head_dim ({self.head_dim})"
            )
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(
                f"q has T={q.shape[-2]} but k has T={k.shape[-2]}: rotate new keys before "
                "appending them to the cache, with the same positions as the queries"
            )
        positions = positions_for(q, positions)
        cos, sin = self.cos_sin(positions, dtype=q.dtype, seq_len=seq_len)
        return (
            apply_rotary(q, cos, sin, layout=self.layout),
            apply_rotary(k, cos, sin, layout=self.layout),
        )

    def extra_repr(self) -> str:
        extra = f", scaling={self.scaling.kind}" if self.scaling else ""
        return (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base:g}, "
            f"layout={self.layout!r}{extra}"
        )
