"""Input checks shared by the mixture-of-experts modules."""

from __future__ import annotations

import torch

from .._checks import check_tensor

__all__ = ["check_indices"]


def check_indices(indices: torch.Tensor, name: str = "indices") -> torch.Tensor:
    """``(N, k)`` integer expert ids (not float, not bool); the value range is the caller's."""
    check_tensor(indices, name, ndim=2)
    if indices.is_floating_point() or indices.is_complex() or indices.dtype == torch.bool:
        raise TypeError(f"{name} must be integer expert ids (torch.long), got dtype {indices.dtype}; "
                        f"use {name}.long() or Routing.indices")
    return indices
