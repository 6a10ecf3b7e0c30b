"""Property checks for position schemes: is the score translation invariant, symmetric,
monotone in distance?

A scheme is reduced to its *position score* ``f(m, n)``: what the positions contribute to the
attention score of query position m for key position n (a bias, or a dot product of encoded
vectors with the content held fixed). The checks are numerical, over a grid of positions:

* translation invariance: ``f(m + s, n + s) == f(m, n)`` for shifts s (depends on m - n only);
* symmetry: ``f(m, n) == f(n, m)`` (looking k back scores like looking k ahead);
* monotone decay: ``f(m, m - d)`` (and ``f(m, m + d)`` unless causal) never increases with the
  distance d, at every m tested.

:func:`book_schemes` builds the scheme of every encoding in the book from the library's own
functions, and :func:`property_table` turns the results into one DataFrame (chapter 6).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import torch

from .._checks import check_positive_int
from .alibi import alibi_slopes
from .relative import T5RelativeBias, t5_relative_bucket
from .rope import apply_rope
from .sinusoidal import sinusoidal_features

__all__ = [
    "PositionScheme",
    "PropertyResult",
    "check_properties",
    "property_table",
    "book_schemes",
]

ScoreFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class PositionScheme:
    """A named position score ``score(m, n)``.

    ``score`` takes two broadcastable integer tensors (query positions m, key positions n) and
    returns the float scores, broadcast. ``causal`` schemes are only checked for keys n <= m
    (symmetry is then not applicable).
    """

    name: str
    score: ScoreFn
    causal: bool = False
    note: str = ""


@dataclass(frozen=True)
class PropertyResult:
    """Outcome of :func:`check_properties` for one scheme (one row of the table)."""

    scheme: str
    translation_invariant: bool
    symmetric: bool | None  # None: not applicable (causal)
    monotone: bool
    max_shift_error: float  # largest |f(m+s, n+s) - f(m, n)|
    max_asymmetry: float | None  # largest |f(m, n) - f(n, m)|
    worst_increase: float  # largest rise of f along growing distance (<= atol when monotone)
    note: str = ""


def _grid(n_positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    pos = torch.arange(n_positions)
    return pos[:, None], pos[None, :]  # (N, 1), (1, N)


def check_properties(
    scheme: PositionScheme,
    *,
    n_positions: int = 48,
    shifts: Sequence[int] = (1, 7, 100),
    atol: float = 1e-4,
) -> PropertyResult:
    """Run the three checks on ``scheme`` over positions ``0 .. n_positions - 1``.

    Args:
        scheme: the scheme to test.
        n_positions: grid size N (the matrix f(m, n) is N x N).
        shifts: the translations s tried.
        atol: absolute tolerance (schemes are compared in float32).
    """
    if not isinstance(scheme, PositionScheme):
        raise TypeError(
            f"scheme must be a PositionScheme, got {type(scheme).__name__}; see book_schemes()"
        )
    if isinstance(n_positions, bool) or not isinstance(n_positions, int) or n_positions < 3:
        raise ValueError(f"n_positions must be >= 3, got {n_positions}")
    m, n = _grid(n_positions)
    base = scheme.score(m, n).double()  # (N, N)
    if base.shape != (n_positions, n_positions):
        raise ValueError(
            f"scheme {scheme.name!r}: score(m, n) must broadcast to (N, N) = "
            f"({n_positions}, {n_positions}), got {tuple(base.shape)}"
        )
    valid = (n <= m) if scheme.causal else torch.ones_like(base, dtype=torch.bool)
    shift_err = max(
        float(((scheme.score(m + s, n + s).double() - base).abs() * valid).max())
        for s in shifts
    )
    if scheme.causal:
        symmetric, asym = None, None
    else:
        asym = float((base - base.T).abs().max())
        symmetric = asym <= atol
    rises = []
    for i in range(n_positions):
        back = base[i, : i + 1].flip(0)  # f(i, i - d), d = 0 .. i
        if back.numel() > 1:
            rises.append(float((back[1:] - back[:-1]).max()))
        if not scheme.causal:
            ahead = base[i, i:]  # f(i, i + d)
            if ahead.numel() > 1:
                rises.append(float((ahead[1:] - ahead[:-1]).max()))
    worst = max(rises)
    return PropertyResult(
        scheme=scheme.name,
        translation_invariant=shift_err <= atol,
        symmetric=symmetric,
        monotone=worst <= atol,
        max_shift_error=shift_err,
        max_asymmetry=asym,
        worst_increase=worst,
        note=scheme.note,
    )


def property_table(schemes: Sequence[PositionScheme], **kwargs):
    """Check every scheme; returns a pandas DataFrame, one row per scheme."""
    import pandas as pd

    if not isinstance(schemes, (list, tuple)) or not schemes:
        raise (TypeError if not isinstance(schemes, (list, tuple)) else ValueError)(
            f"schemes must be a non-empty list of PositionScheme, got {schemes!r}; "
            "e.g. property_table(book_schemes())"
        )
    rows = [asdict(check_properties(s, **kwargs)) for s in schemes]
    return pd.DataFrame(rows).set_index("scheme")


def book_schemes(*, d: int = 64, n_heads: int = 8, seed: int = 0) -> list[PositionScheme]:
    """One :class:`PositionScheme` per encoding in the book, built from llmviz's functions.

    Content is held fixed (one random query/key vector, seeded), so only positions vary.
    """
    check_positive_int(d, "d")
    if d % 2:
        raise ValueError(f"d must be even (RoPE and sinusoidal pair the features), got {d}")
    check_positive_int(n_heads, "n_heads")
    check_positive_int(seed, "seed", allow_zero=True)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(d, generator=g)
    k = torch.randn(d, generator=g)
    table = torch.randn(4096, d, generator=g) * 0.02  # an (untrained) learned table
    with torch.no_grad():
        t5_module = T5RelativeBias(n_heads, bidirectional=True)
        torch.nn.init.normal_(t5_module.relative_attention_bias.weight, generator=g)
    shaw_k = torch.randn(2 * 8 + 1, d, generator=g)
    xl_v = torch.randn(d, generator=g)
    slope = float(alibi_slopes(n_heads)[0])
    # projections for the "through W" rows (drawn last, so the rows above keep their values)
    w_q, w_k, w_r = (torch.randn(d, d, generator=g) / d**0.5 for _ in range(3))

    def sinusoidal(m, n):
        m, n = torch.broadcast_tensors(m, n)
        return (sinusoidal_features(m, d) * sinusoidal_features(n, d)).sum(-1)

    def learned(m, n):
        m, n = torch.broadcast_tensors(m, n)
        return (table[m] * table[n]).sum(-1)

    def rope(m, n):
        m, n = torch.broadcast_tensors(m, n)
        qm = apply_rope(q.expand(m.numel(), d).contiguous(), m.reshape(-1))
        kn = apply_rope(k.expand(n.numel(), d).contiguous(), n.reshape(-1))
        return (qm * kn).sum(-1).reshape(m.shape)

    def shaw(m, n):
        m, n = torch.broadcast_tensors(m, n)
        rel = (n - m).clamp(-8, 8) + 8
        return shaw_k[rel] @ q

    def sinusoidal_projected(m, n):
        # what attention forms from absolute encodings: (W_q PE_m) . (W_k PE_n) / sqrt(d)
        m, n = torch.broadcast_tensors(m, n)
        qm = sinusoidal_features(m, d) @ w_q.T
        kn = sinusoidal_features(n, d) @ w_k.T
        return (qm * kn).sum(-1) / d**0.5

    def xl(m, n):
        m, n = torch.broadcast_tensors(m, n)
        dist = m - n  # Transformer-XL indexes R by i - j
        return sinusoidal_features(dist, d) @ xl_v

    def xl_projected(m, n):
        m, n = torch.broadcast_tensors(m, n)
        return (sinusoidal_features(m - n, d) @ w_r.T) @ xl_v  # v . (W_kR R_(m-n))

    def t5(m, n):
        m, n = torch.broadcast_tensors(m, n)
        with torch.no_grad():
            b = t5_relative_bucket(n - m, bidirectional=True)
            return t5_module.relative_attention_bias.weight[b, 0]

    def alibi_causal(m, n):
        m, n = torch.broadcast_tensors(m, n)
        return -slope * (m - n).float()

    def alibi_symmetric(m, n):
        m, n = torch.broadcast_tensors(m, n)
        return -slope * (m - n).abs().float()

    def nope(m, n):
        m, n = torch.broadcast_tensors(m, n)
        return torch.zeros(m.shape)

    return [
        PositionScheme("NoPE", nope, note="no position at all: trivially passes"),
        PositionScheme("learned absolute", learned, note="PE_m . PE_n, random table"),
        PositionScheme("sinusoidal", sinusoidal, note="PE_m . PE_n (W = I)"),
        PositionScheme("sinusoidal through W_q, W_k", sinusoidal_projected,
                       note="(W_q PE_m) . (W_k PE_n), random W_q, W_k"),
        PositionScheme("Shaw (K=8)", shaw, note="q . a_clip(n-m), random a"),
        PositionScheme("Transformer-XL (d)", xl, note="v . W R_(m-n), W = I"),
        PositionScheme("Transformer-XL (d) through W_k,R", xl_projected,
                       note="v . (W_kR R_(m-n)), random W_kR"),
        PositionScheme("T5 bias (head 0)", t5, note="random bucket values"),
        PositionScheme("RoPE", rope, note="q_m . k_n, fixed random q, k"),
        PositionScheme("ALiBi causal", alibi_causal, causal=True, note="-m (i - j), keys j <= i"),
        PositionScheme("ALiBi symmetric", alibi_symmetric, note="-m |i - j|"),
    ]
