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
(``ROPE_INIT_FUNCTIONS``), which the tests check value for value.

References: Su et al. 2021 (RoFormer); Chen et al. 2023 (position interpolation); bloc97 2023
(NTK-aware scaling); Peng et al. 2023 (YaRN); Meta 2024 (Llama 3.1 scaling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .._utils import check_choice, check_tensor

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
    "rope_decay_curve",
    "rope_score_bound",
]

LAYOUTS = ("half", "interleaved")
SCALING_KINDS = ("linear", "ntk", "dynamic", "yarn", "llama3")
_NEEDS_ORIGINAL = ("dynamic", "yarn", "llama3")


@dataclass(frozen=True)
class RopeScaling:
    """How to stretch RoPE past the context it was trained on. Field names follow Hugging Face's
    ``rope_scaling`` dict.

    Attributes:
        kind: ``"linear"`` (position interpolation: every frequency divided by ``factor``),
            ``"ntk"`` (NTK-aware: the base grows to ``base * factor ** (R / (R - 2))``),
            ``"dynamic"`` (dynamic NTK: the NTK base change sized to the current length, no change
            up to ``original_max_position_embeddings``), ``"yarn"`` (NTK-by-parts ramp between
            interpolated and original frequencies, plus an attention factor), ``"llama3"``
            (Llama 3.1: low frequencies divided by ``factor``, high ones kept, smooth in between).
        factor: context extension ratio (new length / trained length), > 0.
        original_max_position_embeddings: the trained context length; required by ``dynamic``,
            ``yarn`` and ``llama3``.
        beta_fast, beta_slow: YaRN ramp bounds, in rotations over the trained context.
        mscale, mscale_all_dim: optional YaRN attention-factor terms (DeepSeek style).
        attention_factor: YaRN cos/sin multiplier; ``None`` means ``0.1 ln(factor) + 1``.
        truncate: YaRN: round the ramp bounds to whole dimensions (HF default True).
        low_freq_factor, high_freq_factor: Llama 3.1 wavelength thresholds
            (``original / low_freq_factor`` and ``original / high_freq_factor``).
    """

    kind: str
    factor: float = 1.0
    original_max_position_embeddings: int | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool = True
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0

    def __post_init__(self) -> None:
        check_choice(self.kind, "RopeScaling.kind", SCALING_KINDS)
        if not self.factor > 0:
            raise ValueError(f"RopeScaling.factor must be > 0, got {self.factor}")
        orig = self.original_max_position_embeddings
        if self.kind in _NEEDS_ORIGINAL and orig is None:
            raise ValueError(
                f"RopeScaling(kind={self.kind!r}) needs original_max_position_embeddings "
                "(the context length the model was trained on), e.g. 4096"
            )
        if orig is not None and orig <= 0:
            raise ValueError(
                f"original_max_position_embeddings must be positive, got {orig}"
            )
        if self.kind == "llama3" and not self.high_freq_factor > self.low_freq_factor:
            raise ValueError(
                f"llama3 scaling needs high_freq_factor ({self.high_freq_factor}) > "
                f"low_freq_factor ({self.low_freq_factor})"
            )

    def to_hf(self) -> dict[str, Any]:
        """The equivalent Hugging Face ``rope_scaling`` dict (``ntk`` has no HF counterpart)."""
        if self.kind == "ntk":
            raise ValueError(
                "kind='ntk' (static NTK-aware base change) has no Hugging Face rope_type; "
                "use 'dynamic' or change rope_theta instead"
            )
        out: dict[str, Any] = {"rope_type": self.kind, "factor": float(self.factor)}
        if self.kind in ("yarn", "llama3"):
            out["original_max_position_embeddings"] = self.original_max_position_embeddings
        if self.kind == "yarn":
            out.update(beta_fast=float(self.beta_fast), beta_slow=float(self.beta_slow),
                       truncate=self.truncate)
            for key in ("mscale", "mscale_all_dim", "attention_factor"):
                if getattr(self, key) is not None:
                    out[key] = float(getattr(self, key))
        if self.kind == "llama3":
            out.update(low_freq_factor=float(self.low_freq_factor),
                       high_freq_factor=float(self.high_freq_factor))
        return out


# ----------------------------------------------------------------------------- frequencies
def _check_dims(head_dim: int, rotary_dim: int | None) -> int:
    if not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
        raise ValueError(
            f"head_dim must be a positive even integer (RoPE rotates feature pairs), got {head_dim}"
        )
    if rotary_dim is None:
        return head_dim
    if not isinstance(rotary_dim, int) or rotary_dim <= 0 or rotary_dim % 2:
        raise ValueError(
            f"rotary_dim must be a positive even integer, got {rotary_dim}; "
            "use e.g. rotary_dim = head_dim // 2"
        )
    if rotary_dim > head_dim:
        raise ValueError(
            f"rotary_dim ({rotary_dim}) must be <= head_dim ({head_dim}): only the first "
            "rotary_dim features of a head can rotate"
        )
    return rotary_dim


def _base_inv_freq(base: float, dim: int, device: Any) -> torch.Tensor:
    # theta_i = base ** (-2i / dim), i = 0 .. dim/2 - 1; float32 like the reference
    exponent = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
    return 1.0 / (base**exponent)


def _ntk_exponent(dim: int, kind: str) -> float:
    if dim <= 2:
        raise ValueError(f"{kind} scaling needs rotary_dim >= 4, got {dim}")
    return dim / (dim - 2)


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
        return _base_inv_freq(base, dim, device), 1.0
    if not isinstance(scaling, RopeScaling):
        raise TypeError(
            f"scaling must be a RopeScaling or None, got {type(scaling).__name__}; "
            "e.g. RopeScaling('linear', factor=4.0)"
        )
    factor, kind = scaling.factor, scaling.kind
    orig = scaling.original_max_position_embeddings
    if kind == "linear":
        return _base_inv_freq(base, dim, device) / factor, 1.0
    if kind == "ntk":
        return _base_inv_freq(base * factor ** _ntk_exponent(dim, kind), dim, device), 1.0
    if kind == "dynamic":
        length = orig if seq_len is None else max(int(seq_len), orig)
        stretch = factor * length / orig - (factor - 1)
        return _base_inv_freq(base * stretch ** _ntk_exponent(dim, kind), dim, device), 1.0
    if kind == "yarn":
        return _yarn(base, dim, scaling, device)
    return _llama3(base, dim, scaling, device)


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn(base: float, dim: int, s: RopeScaling, device: Any) -> tuple[torch.Tensor, float]:
    factor, orig = s.factor, s.original_max_position_embeddings
    if s.attention_factor is not None:
        attention_factor = float(s.attention_factor)
    elif s.mscale and s.mscale_all_dim:
        attention_factor = _yarn_mscale(factor, s.mscale) / _yarn_mscale(factor, s.mscale_all_dim)
    else:
        attention_factor = _yarn_mscale(factor)

    def pair_index(n_rotations: float) -> float:
        # the (fractional) pair index whose wavelength fits n_rotations turns into `orig`
        return dim * math.log(orig / (n_rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_index(s.beta_fast), pair_index(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    keep = (1 - ramp).to(device)  # 1: original frequency (fast pairs), 0: interpolated
    pos_freqs = base ** (torch.arange(0, dim, 2, device=device).float() / dim)
    extrapolated, interpolated = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    return interpolated * (1 - keep) + extrapolated * keep, attention_factor


def _llama3(base: float, dim: int, s: RopeScaling, device: Any) -> tuple[torch.Tensor, float]:
    inv_freq = _base_inv_freq(base, dim, device)
    orig, factor = s.original_max_position_embeddings, s.factor
    low_wavelen = orig / s.low_freq_factor  # longer than this: fully interpolated
    high_wavelen = orig / s.high_freq_factor  # shorter than this: untouched
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, blended, scaled), 1.0


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
        positions: (T,) or (B, T) integer positions; default ``arange(T)``. Pass
            ``offset + arange(T)`` when the first T-1 ... tokens sit in a KV cache.
        base, layout, rotary_dim, scaling: see :func:`rope_frequencies` and :func:`apply_rotary`.

    Returns:
        Rotated tensor, same shape and dtype as ``x``.
    """
    check_tensor(x, "x", ndim=(2, 3, 4), floating=True)
    check_choice(layout, "layout", LAYOUTS)
    positions = _positions_for(x, positions)
    inv_freq, factor = rope_frequencies(
        x.shape[-1], base=base, rotary_dim=rotary_dim, scaling=scaling,
        seq_len=_seq_len(positions), device=x.device,
    )
    if x.dtype == torch.float64:  # float64 input: float64 angles too (float32 otherwise, like HF)
        inv_freq = inv_freq.double()
    cos, sin = rope_cos_sin(positions, inv_freq, layout=layout, attention_factor=factor)
    return apply_rotary(x, cos, sin, layout=layout)


class RotaryEmbedding(nn.Module):
    """RoPE for the queries and keys of one attention layer.

    Holds ``inv_freq`` as a non-persistent buffer (so it follows ``.to(device)`` and never
    enters a state dict) and rotates q and k with the same cos/sin.

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

    def frequencies(self, seq_len: int, device: torch.device) -> tuple[torch.Tensor, float]:
        """inv_freq and attention factor for a forward pass reaching ``seq_len`` positions."""
        if self.scaling is not None and self.scaling.kind == "dynamic":
            if seq_len > self.scaling.original_max_position_embeddings:
                return rope_frequencies(
                    self.head_dim, base=self.base, rotary_dim=self.rotary_dim,
                    scaling=self.scaling, seq_len=seq_len, device=device,
                )
        return self.inv_freq.to(device), self.attention_factor

    def cos_sin(
        self, positions: torch.Tensor, *, dtype: torch.dtype | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin tables (T, R) or (B, T, R) for ``positions``; compute once, reuse for q and k."""
        inv_freq, factor = self.frequencies(_seq_len(positions), positions.device)
        if dtype == torch.float64:
            inv_freq = inv_freq.double()
        return rope_cos_sin(
            positions, inv_freq, layout=self.layout, attention_factor=factor, dtype=dtype
        )

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate q (B, H, T, D) and k (B, G, T, D) at ``positions`` ((T,) or (B, T)).

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
        cos, sin = self.cos_sin(positions, dtype=q.dtype)
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


# ----------------------------------------------------------------------------- long-term decay
def _pairs_complex(x: torch.Tensor, layout: str) -> torch.Tensor:
    """(..., D) real -> (..., D/2) complex, pair i = feature pair rotated by theta_i."""
    half = x.shape[-1] // 2
    if layout == "half":
        return torch.complex(x[..., :half], x[..., half:])
    return torch.complex(x[..., 0::2], x[..., 1::2])


def rope_decay_curve(
    offsets: torch.Tensor, head_dim: int, *, base: float = 10000.0
) -> torch.Tensor:
    """RoFormer's long-term-decay curve: ``mean_j |S_j|`` with ``S_j = sum_{i<j} e^{i r theta_i}``.

    Args:
        offsets: (N,) relative distances r = m - n.
        head_dim: D.

    Returns:
        (N,) float64. It shrinks (with ripples) as |r| grows: a property of the *bound*, not of
        any particular q.k (see :func:`rope_score_bound`).
    """
    inv_freq = rope_frequencies(head_dim, base=base)[0].double()
    angles = offsets.double()[:, None] * inv_freq  # (N, D/2)
    partial = torch.polar(torch.ones_like(angles), angles).cumsum(-1)  # S_1 .. S_{D/2}
    return partial.abs().mean(-1)


def rope_score_bound(
    q: torch.Tensor, k: torch.Tensor, offsets: torch.Tensor, *, base: float = 10000.0,
    layout: str = "half",
) -> tuple[torch.Tensor, torch.Tensor]:
    """The actual score of q at position n + r and k at n, and RoFormer's upper bound on it.

    With ``h_i = q_i conj(k_i)`` per pair (complex), ``q_{n+r} . k_n = Re sum_i h_i e^{i r theta_i}``
    and, by Abel summation, ``|...| <= max_i |h_{i+1} - h_i| * sum_j |S_j|`` (``h_{D/2} = 0``).

    Args:
        q, k: (D,) vectors.
        offsets: (N,) distances r.

    Returns:
        ``(actual, bound)``, each (N,) float64; ``|actual| <= bound`` everywhere.
    """
    check_choice(layout, "layout", LAYOUTS)
    check_tensor(q, "q", ndim=1, floating=True)
    check_tensor(k, "k", ndim=1, floating=True)
    D = q.shape[-1]
    inv_freq = rope_frequencies(D, base=base)[0].double()
    h = _pairs_complex(q.double(), layout) * _pairs_complex(k.double(), layout).conj()  # (D/2,)
    angles = offsets.double()[:, None] * inv_freq  # (N, D/2)
    phase = torch.polar(torch.ones_like(angles), angles)
    actual = (phase * h).sum(-1).real
    steps = torch.diff(torch.cat((h, h.new_zeros(1)))).abs().max()
    bound = steps * phase.cumsum(-1).abs().sum(-1)
    return actual, bound
