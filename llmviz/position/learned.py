"""Learned absolute position embeddings (GPT-2's ``wpe``, BERT, GPT-Neo).

Shapes: T positions, C model dim. A learned table has one trained row per position and nothing
beyond it: position ``max_positions`` has no embedding at all, so a model using one cannot read
longer inputs (unlike sinusoidal encodings, which are defined everywhere, however poorly they
generalise there).
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_positive, check_positive_int, check_tensor

__all__ = ["LearnedPositionalEmbedding"]


def _can_read(t: torch.Tensor) -> bool:
    """Whether checking ``t``'s values is free: a CPU tensor outside ``torch.compile``.

    On an accelerator the read would stall the stream on every forward, and under
    ``torch.compile`` it would break the graph; there an out-of-range row fails inside the
    embedding lookup instead (a device-side assert on CUDA).
    """
    return t.device.type == "cpu" and not torch.compiler.is_compiling()


class LearnedPositionalEmbedding(nn.Module):
    """A trainable (max_positions, C) table looked up by position.

    Args:
        max_positions: number of rows, i.e. the longest input the model can read.
        d_model: C.
        init_std: standard deviation of the normal initialisation (0.02, as in GPT-2).

    ``forward(positions)``: integer (...,) positions -> (..., C). Raises ``ValueError`` naming
    the limit when a position is negative or ``>= max_positions`` (checked on CPU tensors
    outside ``torch.compile``; elsewhere reading the values back would stall the device).
    """

    def __init__(self, max_positions: int, d_model: int, *, init_std: float = 0.02) -> None:
        super().__init__()
        check_positive_int(max_positions, "max_positions")
        check_positive_int(d_model, "d_model")
        check_positive(init_std, "init_std", allow_zero=True)
        self.max_positions, self.d_model = max_positions, d_model
        self.weight = nn.Parameter(torch.randn(max_positions, d_model) * init_std)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        check_tensor(positions, "positions")
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(
                f"positions must be integers (a learned table has rows only at whole "
                f"positions), got dtype {positions.dtype}"
            )
        if positions.numel() and _can_read(positions):
            hi, lo = int(positions.max()), int(positions.min())
            if hi >= self.max_positions:
                raise ValueError(
                    f"position {hi} is past the learned table: max_positions is "
                    f"{self.max_positions} (rows 0..{self.max_positions - 1}); a learned "
                    "absolute embedding cannot read longer inputs: truncate the input, or use "
                    "sinusoidal/RoPE/ALiBi positions"
                )
            if lo < 0:
                raise ValueError(f"positions must be >= 0, got {lo}; positions index rows of the table")
        if positions.dtype not in (torch.long, torch.int32):
            positions = positions.long()  # uint8/int16 positions index the table as well
        return nn.functional.embedding(positions, self.weight)  # (..., C)

    def extra_repr(self) -> str:
        return f"max_positions={self.max_positions}, d_model={self.d_model}"
