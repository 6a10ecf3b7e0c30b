"""ALiBi: attention with linear biases (Press, Smith and Lewis 2022).

Shapes: H heads, T queries, S keys. No position enters q or k; instead each head adds
``-m_h * distance`` to its scores, with a fixed slope ``m_h`` per head. Heads with a large slope
look only nearby; heads with a small slope see far.

Slopes: for H a power of two, the geometric sequence ``m_h = 2 ** (-8 (h + 1) / H)``,
h = 0 .. H-1 (so the first head has slope ``2 ** (-8 / H)``, not 1, and slopes *decrease* with
the head index). For other H (BLOOM's rule, from the authors' code): take the sequence for the
largest power of two P < H, then append every other slope of the sequence for 2P (exponents
1, 3, 5, ...) until there are H.

Bias: queries are the LAST T of the S keys (correct with a KV cache), so query t sits at absolute
position ``i = S - T + t``. ``causal=True`` gives ``-m_h (i - j)``: linear everywhere, with no
``-inf``; keys with ``j > i`` get a positive value and MUST be removed by the causal mask (the
bias is not a mask). ``causal=False`` gives the symmetric ``-m_h |i - j|`` for encoders.
The bias is one broadcast subtraction: any length, no table, no maximum.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from .._checks import check_flags, check_positive_int
from .relative import relative_positions

__all__ = ["alibi_slopes", "alibi_bias"]


def alibi_slopes(
    n_heads: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The per-head slopes: (H,), largest first.

    Raises:
        ValueError: if ``n_heads`` is not a positive integer.
    """
    check_positive_int(n_heads, "n_heads")
    p = 2 ** int(math.floor(math.log2(n_heads)))  # largest power of two <= H
    exponents = torch.arange(1, p + 1, dtype=torch.float64) * (8.0 / p)
    extra = n_heads - p
    if extra:
        # odd-numbered members of the 2P sequence: 2 ** (-8 k / 2P), k = 1, 3, 5, ...
        odd = torch.arange(1, 2 * extra, 2, dtype=torch.float64) * (8.0 / (2 * p))
        exponents = torch.cat((exponents, odd))
    return torch.pow(2.0, -exponents).to(device=device, dtype=dtype)


def alibi_bias(
    T: int,
    S: int | None = None,
    *,
    slopes: torch.Tensor | Sequence[float],
    causal: bool = True,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The additive bias of every head: (H, T, S).

    Args:
        T: number of queries (the last T positions).
        S: number of keys (default T).
        slopes: (H,) slopes, e.g. :func:`alibi_slopes`.
        causal: ``-m (i - j)`` (decoder; combine with a causal mask) or ``-m |i - j|`` (encoder).
        device, dtype: of the result (default: those of ``slopes``, float32 for a list).

    Returns:
        (H, T, S) float bias to add to the scores before the softmax.
    """
    check_flags(causal=causal)
    if not isinstance(slopes, (torch.Tensor, list, tuple)) and not hasattr(slopes, "__array__"):
        raise TypeError(
            f"slopes must be a (H,) tensor or a list of floats, got {type(slopes).__name__}; "
            "use alibi_slopes(n_heads)"
        )
    if dtype is not None and not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating dtype for a bias added to scores, got {dtype}")
    slopes = torch.as_tensor(slopes)
    if slopes.ndim != 1 or slopes.numel() == 0:
        raise ValueError(
            f"slopes must be a non-empty 1-D (H,) tensor, got shape {tuple(slopes.shape)}; "
            "use alibi_slopes(n_heads)"
        )
    if not slopes.is_floating_point():
        slopes = slopes.float()
    device = slopes.device if device is None else torch.device(device)
    dtype = slopes.dtype if dtype is None else dtype
    # i - j for query i (the last T of S positions) and key j: > 0 for past keys; checks T <= S
    distance = -relative_positions(T, S, device=device)  # (T, S)
    if not causal:
        distance = distance.abs()
    m = slopes.to(device=device, dtype=dtype)
    return -m[:, None, None] * distance.to(dtype)  # (H, T, S)
