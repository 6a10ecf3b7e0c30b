"""Latent attention whose queries grow with position (Mistral Small 4): :class:`ScaledQueryLatentAttention`.

Mistral Small 4 runs DeepSeek-V3's multi-head latent attention
(:class:`~llmviz.attention.latent.MultiHeadLatentAttention`) and multiplies every query, its
position-free and its rotated features alike, by a factor of the query's position ``p`` (the
``position_ids`` transformers passes, 0 for the first token):

    s(p) = 1 + beta * log(1 + floor(p / L))

with ``beta = llama_4_scaling_beta`` and ``L = original_max_position_embeddings`` from the
config's ``rope_parameters`` (transformers' ``get_llama_4_attn_scale``). The factor is 1 on the
first L positions and rises by steps of ``beta * log(...)`` every L positions after, so attention
sharpens slowly far from the start. Keys, values and the cache are untouched.

It is not Llama 4's NoPE query temperature (:func:`llmviz.attention.llama4_qk.query_temperature`,
``1 + a * log(1 + floor((p + 1) / F))``): that one counts from ``p + 1``, so its first step comes
one position earlier, and it scales unrotated queries of layers without RoPE.

Because s(p) is one number per query row, scaling the queries before or after RoPE (a rotation,
linear in q) gives the same scores, and the absorbed form (which carries ``q_nope`` into latent
space linearly) stays exact.
"""

from __future__ import annotations

import torch

from .._checks import check_hidden, check_positive_int, check_real, check_tensor
from .latent import LatentCache, MultiHeadLatentAttention

__all__ = ["ScaledQueryLatentAttention", "llama4_query_scale"]


def llama4_query_scale(positions: torch.Tensor, beta: float, original_max_position_embeddings: int) -> torch.Tensor:
    """``1 + beta * log(1 + floor(positions / original_max_position_embeddings))`` in float32,
    shaped as ``positions``."""
    check_tensor(positions, "positions")
    check_real(beta, "beta")
    check_positive_int(original_max_position_embeddings, "original_max_position_embeddings")
    return 1.0 + beta * torch.log1p(torch.floor(positions.float() / original_max_position_embeddings))


class ScaledQueryLatentAttention(MultiHeadLatentAttention):
    """:class:`~llmviz.attention.latent.MultiHeadLatentAttention` with every query multiplied by
    :func:`llama4_query_scale` of its position. Takes the latent layer's arguments plus ``beta``
    and ``original_max_position_embeddings``; :meth:`from_latent` wraps a built layer (sharing
    its parameters), which is how the Hugging Face bridge installs it."""

    def __init__(self, d_model: int, n_heads: int, *, beta: float, original_max_position_embeddings: int,
                 **latent_kwargs) -> None:
        super().__init__(d_model, n_heads, **latent_kwargs)
        self._set_scale(beta, original_max_position_embeddings)

    def _set_scale(self, beta: float, original: int) -> None:
        check_real(beta, "beta")
        check_positive_int(original, "original_max_position_embeddings")
        self.beta, self.original_max_position_embeddings = float(beta), int(original)

    @classmethod
    def from_latent(cls, layer: MultiHeadLatentAttention, beta: float,
                    original_max_position_embeddings: int) -> "ScaledQueryLatentAttention":
        """A scaled-query layer holding ``layer``'s own modules and settings (``layer`` itself
        should not be used afterwards: the two share their parameters)."""
        if not isinstance(layer, MultiHeadLatentAttention) or isinstance(layer, cls):
            raise TypeError(f"layer must be an unscaled MultiHeadLatentAttention, got {type(layer).__name__}")
        new = cls.__new__(cls)
        new.__dict__.update(layer.__dict__)
        new._set_scale(beta, original_max_position_embeddings)
        return new

    def forward(
        self, x: torch.Tensor, *, positions: torch.Tensor | None = None,
        cache: LatentCache | None = None, layer_idx: int = 0, mask: torch.Tensor | None = None,
        absorbed: bool = False, return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """As :meth:`MultiHeadLatentAttention.forward`, every query times its position's scale."""
        if cache is not None and not isinstance(cache, LatentCache):
            raise TypeError(f"cache must be a LatentCache, got {type(cache).__name__}; inside a model "
                            "wrap its KVCache as LatentSlots(cache)")
        check_hidden(x, self.d_model, self.kv_b_proj.weight, "ScaledQueryLatentAttention", ndim=3)
        B, T, _ = x.shape
        offset = cache.length(layer_idx) if cache is not None else 0
        if positions is None:
            positions = torch.arange(offset, offset + T, device=x.device)  # (T,)
        s = llama4_query_scale(positions, self.beta, self.original_max_position_embeddings)
        s = s[None, None, :, None] if s.dim() == 1 else s[:, None, :, None]  # (1|B, 1, T, 1)
        q_nope, q_rope = self.queries(x)  # (B, H, T, dn), (B, H, T, dr)
        c, k_rope = self.latents(x)
        q_rope, k_rope = self.rope(q_rope, k_rope, positions, seq_len=offset + T)
        q_nope, q_rope = q_nope * s.to(q_nope.dtype), q_rope * s.to(q_rope.dtype)  # as transformers casts
        k_rope = k_rope[:, 0]  # (B, T, dr): one rope key per token, shared by the heads
        if cache is not None:
            c, k_rope = cache.update(layer_idx, c, k_rope)  # (B, S, r), (B, S, dr)
        attend = self._attend_absorbed if absorbed else self._attend_naive
        out, weights = attend(q_nope, q_rope, c, k_rope, mask, return_weights)  # (B, H, T, dv)
        out = self.o_proj(out.transpose(1, 2).reshape(B, T, self.n_heads * self.v_head_dim))
        return (out, weights) if return_weights else out

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, beta={self.beta:g}, "
                f"original_max_position_embeddings={self.original_max_position_embeddings}")
