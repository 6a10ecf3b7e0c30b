"""Sinusoidal absolute position encoding (Vaswani et al. 2017, section 3.5).

Shapes: T positions, C model dim (even). Feature pair ``i`` (of C/2) oscillates at
``w_i = base ** (-2i / C)`` radians per position, i.e. with wavelength ``2 pi / w_i`` tokens,
from 2 pi (fastest) up to nearly ``2 pi * base`` (slowest).

Two layouts of the C features exist in the wild:

* ``"interleaved"``: ``[sin(w_0 p), cos(w_0 p), sin(w_1 p), cos(w_1 p), ...]`` (the paper's
  ``PE(p, 2i) = sin``, ``PE(p, 2i+1) = cos``);
* ``"concat"``: ``[sin(w_0 p) ... sin(w_{C/2-1} p), cos(w_0 p) ... cos(w_{C/2-1} p)]``
  (tensor2tensor, fairseq, several Hugging Face models).

Both hold the same numbers in a different order. In either one, moving from position p to p + k
is a fixed rotation of every (sin, cos) pair by ``w_i k`` (:func:`sinusoidal_shift_matrix`),
whatever p is; the dot product ``PE(p) . PE(p + k) = sum_i cos(w_i k)`` depends on k only.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._checks import check_choice, check_positive_int, check_real, check_tensor

__all__ = [
    "SINUSOIDAL_LAYOUTS",
    "sinusoidal_frequencies",
    "sinusoidal_wavelengths",
    "sinusoidal_features",
    "sinusoidal_encoding",
    "sinusoidal_shift_matrix",
    "SinusoidalPositionalEmbedding",
]

SINUSOIDAL_LAYOUTS = ("interleaved", "concat")


def _check_d_model(d_model: int) -> None:
    check_positive_int(d_model, "d_model")
    if d_model % 2:
        raise ValueError(
            f"d_model must be an even int (features come in sin/cos pairs), "
            f"got {d_model}"
        )


def sinusoidal_frequencies(
    d_model: int, *, base: float = 10000.0, device: torch.device | str | None = None
) -> torch.Tensor:
    """Angular frequency of each of the C/2 feature pairs: (C/2,) float32, fastest first."""
    _check_d_model(d_model)
    check_real(base, "base")
    if not base > 1:
        raise ValueError(f"base must be > 1, got {base}")
    exponent = torch.arange(0, d_model, 2, device=device, dtype=torch.float32) / d_model
    return torch.exp(-math.log(base) * exponent)


def sinusoidal_wavelengths(d_model: int, *, base: float = 10000.0) -> torch.Tensor:
    """Wavelength in tokens of each feature pair: (C/2,), from 2 pi up to ~2 pi * base."""
    return 2 * math.pi / sinusoidal_frequencies(d_model, base=base)


def sinusoidal_features(
    positions: torch.Tensor,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The encoding of arbitrary (integer, float or negative) positions.

    Args:
        positions: (...,) positions.
        d_model: C.
        base: frequency base.
        layout: ``"interleaved"`` or ``"concat"`` (see module docstring).
        dtype: output dtype (computed in float32 or wider).

    Returns:
        (..., C) encodings.
    """
    check_choice(layout, "layout", SINUSOIDAL_LAYOUTS)
    check_tensor(positions, "positions")
    if dtype is not None and not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating dtype (encodings lie in [-1, 1]), got {dtype}")
    freqs = sinusoidal_frequencies(d_model, base=base, device=positions.device)
    work = torch.promote_types(positions.dtype, torch.float32) if positions.is_floating_point() \
        else torch.float32
    angles = positions.to(work)[..., None] * freqs.to(work)  # (..., C/2)
    sin, cos = angles.sin(), angles.cos()
    if layout == "interleaved":
        out = torch.stack((sin, cos), dim=-1).flatten(-2)  # (..., C/2, 2) -> (..., C)
    else:
        out = torch.cat((sin, cos), dim=-1)  # (..., C)
    return out if dtype is None else out.to(dtype)


def sinusoidal_encoding(
    n_positions: int,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The table of encodings for positions ``0 .. n_positions - 1``: (T, C)."""
    check_positive_int(n_positions, "n_positions", allow_zero=True)
    positions = torch.arange(n_positions, device=device)
    return sinusoidal_features(positions, d_model, base=base, layout=layout, dtype=dtype)


def sinusoidal_shift_matrix(
    k: float, d_model: int, *, base: float = 10000.0, layout: str = "interleaved"
) -> torch.Tensor:
    """The (C, C) matrix M_k with ``PE(p + k) = M_k @ PE(p)`` for every position p.

    Block-diagonal in the pairs (after undoing the layout): each (sin, cos) pair is rotated by
    ``w_i k``. It does not depend on p, which is why a linear layer can attend by relative
    offset (Vaswani et al.'s motivation).
    """
    check_choice(layout, "layout", SINUSOIDAL_LAYOUTS)
    check_real(k, "k")
    angle = sinusoidal_frequencies(d_model, base=base).double() * k  # (C/2,)
    c, s = angle.cos(), angle.sin()
    half = d_model // 2
    idx = torch.arange(half)
    sin_idx, cos_idx = (2 * idx, 2 * idx + 1) if layout == "interleaved" else (idx, idx + half)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    # sin(a + b) = sin a cos b + cos a sin b ;  cos(a + b) = cos a cos b - sin a sin b
    m[sin_idx, sin_idx] = c
    m[sin_idx, cos_idx] = s
    m[cos_idx, sin_idx] = -s
    m[cos_idx, cos_idx] = c
    return m.float()


class SinusoidalPositionalEmbedding(nn.Module):
    """Fixed sinusoidal encodings for any positions (no length limit, no parameters).

    Args:
        d_model: C.
        base: frequency base.
        layout: ``"interleaved"`` or ``"concat"``.

    ``forward(positions)`` maps (...,) positions to (..., C) float32 encodings (cast them to
    the activations' dtype when adding).
    """

    def __init__(
        self, d_model: int, *, base: float = 10000.0, layout: str = "interleaved"
    ) -> None:
        super().__init__()
        _check_d_model(d_model)
        check_choice(layout, "layout", SINUSOIDAL_LAYOUTS)
        sinusoidal_frequencies(2, base=base)  # checks base now, not at the first forward
        self.d_model, self.base, self.layout = d_model, float(base), layout

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return sinusoidal_features(positions, self.d_model, base=self.base, layout=self.layout)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, base={self.base:g}, layout={self.layout!r}"
