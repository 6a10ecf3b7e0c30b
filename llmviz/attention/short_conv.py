"""A gated short causal convolution as a token mixer (LFM2's ``ShortConv``).

In place of attention, each position mixes only the last ``L`` positions (``L = kernel_size``,
LFM2: 3), one channel at a time, with input and output gates:

    [b, c, x] = in_proj(h)                 three (B, T, C) streams
    u = b * x                              input gate
    v_t = sum_{j<L} w_j * u_{t-j}          depthwise causal convolution (zeros before the start)
    y = out_proj(c * v)                    output gate

Chapter 19's Gated DeltaNet runs a short convolution of this kind in front of its recurrence; here
the convolution is the whole mixer. Decoding keeps a fixed state: the last ``L - 1`` gated inputs
``u`` per channel, kept in the model's cache (:meth:`llmviz.attention.kv_cache.KVCache.set_linear_state`),
so the cache does not grow with the sequence for these layers.

:class:`ShortConv` takes the keyword arguments a block passes its attention (``mask`` as a
``(B, 1, 1, S)`` key-padding mask: padded positions are zeroed before the convolution, as
transformers does); it has no attention weights (``None`` when they are asked for).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_flags, check_positive_int, check_tensor

__all__ = ["ConvState", "ShortConv", "short_conv_params"]


@dataclass
class ConvState:
    """The decoding state of a :class:`ShortConv`: ``recurrent (B, C, L - 1)``, its last gated inputs."""

    recurrent: torch.Tensor

    def nbytes(self) -> int:
        return self.recurrent.numel() * self.recurrent.element_size()


def short_conv_params(d_model: int, kernel_size: int, bias: bool) -> int:
    """``3C^2 + C L + C^2`` (+ ``3C + C + C`` biases): in_proj, the depthwise kernel, out_proj."""
    C = d_model
    return 3 * C * C + C * kernel_size + C * C + (5 * C if bias else 0)


class ShortConv(nn.Module):
    """LFM2's gated short convolution (module docstring).

    Args:
        d_model: C.
        kernel_size: L, how many positions (this one included) each output reads.
        bias: biases on ``in_proj``, the convolution and ``out_proj`` (LFM2's ``conv_bias``).
    """

    def __init__(self, d_model: int, kernel_size: int = 3, *, bias: bool = False) -> None:
        check_positive_int(d_model, "d_model")
        check_positive_int(kernel_size, "kernel_size")
        check_flags(bias=bias)
        super().__init__()
        self.d_model, self.kernel_size = d_model, kernel_size
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.conv = nn.Conv1d(d_model, d_model, kernel_size, groups=d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None,
                score_bias: torch.Tensor | None = None, positions: torch.Tensor | None = None,
                cache=None, layer_idx: int = 0, return_weights: bool = False):
        """``h (B, T, C) -> (B, T, C)`` (or ``(out, None)`` with ``return_weights``)."""
        check_tensor(h, "h", ndim=3, floating=True)
        check_flags(return_weights=return_weights)
        B, T, C = h.shape
        if C != self.d_model:
            raise ValueError(f"h has width {C} but the convolution was built for d_model={self.d_model}")
        if score_bias is not None:
            raise ValueError(f"layer {layer_idx} is a short convolution: it has no scores to add score_bias to")
        if mask is not None:
            if mask.dim() != 4 or mask.shape[1] != 1 or mask.shape[2] != 1:
                raise ValueError(f"layer {layer_idx} is a short convolution: it takes a key-padding "
                                 f"mask (B, 1, 1, S), got {tuple(mask.shape)}")
            h = h * mask[:, 0, 0, -T:, None].to(h.dtype)
        b, c, x = self.in_proj(h).transpose(1, 2).chunk(3, dim=1)  # (B, C, T) each
        u = b * x
        L = self.kernel_size
        state = None if cache is None else cache.linear_state(layer_idx)
        before = state.recurrent if state is not None else u.new_zeros(B, C, L - 1)
        full = torch.cat([before, u], dim=2)  # (B, C, L - 1 + T)
        v = F.conv1d(full, self.conv.weight, self.conv.bias, groups=C)  # (B, C, T)
        if cache is not None:
            cache.set_linear_state(layer_idx, ConvState(full[:, :, full.shape[2] - (L - 1):]), T)
        y = self.out_proj((c * v).transpose(1, 2))
        return (y, None) if return_weights else y

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, kernel_size={self.kernel_size}"
