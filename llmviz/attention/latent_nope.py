"""Latent attention without position (Kimi Linear's MLA layers): :class:`NoRotation`.

DeepSeek's multi-head latent attention (:class:`~llmviz.attention.latent.MultiHeadLatentAttention`)
gives each head ``dr`` extra query features and every token one shared ``dr``-wide key that
carry RoPE. Kimi Linear keeps that split (its checkpoints store the same ``qk_rope_head_dim``
features, and they still count in the ``1 / sqrt(dn + dr)`` scale) but rotates nothing: its
latent layers see order only through the causal mask and through the Kimi delta attention
layers around them, which read the sequence in order. The score of head h is then
``q_nope_h . k_nope_h + q_rope_h . k_rope``, both terms position-free.

:class:`NoRotation` sits in the latent layer's rotary slot (``layer.rope``) and hands q and k
back unchanged; the rest of the layer, its cache of latents and unrotated shared keys, and its
absorbed form are the latent attention's own.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_positive_int, check_tensor

__all__ = ["NoRotation"]


class NoRotation(nn.Module):
    """A rotary-slot module that rotates nothing: ``(q, k, positions) -> (q, k)``.

    Called as a :class:`~llmviz.position.rotary.RotaryEmbedding` is (``positions`` and
    ``seq_len`` are accepted and checked, and change nothing).
    """

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None = None, *,
                seq_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        check_tensor(q, "q", min_ndim=2, floating=True)
        check_tensor(k, "k", min_ndim=2, floating=True)
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} must hold the same tokens "
                             "(their second-to-last axis)")
        if positions is not None:
            check_tensor(positions, "positions", ndim=(1, 2))
            if positions.is_floating_point() or positions.shape[-1] != q.shape[-2]:
                raise ValueError(f"positions must be integer (T,) or (B, T) with T = {q.shape[-2]}, "
                                 f"got {positions.dtype} {tuple(positions.shape)}")
        if seq_len is not None:
            check_positive_int(seq_len, "seq_len")
        return q, k
