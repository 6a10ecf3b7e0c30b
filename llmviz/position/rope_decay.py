"""RoPE's "long-term decay": RoFormer's upper bound on |q_m . k_n| against the actual score.

The bound shrinks (with ripples) as |m - n| grows; the actual score of a given (q, k) pair is a
sum of cosines with fixed amplitudes and keeps oscillating. Shapes: D head dim, N offsets.
"""

from __future__ import annotations

import torch

from .._checks import check_choice, check_tensor
from .rope import LAYOUTS, rope_frequencies

__all__ = ["rope_decay_curve", "rope_score_bound"]


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
    check_tensor(offsets, "offsets", ndim=1)
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
