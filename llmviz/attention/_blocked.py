"""Blocked rows and blocked keys, decided on the device (private to llmviz).

Shared by :mod:`llmviz.attention.functional` and :mod:`llmviz.position.relative` so that every
attention path gives one answer: a query with no allowed key gets zero weights and a zero
output, and a key no query may attend to never contributes, whatever it holds. Nothing here
reads a value back to the host: the results are applied with ``masked_fill``.

Shape letters: B batch, H heads, T queries, S keys.
"""

from __future__ import annotations

import torch

__all__ = ["dead_keys", "blocked_rows"]


def dead_keys(mask: torch.Tensor | None, bias: torch.Tensor | None) -> torch.Tensor | None:
    """``(B or 1, 1, S, 1)`` bool: keys that no query of any head may attend to (blocked by
    ``mask`` or by ``-inf`` in ``bias`` everywhere), e.g. padding; None without mask and bias.

    Callers replace those keys and values by zeros before use, so that whatever they hold (even
    ``inf``/NaN) cannot reach an output through ``0 * inf``.
    """
    allowed = mask
    if bias is not None:
        finite = bias != float("-inf")
        allowed = finite if allowed is None else allowed & finite
    if allowed is None:
        return None
    allowed = allowed[(None,) * (4 - allowed.ndim)]  # (b, h, t, S)
    alive = allowed.any(dim=2).any(dim=1)  # (b, S)
    return ~alive[:, None, :, None]  # (b, 1, S, 1)


def blocked_rows(scores: torch.Tensor) -> torch.Tensor:
    """``(..., T, 1)`` bool: rows of masked scores that are ``-inf`` throughout (no allowed key)."""
    return scores.amax(dim=-1, keepdim=True) == float("-inf")
