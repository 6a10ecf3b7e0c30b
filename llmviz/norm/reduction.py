"""Which cells of a ``(B, T, C)`` activation share one mean and variance, for each norm.

The norms of this package differ only in the axes their statistics are taken over (see the
table in :mod:`llmviz.norm`). :func:`reduction_mask` spells that out cell by cell: it is the data
behind the cube figures of the normalisation chapter, and the tests check it against the
norms themselves (changing one cell changes exactly the outputs of the cells in its mask).

Shape letters: B batch, T tokens, C channels (features).
"""

from __future__ import annotations

import torch

from .._checks import check_choice, check_positive_int

__all__ = ["REDUCTION_KINDS", "reduction_mask"]

#: Norms by the cells they reduce over: LayerNorm and RMSNorm ("layer", "rms") share one
#: pattern (one token); BatchNorm one channel over the batch; InstanceNorm one channel of one
#: sequence; GroupNorm a group of channels of one sequence.
REDUCTION_KINDS = ("batch", "layer", "rms", "instance", "group")


def reduction_mask(
    kind: str,
    shape: tuple[int, int, int] = (3, 4, 6),
    *,
    n_groups: int = 2,
    cell: tuple[int, int, int] = (0, 0, 0),
) -> torch.Tensor:
    """Which cells of a ``(B, T, C)`` tensor share their statistics with ``cell``.

    Args:
        kind: one of :data:`REDUCTION_KINDS`.
        shape: ``(B, T, C)``.
        n_groups: groups G for ``"group"`` (C must be divisible by G).
        cell: the reference cell ``(b, t, c)``.

    Returns:
        ``(B, T, C)`` bool tensor, True where a cell enters the same mean and variance.
    """
    check_choice(kind, "kind", REDUCTION_KINDS)
    if not isinstance(shape, (tuple, list)) or not isinstance(cell, (tuple, list)):
        raise TypeError(f"shape and cell must be (B, T, C) triples, got {shape!r} and {cell!r}")
    if len(shape) != 3 or len(cell) != 3:
        raise ValueError(f"shape and cell must be (B, T, C) triples, got {shape} and {cell}")
    B, T, C = (check_positive_int(n, name) for n, name in zip(shape, ("B", "T", "C")))
    b, t, c = cell
    if not (0 <= b < B and 0 <= t < T and 0 <= c < C):
        raise ValueError(f"cell {tuple(cell)} is outside the shape (B, T, C) = {tuple(shape)}")
    check_positive_int(n_groups, "n_groups")
    ib, it, ic = torch.meshgrid(torch.arange(B), torch.arange(T), torch.arange(C), indexing="ij")
    if kind in ("layer", "rms"):
        return (ib == b) & (it == t)
    if kind == "batch":
        return ic == c
    if kind == "instance":
        return (ib == b) & (ic == c)
    check_positive_int(n_groups, "n_groups")
    if C % n_groups:
        raise ValueError(
            f"C ({C}) must be divisible by n_groups ({n_groups}); pick n_groups from the "
            f"divisors of {C}"
        )
    size = C // n_groups  # channels per group
    return (ib == b) & (ic // size == c // size)
