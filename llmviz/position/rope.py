"""Rotary position embedding (RoPE): rotate each (query, key) feature pair by an angle that grows
with position, so that ``q_m . k_n`` depends on the positions only through ``m - n``.

Shapes: B batch, H heads, G kv heads, T sequence length, D head dim, R rotary dim (``R <= D``,
even). Only the first R features of each head rotate; the other ``D - R`` pass through
("partial rotary", GPT-NeoX/Phi ``rotary_pct``).

Two pairings of the R features are in use, and both are supported through ``layout=``:

* ``"half"`` (GPT-NeoX, Hugging Face Llama): feature ``i`` pairs with ``i + R/2``; the rotation
  is written ``x * cos + rotate_half(x) * sin``.
* ``"interleaved"`` (RoFormer, Meta's original Llama code, GPT-J): feature ``2i`` pairs with
  ``2i + 1``, i.e. the complex-number form ``(x_{2i} + j x_{2i+1}) * exp(j m theta_i)``.

Pair ``i`` turns at ``theta_i = base ** (-2i / R)`` radians per position in both layouts, so the two
are the same map up to a fixed permutation of the features
(:func:`interleaved_to_half_permutation`); this is the permutation Hugging Face applies to
``q_proj``/``k_proj`` rows when converting Meta checkpoints.

Context-extension schemes (:class:`RopeScaling`) change the frequencies and, for YaRN, scale
cos/sin by an ``attention_factor``; their formulas follow ``transformers.modeling_rope_utils``
(``ROPE_INIT_FUNCTIONS``), which the tests check value for value; they live in
:mod:`llmviz.position.rope_scaling` (``RopeScaling`` is re-exported here).

Over 350 lines, with a line budget: frequencies, cos/sin tables, the rotation and the module
that keeps them in float32 and sized from shapes are one computation, read top to bottom.

References: Su et al. 2021 (RoFormer); Chen et al. 2023 (position interpolation); bloc97 2023
(NTK-aware scaling); Peng et al. 2023 (YaRN); Meta 2024 (Llama 3.1 scaling).
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_choice, check_positive_int, check_tensor
from ._common import base_inv_freq
from .rope_scaling import SCALING_KINDS, RopeScaling, scaled_frequencies

__all__ = [
    "LAYOUTS",
    "SCALING_KINDS",
    "RopeScaling",
    "rope_frequencies",
    "rope_cos_sin",
    "apply_rotary",
    "apply_rope",
    "RotaryEmbedding",
    "interleaved_to_half_permutation",
]

LAYOUTS = ("half", "interleaved")


# ----------------------------------------------------------------------------- frequencies
def _check_dims(head_dim: int, rotary_dim: int | None) -> int:
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


def rope_frequencies(
    head_dim: int,
    *,
    base: float = 10000.0,
    rotary_dim: int | None = None,
    scaling: RopeScaling | None = None,
    seq_len: int | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, float]:
    """The rotation speeds of the R/2 feature pairs, in radians per position.

    Args:
        head_dim: D, features per head (even).
        base: theta base (10 000 in RoFormer/Llama 2, 500 000 in Llama 3).
        rotary_dim: R, how many leading features rotate (default D).
        scaling: optional context-extension scheme.
        seq_len: current length; only ``dynamic`` scaling uses it (defaults to the trained length).
        device: where to build the tensor.

    Returns:
        ``(inv_freq, attention_factor)``: inv_freq (R/2,) float32, slowest pair last; the factor
        multiplies cos and sin (1.0 except for YaRN).
    """
    dim = _check_dims(head_dim, rotary_dim)
    if not base > 1:
        raise ValueError(f"base must be > 1, got {base}")
    if scaling is None:
        return base_inv_freq(base, dim, device), 1.0
    if not isinstance(scaling, RopeScaling):
        raise TypeError(
            f"scaling must be a RopeScaling or None, got {type(scaling).__name__}; "
            "e.g. RopeScaling('linear', factor=4.0)"
        )
    return scaled_frequencies(base, dim, scaling, seq_len=seq_len, device=device)


# ----------------------------------------------------------------------------- cos / sin
def rope_cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    *,
    layout: str = "half",
    attention_factor: float = 1.0,
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every (position, pair) angle, laid out to match the features.

    Args:
        positions: (T,) or (B, T) integer or float positions (offsets for a KV cache included).
        inv_freq: (R/2,) from :func:`rope_frequencies`.
        layout: ``"half"`` gives ``[a_0..a_{R/2-1}, a_0..a_{R/2-1}]``, ``"interleaved"`` gives
            ``[a_0, a_0, a_1, a_1, ...]``.
        attention_factor: multiplies both (YaRN).
        dtype: output dtype (angles are always computed in float32 or wider).

    Returns:
        ``(cos, sin)``, each (T, R) or (B, T, R).
    """
    check_choice(layout, "layout", LAYOUTS)
    check_tensor(positions, "positions", ndim=(1, 2))
    check_tensor(inv_freq, "inv_freq", ndim=1)
    work = torch.promote_types(inv_freq.dtype, torch.float32)
    angles = positions.to(work)[..., None] * inv_freq.to(device=positions.device, dtype=work)
    # angles: (..., T, R/2)
    if layout == "half":
        angles = torch.cat((angles, angles), dim=-1)  # (..., T, R)
    else:
        angles = angles.repeat_interleave(2, dim=-1)  # (..., T, R)
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    if dtype is not None:
        cos, sin = cos.to(dtype), sin.to(dtype)
    return cos, sin


# ----------------------------------------------------------------------------- rotation
def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half"
) -> torch.Tensor:
    """Rotate the first R features of ``x`` by the cached angles; the rest pass through.

    Args:
        x: (..., T, D), typically (B, H, T, D).
        cos, sin: (T, R) or (B, T, R) from :func:`rope_cos_sin` (a (B, T, R) table broadcasts
            over the head axis of a 4-D ``x``).
        layout: pairing of the features, ``"half"`` or ``"interleaved"``; must match the one
            ``cos``/``sin`` were built with.

    Returns:
        Same shape and dtype as ``x``. Not in-place; differentiable.
    """
    check_choice(layout, "layout", LAYOUTS)
    check_tensor(x, "x", floating=True)
    if x.ndim < 2:
        raise ValueError(f"x must be (..., T, D) with at least 2 dims, got shape {tuple(x.shape)}")
    if cos.shape != sin.shape:
        raise ValueError(f"cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must have one shape")
    rot = cos.shape[-1]
    if rot % 2 or rot > x.shape[-1]:
        raise ValueError(
            f"cos/sin width R ({rot}) must be even and <= head dim D ({x.shape[-1]})"
        )
    if cos.ndim == 3 and x.ndim == 4:
        cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, R): broadcast over heads
    if cos.dtype != x.dtype:
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if rot < x.shape[-1]:
        head, tail = x[..., :rot], x[..., rot:]
        return torch.cat((_rotate(head, cos, sin, layout), tail), dim=-1)
    return _rotate(x, cos, sin, layout)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    # out = x * cos + rotate(x) * sin, with rotate(x) pairing (a, b) -> (-b, a). Written as one
    # product plus two fused multiply-adds on views, so no rotated copy of x is materialised.
    out = x * cos
    if layout == "half":
        h = x.shape[-1] // 2
        first, second = slice(0, h), slice(h, None)
    else:
        first, second = slice(0, None, 2), slice(1, None, 2)
    out[..., first].addcmul_(x[..., second], sin[..., first], value=-1)
    out[..., second].addcmul_(x[..., first], sin[..., second])
    return out


def _positions_for(x: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
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
    return positions.to(x.device)


def _seq_len(positions: torch.Tensor) -> int:
    return int(positions.max().item()) + 1 if positions.numel() else 0


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: str = "half",
    rotary_dim: int | None = None,
    scaling: RopeScaling | None = None,
) -> torch.Tensor:
    """Rotate ``x`` by its positions in one call (frequencies, cos/sin and rotation).

    Args:
        x: (B, H, T, D) queries or keys ((T, D) and (H, T, D) also work with (T,) positions).
        positions: (T,) or (B, T) integer positions; default ``arange(T)``. With a KV cache
            holding L tokens, pass ``L + arange(T)`` for the T new ones.
        base, layout, rotary_dim, scaling: see :func:`rope_frequencies` and :func:`apply_rotary`.

    Returns:
        Rotated tensor, same shape and dtype as ``x``.
    """
    check_tensor(x, "x", ndim=(2, 3, 4), floating=True)
    check_choice(layout, "layout", LAYOUTS)
    positions = _positions_for(x, positions)
    dynamic = scaling is not None and getattr(scaling, "kind", None) == "dynamic"
    inv_freq, factor = rope_frequencies(
        x.shape[-1], base=base, rotary_dim=rotary_dim, scaling=scaling,
        seq_len=_seq_len(positions) if dynamic else None, device=x.device,
    )
    if x.dtype == torch.float64:  # float64 input: float64 angles too (float32 otherwise, like HF)
        inv_freq = inv_freq.double()
    cos, sin = rope_cos_sin(positions, inv_freq, layout=layout, attention_factor=factor)
    return apply_rotary(x, cos, sin, layout=layout)


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
        self.rotary_dim = _check_dims(head_dim, rotary_dim)
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
            seq_len = _seq_len(positions)
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
        positions = _positions_for(q, positions)
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


def interleaved_to_half_permutation(d: int, *, rotary_dim: int | None = None) -> torch.Tensor:
    """Feature order that turns the interleaved layout into the rotate-half layout.

    With ``perm = interleaved_to_half_permutation(D)``:
    ``apply_rope(x[..., perm], layout="half") == apply_rope(x, layout="interleaved")[..., perm]``,
    and since q and k get the same permutation, every ``q . k`` is unchanged. Features past
    ``rotary_dim`` keep their place.

    Returns:
        (D,) long tensor ``[0, 2, 4, ..., R-2, 1, 3, ..., R-1, R, ..., D-1]``.
    """
    rot = _check_dims(d, rotary_dim)
    order = torch.cat((torch.arange(0, rot, 2), torch.arange(1, rot, 2)))
    return torch.cat((order, torch.arange(rot, d)))
