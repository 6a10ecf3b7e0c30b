"""Helpers shared by the RoPE modules (:mod:`.rope` and :mod:`.rope_scaling`).

R is the rotary dim (R/2 rotation pairs).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["base_inv_freq"]


def base_inv_freq(base: float, dim: int, device: Any) -> torch.Tensor:
    """Unscaled RoPE frequencies ``theta_i = base ** (-2i / dim)``, ``i = 0 .. dim/2 - 1``:
    ``(dim/2,)`` float32, computed as the Hugging Face reference does (int64 arange, then
    float32) so the frequencies match it bit for bit."""
    exponent = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
    return 1.0 / (base**exponent)
