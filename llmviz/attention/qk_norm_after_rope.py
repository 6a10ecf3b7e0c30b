"""QK-norm after RoPE (HunYuan): the norms of q and k act on the *rotated* heads.

llmviz's QK-norm (:class:`~llmviz.attention.module.MultiHeadAttention`'s ``q_norm``, ``k_norm``)
normalises q and k before rotating them, as Qwen 3, OLMo 2 and Gemma 3 do. HunYuan rotates
first and normalises after. An RMS is unchanged by a rotation, so the two orders differ only
through the norm's weight ``w``: ``rope(w * q / rms(q))`` against ``w * rope(q) / rms(q)``, equal
for every q only when each rotated pair of features shares its weight. A trained checkpoint's
weights do not, so the order is its own kind (``attn_kind="qk_norm_after_rope"``).

:func:`norm_after_rope` turns a built attention layer with a QK-norm into this kind: its rotary
module becomes a :class:`RotaryThenNorm` that rotates, then applies the layer's own ``q_norm``
and ``k_norm`` (the parameters keep their names and count). Keys are cached normalised, as
Hugging Face caches them.

Shape letters: B batch, H query heads, G kv heads, T tokens, D head dim.
"""

from __future__ import annotations

import torch
from torch import nn

from .module import MultiHeadAttention

__all__ = ["RotaryThenNorm", "norm_after_rope"]


class RotaryThenNorm(nn.Module):
    """Rotate q ``(B, H, T, D)`` and k ``(B, G, T, D)`` with ``rope`` (None: no rotation, a NoPE
    or ALiBi layer), then apply ``q_norm`` and ``k_norm`` per head (``scope="head"``, width D) or
    over all heads of a token (``"all"``, widths H*D and G*D).

    The norms belong to the attention layer; this module only holds references to them, so
    they are not registered twice (the state dict names stay ``self_attn.q_norm.weight``).
    """

    def __init__(self, rope: nn.Module | None, q_norm: nn.Module, k_norm: nn.Module,
                 scope: str = "head") -> None:
        super().__init__()
        if scope not in ("head", "all"):
            raise ValueError(f"scope must be 'head' or 'all', got {scope!r}")
        if not (isinstance(q_norm, nn.Module) and isinstance(k_norm, nn.Module)):
            raise TypeError("q_norm and k_norm must be built norm modules")
        self.inner = rope
        self._norms = (q_norm, k_norm)  # a tuple: references, not submodules
        self.scope = scope

    @property
    def cos_sin(self):
        """The rotary module's ``cos_sin`` (so the layer passes ``seq_len`` on, as to a
        :class:`~llmviz.position.rotary.RotaryEmbedding`)."""
        if self.inner is None or not hasattr(self.inner, "cos_sin"):
            raise AttributeError("cos_sin")
        return self.inner.cos_sin

    def _norm(self, norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
        if self.scope == "head":
            return norm(x)
        B, N, T, D = x.shape
        flat = x.transpose(1, 2).reshape(B, T, N * D)
        return norm(flat).view(B, T, N, D).transpose(1, 2)

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None = None, *,
                seq_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if self.inner is not None:
            extra = {} if seq_len is None else {"seq_len": seq_len}
            q, k = self.inner(q, k, positions, **extra)
        q_norm, k_norm = self._norms
        return self._norm(q_norm, q), self._norm(k_norm, k)

    def extra_repr(self) -> str:
        return f"scope={self.scope!r}"


def norm_after_rope(attn: MultiHeadAttention) -> MultiHeadAttention:
    """The same layer with its QK-norm moved after RoPE (in place; returned). A layer without a
    QK-norm is returned unchanged (there is nothing to move)."""
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"norm_after_rope takes a MultiHeadAttention, got {type(attn).__name__}")
    if isinstance(attn.rope, RotaryThenNorm):
        raise ValueError("this layer's QK-norm already acts after RoPE")
    if attn.q_norm is None:
        return attn
    attn.rope = RotaryThenNorm(attn.rope, attn.q_norm, attn.k_norm, attn.qk_norm_scope)
    attn.qk_norm_scope = f"{attn.qk_norm_scope} after rope"  # the layer's own branches skip it
    return attn
