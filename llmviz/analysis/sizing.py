"""Sizing a model to a parameter budget: :func:`match_width` for depth-vs-width comparisons.

It searches widths (and optionally the feed-forward width) whose count, from the closed forms of
:mod:`llmviz.analysis.parameters`, is closest to a target.
"""

from __future__ import annotations

import math
from typing import Any

from .._checks import check_positive, check_positive_int
from ..model.config import ModelConfig
from .parameters import count_parameters, layer_params

__all__ = ["match_width"]

_COUNTS = ("blocks", "non_embedding", "total")


def _counted(config: ModelConfig, count: str) -> int:
    """The parameters :func:`match_width` matches: blocks only, non-embedding, or all."""
    if count == "blocks":
        return sum(layer_params(config)["total"] for _ in range(config.n_layers))
    return count_parameters(config)[count]


def match_width(
    config: ModelConfig,
    n_layers: int,
    target: int,
    *,
    step: int | None = None,
    count: str = "blocks",
    min_head_dim: int | None = None,
    fit_ffn: bool = False,
) -> ModelConfig:
    """``config`` reshaped to ``n_layers`` blocks with the width whose parameter count is
    closest to ``target``, for depth-vs-width comparisons at matched size.

    Args:
        config: the model family (norm, position, feed-forward kind, vocabulary, ...).
        n_layers: the depth L of the result.
        target: the parameter count to match.
        step: widths are searched in multiples of this. Default: ``2 * n_heads`` (every head
            even-sized, as RoPE needs), or ``head_dim * n_heads / n_kv_heads`` with ``head_dim``.
        count: what is matched: ``"blocks"`` (all blocks, without embeddings, head and final
            norm), ``"non_embedding"`` (Kaplan et al.'s N: everything but the token and position
            tables, so an untied output head counts) or ``"total"`` (every parameter).
        min_head_dim: keep every head at least this wide: each width gets as many heads as
            fit with an even head size of at least ``min_head_dim`` that divides the width
            (whole groups of ``config``'s query-per-kv grouping). Without it the head count
            stays as in ``config`` and the heads narrow with the width.
        fit_ffn: after choosing the width, set the feed-forward width ``d_ff`` to the integer
            that brings the count closest to ``target`` (widths on a coarse grid otherwise
            miss it by up to half a step); the feed-forward ratio then departs a little from
            the family's.

    Raises:
        TypeError: ``config`` not a ModelConfig.
        ValueError: a non-positive ``n_layers``, ``target``, ``step`` or ``min_head_dim``, or
            an unknown ``count``.
    """
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
    check_positive_int(n_layers, "n_layers")
    check_positive(target, "target")
    if count not in _COUNTS:
        raise ValueError(f"count={count!r} is not supported; choose one of {_COUNTS}")
    group = config.n_heads // config.n_kv_heads
    if min_head_dim is not None:
        check_positive_int(min_head_dim, "min_head_dim")
    step = check_positive_int(step, "step") if step is not None else (
        2 * config.n_heads if min_head_dim is None else 2)

    def heads_for(width: int) -> int | None:
        """Most heads (a multiple of the grouping) with an even size >= min_head_dim."""
        assert min_head_dim is not None
        for heads in range(width // min_head_dim, 0, -1):
            if heads % group == 0 and width % heads == 0 and (width // heads) % 2 == 0:
                return heads
        return None

    def shaped(width: int, d_ff: int | None = None) -> ModelConfig | None:
        changes: dict[str, Any] = {"n_layers": n_layers, "d_model": width}
        if min_head_dim is not None:
            heads = heads_for(width)
            if heads is None:
                return None
            changes.update(n_heads=heads, n_kv_heads=heads // group, head_dim=width // heads)
        if d_ff is not None:
            changes["d_ff"] = d_ff
        return config.replace(**changes)

    best, best_err = None, None
    width = step
    while True:
        cand = shaped(width)
        if cand is None:  # no head layout fits this width
            width += step
            continue
        n = _counted(cand, count)
        err = abs(n - target)
        if best_err is not None and err > best_err and n > target:
            break
        if best_err is None or err < best_err:
            best, best_err = cand, err
        width += step
    assert best is not None  # the loop stops only after a candidate was seen
    if not fit_ffn:
        return best
    # the count is affine in d_ff: solve for it, then take the better neighbour
    one, two = shaped(best.d_model, 1), shaped(best.d_model, 2)
    assert one is not None and two is not None
    slope = _counted(two, count) - _counted(one, count)
    ideal = 1 + (target - _counted(one, count)) / slope
    fits = [shaped(best.d_model, f) for f in sorted({max(1, math.floor(ideal)), max(1, math.ceil(ideal))})]
    return min((c for c in fits if c is not None), key=lambda c: abs(_counted(c, count) - target))
