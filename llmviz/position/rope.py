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

This module is the functional core (frequencies, cos/sin tables, the rotation); the module that
owns the frequencies of one attention layer, :class:`~llmviz.position.rotary.RotaryEmbedding`,
lives in :mod:`llmviz.position.rotary` (also importable from here, as before).

References: Su et al. 2021 (RoFormer); Chen et al. 2023 (position interpolation); bloc97 2023
(NTK-aware scaling); Peng et al. 2023 (YaRN); Meta 2024 (Llama 3.1 scaling).
"""

from __future__ import annotations

import torch

from .._checks import check_choice, check_positive, check_real, check_tensor
from ._common import base_inv_freq, check_rotary_dims, positions_for, seq_len_of
from .rope_scaling import SCALING_KINDS, RopeScaling, scaled_frequencies

__all__ = [
    "LAYOUTS",
    "SCALING_KINDS",
    "RopeScaling",
    "rope_frequencies",
    "rope_cos_sin",
    "apply_rotary",
    "apply_rope",
    "interleaved_to_half_permutation",
]

LAYOUTS = ("half", "interleaved")


# ----------------------------------------------------------------------------- frequencies


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
    dim = check_rotary_dims(head_dim, rotary_dim)
    check_real(base, "base")
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
    check_positive(attention_factor, "attention_factor")
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
    check_tensor(cos, "cos", ndim=(2, 3), floating=True)
    if cos.shape[-2] != x.shape[-2]:
        raise ValueError(
            f"cos/sin hold {cos.shape[-2]} positions but x has T={x.shape[-2]} (x shape "
            f"{tuple(x.shape)}); build them from x's T positions"
        )
    if cos.ndim == 3 and (x.ndim < 3 or cos.shape[0] not in (1, x.shape[0])):
        raise ValueError(
            f"per-sequence cos/sin {tuple(cos.shape)} need x (B, H, T, D) or (B, T, D) with the "
            f"same B, got x {tuple(x.shape)}; pass (T, R) tables to share them"
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
    if torch.is_grad_enabled() and (x.requires_grad or sin.requires_grad):
        # under autograd, in-place updates of slices cost a clone and copy per slice in the
        # backward: the plain out-of-place formula is cheaper there (HF's rotate_half form)
        if layout == "half":
            h = x.shape[-1] // 2
            rotated = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
        else:
            rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
        return x * cos + rotated * sin
    out = x * cos
    if layout == "half":
        h = x.shape[-1] // 2
        first, second = slice(0, h), slice(h, None)
    else:
        first, second = slice(0, None, 2), slice(1, None, 2)
    out[..., first].addcmul_(x[..., second], sin[..., first], value=-1)
    out[..., second].addcmul_(x[..., first], sin[..., second])
    return out


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
    positions = positions_for(x, positions)
    dynamic = scaling is not None and getattr(scaling, "kind", None) == "dynamic"
    inv_freq, factor = rope_frequencies(
        x.shape[-1], base=base, rotary_dim=rotary_dim, scaling=scaling,
        seq_len=seq_len_of(positions) if dynamic else None, device=x.device,
    )
    if x.dtype == torch.float64:  # float64 input: float64 angles too (float32 otherwise, like HF)
        inv_freq = inv_freq.double()
    cos, sin = rope_cos_sin(positions, inv_freq, layout=layout, attention_factor=factor)
    return apply_rotary(x, cos, sin, layout=layout)


def interleaved_to_half_permutation(d: int, *, rotary_dim: int | None = None) -> torch.Tensor:
    """Feature order that turns the interleaved layout into the rotate-half layout.

    With ``perm = interleaved_to_half_permutation(D)``:
    ``apply_rope(x[..., perm], layout="half") == apply_rope(x, layout="interleaved")[..., perm]``,
    and since q and k get the same permutation, every ``q . k`` is unchanged. Features past
    ``rotary_dim`` keep their place.

    Returns:
        (D,) long tensor ``[0, 2, 4, ..., R-2, 1, 3, ..., R-1, R, ..., D-1]``.
    """
    rot = check_rotary_dims(d, rotary_dim)
    order = torch.cat((torch.arange(0, rot, 2), torch.arange(1, rot, 2)))
    return torch.cat((order, torch.arange(rot, d)))
