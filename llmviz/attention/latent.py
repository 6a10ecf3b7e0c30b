"""Multi-head latent attention (MLA, DeepSeek-V2/V3): cache one small latent per token instead of
every head's keys and values.

Shape letters: B batch, T new tokens, S cached + new tokens, C model width, H heads,
r = ``kv_lora_rank`` (latent width), r_q = ``q_lora_rank``, dn = ``qk_nope_head_dim``,
dr = ``qk_rope_head_dim``, dv = ``v_head_dim``.

**Keys and values from a latent.** Each token is compressed to ``c = RMSNorm(W_dkv x)`` of
width r (512 in DeepSeek-V3, against H * (dn + dv) = 32768 numbers of keys and values per
token). Every head's position-free key part and its value are *linear* in that latent:
``k_nope_h = W_uk_h c`` and ``v_h = W_uv_h c``, with ``W_uk``, ``W_uv`` the two halves of
``kv_b_proj``. Queries may be compressed the same way (``q_lora_rank``: ``q_a_proj``,
``q_a_layernorm``, ``q_b_proj``); that saves parameters and activations, not cache.

**Decoupled RoPE.** RoPE cannot act on the latent (a rotation that depends on position does not
commute with ``W_uk``), so each head's query and key get dr extra features that carry position:
the query's come per head from the query path, the key's are ONE rope key per token
(``k_rope``, from ``kv_a_proj_with_mqa`` too), shared by every head as in multi-query
attention. The score of head h is ``q_nope_h . k_nope_h + q_rope_h . k_rope``, scaled by
``1 / sqrt(dn + dr)``. DeepSeek rotates the rope features in the *interleaved* layout
(``rope_interleave``; see :mod:`llmviz.position.rope`).

**The cache** (:class:`LatentCache`) holds per token the latent c and the rotated rope key: r + dr
numbers (576 in DeepSeek-V3) instead of ``H (dn + dr + dv)`` for the expanded keys and values.
Inside a :class:`~llmviz.model.lm.DecoderLM` the model's :class:`~llmviz.attention.kv_cache.KVCache`
holds them through :class:`LatentSlots`: the layer's key slot holds the latents ``(B, 1, S, r)``
and its value slot the rope keys ``(B, 1, S, dr)``, so the cache's bytes are exactly the latent
cache's, and hybrid stacks keep one cache for every layer.

**Absorption.** Because ``q_nope_h . (W_uk_h c) = (W_uk_h^T q_nope_h) . c``, the query can be
carried into latent space once (``q_lat_h = W_uk_h^T q_nope_h``, width r) and the scores taken
against the cached latents directly; likewise ``sum_s p_s W_uv_h c_s = W_uv_h (sum_s p_s c_s)``,
so attention averages latents and ``W_uv`` is applied once to the result, before ``o_proj``.
The absorbed form is then multi-query attention with head width r + dr over the cache as it is:
nothing is decompressed per step. ``forward(..., absorbed=True)`` runs it; the tests check it
equals the naive form (decompress every cached token, then ordinary attention).

Parameter names are Hugging Face ``DeepseekV3Attention``'s, so its state dict loads as is.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._checks import check_choice, check_hidden, check_positive, check_positive_int, check_tensor
from ..norm import RMSNorm
from ..position.rope import LAYOUTS
from ..position.rope_scaling import RopeScaling
from ..position.rotary import RotaryEmbedding
from ._checks import check_cache_layer
from .functional import scaled_dot_product_attention
from .kv_cache import KVCache

__all__ = ["LatentCache", "LatentSlots", "MultiHeadLatentAttention", "default_scale"]


class LatentCache:
    """The MLA cache: per layer, the latents ``(B, S, r)`` and rotated rope keys ``(B, S, dr)``.

    ``update(layer_idx, latent, rope_key)`` appends the T new tokens and returns everything
    cached for that layer. Layers are created on first use, in order.
    """

    def __init__(self) -> None:
        self.latents: list[torch.Tensor] = []
        self.rope_keys: list[torch.Tensor] = []

    def __len__(self) -> int:
        return len(self.latents)

    def update(
        self, layer_idx: int, latent: torch.Tensor, rope_key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_tensor(latent, "latent", ndim=3)
        check_tensor(rope_key, "rope_key", ndim=3)
        if latent.shape[:2] != rope_key.shape[:2]:
            raise ValueError(f"latent {tuple(latent.shape)} and rope_key {tuple(rope_key.shape)} "
                             "must agree in (B, T)")
        if check_cache_layer(layer_idx, len(self.latents)):
            self.latents.append(latent)
            self.rope_keys.append(rope_key)
        else:
            old = self.latents[layer_idx]
            if old.shape[0] != latent.shape[0] or old.shape[2] != latent.shape[2]:
                raise ValueError(f"layer {layer_idx}: new latent {tuple(latent.shape)} does not match "
                                 f"the cached {tuple(old.shape)} in (B, ., r)")
            if old.dtype != latent.dtype or old.device != latent.device:
                raise TypeError(f"layer {layer_idx}: new latents are {latent.dtype} on {latent.device}"
                                f" but the cache holds {old.dtype} on {old.device}; start a new cache")
            self.latents[layer_idx] = torch.cat([old, latent], dim=1)  # (B, S, r)
            self.rope_keys[layer_idx] = torch.cat([self.rope_keys[layer_idx], rope_key], dim=1)
        return self.latents[layer_idx], self.rope_keys[layer_idx]

    def length(self, layer_idx: int = 0) -> int:
        """Cached tokens of a layer (0 if it has not been filled yet)."""
        return self.latents[layer_idx].shape[1] if layer_idx < len(self.latents) else 0

    def nbytes(self) -> int:
        """Bytes held by every cached latent and rope key."""
        return sum(t.numel() * t.element_size() for t in self.latents + self.rope_keys)

    def reset(self) -> None:
        self.latents.clear()
        self.rope_keys.clear()

    def __repr__(self) -> str:
        return f"LatentCache(layers={len(self)}, length={self.length()}, nbytes={self.nbytes()})"


class LatentSlots(LatentCache):
    """A :class:`LatentCache` view of a model's :class:`~llmviz.attention.kv_cache.KVCache`: a
    layer's latents ``(B, S, r)`` live in its key slot as ``(B, 1, S, r)``, its rope keys in the
    value slot as ``(B, 1, S, dr)`` (one "kv head"). Nothing is stored in the view itself."""

    def __init__(self, cache: KVCache) -> None:
        if not isinstance(cache, KVCache):
            raise TypeError(f"LatentSlots wraps a KVCache, got {type(cache).__name__}")
        self.cache = cache

    def __len__(self) -> int:
        return len(self.cache)

    def update(self, layer_idx: int, latent: torch.Tensor, rope_key: torch.Tensor):
        check_tensor(latent, "latent", ndim=3)
        check_tensor(rope_key, "rope_key", ndim=3)
        c, k = self.cache.update(layer_idx, latent[:, None], rope_key[:, None])  # (B, 1, S, .)
        return c[:, 0], k[:, 0]

    def length(self, layer_idx: int = 0) -> int:
        return self.cache.length(layer_idx)

    def nbytes(self) -> int:
        return self.cache.nbytes()

    def reset(self) -> None:
        self.cache.reset()


def default_scale(qk_head_dim: int, rope_scaling: RopeScaling | None = None) -> float:
    """DeepSeek's score scale: ``1 / sqrt(dn + dr)``, and with a scaled RoPE that sets
    ``mscale_all_dim`` (DeepSeek-V3's YaRN), times ``m ** 2`` with
    ``m = 0.1 * mscale_all_dim * ln(factor) + 1`` (1 when ``factor <= 1``), as Hugging Face's
    ``yarn_apply_mscale``: longer contexts get slightly sharper attention."""
    check_positive_int(qk_head_dim, "qk_head_dim")
    scale = qk_head_dim**-0.5
    m_all = getattr(rope_scaling, "mscale_all_dim", None)
    if rope_scaling is not None and m_all and rope_scaling.factor > 1:
        m = 0.1 * m_all * math.log(rope_scaling.factor) + 1.0
        scale *= m * m
    return scale


class MultiHeadLatentAttention(nn.Module):
    """DeepSeek's multi-head latent attention, naive and absorbed.

    Args:
        d_model: model width C.
        n_heads: H.
        kv_lora_rank: r, width of the cached latent.
        qk_nope_head_dim: dn, per-head query/key features without position.
        qk_rope_head_dim: dr, per-head query features (and the shared key features) with RoPE.
        v_head_dim: dv, per-head value width.
        q_lora_rank: r_q to compress queries too (DeepSeek-V3: 1536), or None for a plain
            ``q_proj`` (DeepSeek-V2-Lite).
        rope_base, rope_layout, rope_scaling: RoPE of the dr features (``"interleaved"`` is
            DeepSeek's layout, ``"half"`` the rotate-half one).
        scale: score multiplier, default :func:`default_scale` (``1 / sqrt(dn + dr)``, times
            DeepSeek's YaRN correction when ``rope_scaling`` sets ``mscale_all_dim``).
        bias: biases on ``q_a_proj``, ``kv_a_proj_with_mqa`` and ``o_proj`` (HF
            ``attention_bias``; ``q_proj``, ``q_b_proj`` and ``kv_b_proj`` never have one).
        norm_eps: epsilon of the two latent RMSNorms (1e-6 in DeepSeek's code).
        causal: causal attention.

    ``forward(x, *, positions, cache, layer_idx, mask, absorbed, return_weights)``: x
    ``(B, T, C)``; positions ``(T,)`` or ``(B, T)`` (default cache length + ``arange(T)``); cache a
    :class:`LatentCache`; mask bool broadcastable to ``(B, H, T, S)``, True = may attend;
    ``absorbed`` picks the form (same result). Returns ``(B, T, C)`` or ``(out, weights)``.
    """

    def __init__(
        self, d_model: int, n_heads: int, *, kv_lora_rank: int, qk_nope_head_dim: int,
        qk_rope_head_dim: int, v_head_dim: int, q_lora_rank: int | None = None,
        rope_base: float = 10000.0, rope_layout: str = "interleaved",
        rope_scaling: RopeScaling | None = None, scale: float | None = None, bias: bool = False,
        norm_eps: float = 1e-6, causal: bool = True,
    ) -> None:
        super().__init__()
        for name, v in (("d_model", d_model), ("n_heads", n_heads), ("kv_lora_rank", kv_lora_rank),
                        ("qk_nope_head_dim", qk_nope_head_dim), ("v_head_dim", v_head_dim)):
            check_positive_int(v, name)
        check_positive_int(qk_rope_head_dim, "qk_rope_head_dim")
        if qk_rope_head_dim % 2:
            raise ValueError(f"qk_rope_head_dim must be even (RoPE rotates feature pairs), got "
                             f"{qk_rope_head_dim}; e.g. {qk_rope_head_dim + 1}")
        if q_lora_rank is not None:
            check_positive_int(q_lora_rank, "q_lora_rank")
        check_choice(rope_layout, "rope_layout", LAYOUTS)
        if scale is not None:
            check_positive(scale, "scale")
        H, r, dn, dr, dv = n_heads, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.d_model, self.n_heads, self.kv_lora_rank, self.q_lora_rank = d_model, H, r, q_lora_rank
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = dn, dr, dv
        self.qk_head_dim = dn + dr
        self.scale = float(scale) if scale is not None else default_scale(dn + dr, rope_scaling)
        self.causal = causal
        if q_lora_rank is None:
            self.q_proj = nn.Linear(d_model, H * (dn + dr), bias=False)
        else:
            self.q_a_proj = nn.Linear(d_model, q_lora_rank, bias=bias)
            self.q_a_layernorm = RMSNorm(q_lora_rank, eps=norm_eps)
            self.q_b_proj = nn.Linear(q_lora_rank, H * (dn + dr), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(d_model, r + dr, bias=bias)  # latent + shared rope key
        self.kv_a_layernorm = RMSNorm(r, eps=norm_eps)
        self.kv_b_proj = nn.Linear(r, H * (dn + dv), bias=False)  # [W_uk_h; W_uv_h] per head
        self.o_proj = nn.Linear(H * dv, d_model, bias=bias)
        self.rope = RotaryEmbedding(dr, base=rope_base, layout=rope_layout, scaling=rope_scaling)

    # -- the pieces -------------------------------------------------------------------------
    def queries(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x (B, T, C)`` -> ``q_nope (B, H, T, dn)``, ``q_rope (B, H, T, dr)`` (not rotated)."""
        B, T, _ = x.shape
        if self.q_lora_rank is None:
            q = self.q_proj(x)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))  # (B, T, H*(dn+dr))
        q = q.view(B, T, self.n_heads, self.qk_head_dim).transpose(1, 2)  # (B, H, T, dn+dr)
        return q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)

    def latents(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x (B, T, C)`` -> the latent ``c (B, T, r)`` (normalised) and ``k_rope (B, 1, T, dr)``
        (not rotated): what one token contributes to the cache."""
        B, T, _ = x.shape
        c, k_rope = self.kv_a_proj_with_mqa(x).split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        return self.kv_a_layernorm(c), k_rope.view(B, 1, T, self.qk_rope_head_dim)

    def up_projections(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``W_uk (H, dn, r)`` and ``W_uv (H, dv, r)``: the two halves of ``kv_b_proj``, per head."""
        w = self.kv_b_proj.weight.view(self.n_heads, self.qk_nope_head_dim + self.v_head_dim,
                                       self.kv_lora_rank)
        return w.split([self.qk_nope_head_dim, self.v_head_dim], dim=1)

    def folded_projections(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The absorption done once on the weights: ``W_q_lat (H*r, in)`` maps the query input
        (the normalised query latent, or x without ``q_lora_rank``) straight to latent-space
        queries, ``W_uk_h^T W_q_nope_h`` per head; ``W_o_lat (C, H*r)`` maps each head's average
        of latents straight to the output, ``W_o_h W_uv_h`` per head. Worth it when r is small
        next to what it replaces; :meth:`forward` applies ``W_uk``/``W_uv`` per call instead."""
        H, r, dn = self.n_heads, self.kv_lora_rank, self.qk_nope_head_dim
        w_uk, w_uv = self.up_projections()  # (H, dn, r), (H, dv, r)
        w_q = (self.q_proj if self.q_lora_rank is None else self.q_b_proj).weight
        w_q_nope = w_q.view(H, self.qk_head_dim, -1)[:, :dn]  # (H, dn, in)
        w_q_lat = torch.einsum("hdr,hdi->hri", w_uk, w_q_nope).reshape(H * r, -1)  # (H*r, in)
        w_o = self.o_proj.weight.view(self.d_model, H, self.v_head_dim)  # (C, H, dv)
        w_o_lat = torch.einsum("chv,hvr->chr", w_o, w_uv).reshape(self.d_model, H * r)  # (C, H*r)
        return w_q_lat, w_o_lat

    def cache_bytes_per_token(self, dtype: torch.dtype | None = None) -> dict[str, int]:
        """Bytes one token costs per layer: the latent cache (r + dr numbers) against the
        expanded keys and values a plain KV cache of this layer would hold (H (dn + dr + dv))."""
        size = torch.empty(0, dtype=dtype or self.kv_b_proj.weight.dtype).element_size()
        return {"latent": (self.kv_lora_rank + self.qk_rope_head_dim) * size,
                "expanded": self.n_heads * (self.qk_head_dim + self.v_head_dim) * size}

    # -- forward ----------------------------------------------------------------------------
    def forward(
        self, x: torch.Tensor, *, positions: torch.Tensor | None = None,
        cache: LatentCache | None = None, layer_idx: int = 0, mask: torch.Tensor | None = None,
        absorbed: bool = False, return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        check_hidden(x, self.d_model, self.kv_b_proj.weight, "MultiHeadLatentAttention", ndim=3)
        B, T, C = x.shape
        if cache is not None and not isinstance(cache, LatentCache):
            raise TypeError(f"cache must be a LatentCache (MLA caches latents, not keys and values), "
                            f"got {type(cache).__name__}; inside a model wrap its KVCache as "
                            "LatentSlots(cache)")
        q_nope, q_rope = self.queries(x)
        c, k_rope = self.latents(x)
        offset = cache.length(layer_idx) if cache is not None else 0
        if positions is None:
            positions = torch.arange(offset, offset + T, device=x.device)  # (T,)
        q_rope, k_rope = self.rope(q_rope, k_rope, positions, seq_len=offset + T)
        k_rope = k_rope[:, 0]  # (B, T, dr): one rope key per token, shared by the heads
        if cache is not None:
            c, k_rope = cache.update(layer_idx, c, k_rope)  # (B, S, r), (B, S, dr)
        attend = self._attend_absorbed if absorbed else self._attend_naive
        out, weights = attend(q_nope, q_rope, c, k_rope, mask, return_weights)  # (B, H, T, dv)
        out = self.o_proj(out.transpose(1, 2).reshape(B, T, self.n_heads * self.v_head_dim))
        return (out, weights) if return_weights else out

    def _sdpa(self, q, k, v, mask, return_weights):
        result = scaled_dot_product_attention(
            q, k, v, mask=mask, scale=self.scale, is_causal=self.causal, return_weights=return_weights)
        return result if return_weights else (result, None)

    def _attend_naive(self, q_nope, q_rope, c, k_rope, mask, return_weights):
        """Decompress every cached token into per-head keys and values, then attend."""
        B, S, _ = c.shape
        H, dn, dv = self.n_heads, self.qk_nope_head_dim, self.v_head_dim
        kv = self.kv_b_proj(c).view(B, S, H, dn + dv).transpose(1, 2)  # (B, H, S, dn+dv)
        k_nope, v = kv.split([dn, dv], dim=-1)
        k_pe = k_rope[:, None].expand(B, H, S, self.qk_rope_head_dim)  # (B, H, S, dr), shared
        k = torch.cat((k_nope, k_pe), dim=-1)  # (B, H, S, dn+dr)
        q = torch.cat((q_nope, q_rope), dim=-1)  # (B, H, T, dn+dr)
        return self._sdpa(q, k, v, mask, return_weights)

    def _attend_absorbed(self, q_nope, q_rope, c, k_rope, mask, return_weights):
        """Attend in latent space: W_uk folded into the query, W_uv applied after averaging."""
        w_uk, w_uv = self.up_projections()  # (H, dn, r), (H, dv, r)
        q_lat = torch.einsum("bhtd,hdr->bhtr", q_nope, w_uk)  # (B, H, T, r)
        q = torch.cat((q_lat, q_rope), dim=-1)  # (B, H, T, r+dr)
        k = torch.cat((c, k_rope), dim=-1)[:, None]  # (B, 1, S, r+dr): one "kv head" for all H
        B, H, T, _ = q.shape
        if T == 1 and mask is None:
            # a decode step: the H query heads are H rows against the one latent "head", two
            # plain matmuls over the cache (no per-head copy of it, no (T, S) mask: the newest
            # query sees every key)
            o_lat, weights = self._sdpa_rows(q.view(B, 1, H, -1), k, c[:, None], return_weights)
            o_lat = o_lat.view(B, H, 1, -1)
            weights = None if weights is None else weights.view(B, H, 1, -1)
        else:
            o_lat, weights = self._sdpa(q, k, c[:, None], mask, return_weights)  # (B, H, T, r)
        return torch.einsum("bhtr,hvr->bhtv", o_lat, w_uv), weights  # (B, H, T, dv)

    def _sdpa_rows(self, q, k, v, return_weights):
        result = scaled_dot_product_attention(q, k, v, scale=self.scale, fused=False,
                                              return_weights=return_weights)
        return result if return_weights else (result, None)

    def extra_repr(self) -> str:
        q = f"q_lora_rank={self.q_lora_rank}, " if self.q_lora_rank else ""
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, {q}kv_lora_rank={self.kv_lora_rank}, "
                f"qk_nope_head_dim={self.qk_nope_head_dim}, qk_rope_head_dim={self.qk_rope_head_dim}, "
                f"v_head_dim={self.v_head_dim}, scale={self.scale:.4g}")
