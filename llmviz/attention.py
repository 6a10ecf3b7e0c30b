"""Scaled dot-product attention (Vaswani et al. 2017) and one attention module for MHA/GQA/MQA.

Shape letters: B batch, T query length, S key length, H query heads, G key/value heads
(``H % G == 0``), D head dim, C model dim.

Conventions:

* Masks are ``bool`` with **True = may attend** (torch's convention), broadcastable to
  ``(B, H, T, S)``; see :mod:`llmviz.masks` to build them. Additive float terms (ALiBi, T5
  relative bias) go in ``bias=``.
* Grouped-query attention (Ainslie et al. 2023) shares each key/value head with
  ``H // G`` *consecutive* query heads: query head ``h`` uses kv head ``h // (H // G)``, exactly
  like Hugging Face's ``repeat_kv``, so Llama/Mistral checkpoints map one to one. ``G = 1`` is
  multi-query attention (Shazeer 2019), ``G = H`` is ordinary multi-head attention.
* **Fully masked rows** (a query that may attend to no key): softmax over an empty set is
  undefined and a naive implementation returns NaN. Here such a row gets **zero weights and
  a zero output** in both the reference and the fused path.
* Soft-capping (Gemma 2): ``scores = cap * tanh(scores / cap)`` before masking.

Two paths compute the same thing:

* the *reference* path, written out (``q @ k^T -> softmax -> @ v``), which can return the
  attention weights;
* the *fused* path, ``torch.nn.functional.scaled_dot_product_attention`` (flash /
  memory-efficient kernels on GPU), used when weights are not needed.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ._utils import check_choice, check_tensor
from .masks import causal_mask, combine_masks, sliding_window_mask

__all__ = [
    "repeat_kv",
    "attention_weights",
    "scaled_dot_product_attention",
    "MultiHeadAttention",
    "gqa_from_mha",
]


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Repeat each kv head ``n_rep`` times, consecutively: ``(B, G, S, D) -> (B, G*n_rep, S, D)``.

    Identical to ``transformers.models.llama.modeling_llama.repeat_kv`` (and to
    ``x.repeat_interleave(n_rep, dim=1)``).
    """
    check_tensor(x, "x", ndim=4)
    if not isinstance(n_rep, int) or n_rep < 1:
        raise ValueError(f"n_rep must be a positive int, got {n_rep!r}")
    if n_rep == 1:
        return x
    B, G, S, D = x.shape
    x = x[:, :, None, :, :].expand(B, G, n_rep, S, D)  # (B, G, n_rep, S, D)
    return x.reshape(B, G * n_rep, S, D)  # (B, H, S, D)


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int]:
    """Validate shapes; return (H, G)."""
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        check_tensor(t, name, ndim=4, floating=True)
    B, H, T, D = q.shape
    if k.shape != v.shape[:-1] + (k.shape[-1],) or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree in (B, G, S); "
            "expected k (B, G, S, D) and v (B, G, S, Dv)"
        )
    if k.shape[0] != B or k.shape[-1] != D:
        raise ValueError(
            f"q {tuple(q.shape)} and k {tuple(k.shape)} must share batch B and head dim D; "
            "expected q (B, H, T, D), k (B, G, S, D)"
        )
    G = k.shape[1]
    if H % G:
        raise ValueError(
            f"query heads H ({H}) must be divisible by key/value heads G ({G}); "
            "each kv head serves H // G query heads"
        )
    return H, G


def _check_mask(mask: torch.Tensor | None, target: tuple[int, ...], name: str = "mask") -> None:
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(mask).__name__}")
    if name == "mask" and mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
            "use llmviz.masks.padding_mask() for a HF 0/1 attention_mask, or pass an additive "
            "float mask as bias="
        )
    if name == "bias" and not mask.is_floating_point():
        raise TypeError(f"bias must be a floating-point tensor, got dtype {mask.dtype}")
    try:
        if torch.broadcast_shapes(mask.shape, target) != target:
            raise RuntimeError
    except RuntimeError:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"(B, H, T, S) = {target}"
        ) from None


def _empty_rows(mask: torch.Tensor | None) -> torch.Tensor | None:
    """``(..., T, 1)`` bool, True where a query may attend to no key; None if there is none.

    Reduces over uint8 (``amax``), which is much faster than ``any`` on bool tensors on CPU.
    """
    if mask is None:
        return None
    empty = mask.view(torch.uint8).amax(dim=-1, keepdim=True) == 0  # (..., T, 1)
    return empty if bool(empty.any()) else None


def _resolve_scale(scale: float | None, D: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(D)
    if not isinstance(scale, (int, float)) or scale <= 0:
        raise ValueError(f"scale must be a positive number or None (1/sqrt(D)), got {scale!r}")
    return float(scale)


def attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
    softcap: float | None = None,
) -> torch.Tensor:
    """Attention weights ``softmax(scale * q @ k^T + bias)`` over allowed keys.

    Args:
        q: ``(B, H, T, D)`` queries.
        k: ``(B, G, S, D)`` keys, ``H % G == 0`` (contiguous groups).
        mask: bool, broadcastable to ``(B, H, T, S)``, True = may attend.
        bias: float, broadcastable to ``(B, H, T, S)``, added to the scores.
        scale: multiplies ``q @ k^T``; default ``1 / sqrt(D)``.
        softcap: if given, ``scores = softcap * tanh(scores / softcap)`` (Gemma 2).

    Returns:
        ``(B, H, T, S)`` weights; each row sums to 1, fully masked rows are all zero.
    """
    H, G = _check_qkv(q, k, k)
    B, _, T, D = q.shape
    S = k.shape[2]
    _check_mask(mask, (B, H, T, S))
    _check_mask(bias, (B, H, T, S), "bias")
    scale = _resolve_scale(scale, D)
    if softcap is not None and softcap <= 0:
        raise ValueError(f"softcap must be positive or None, got {softcap!r}")
    # Grouped queries without copying k: fold the H // G query heads of a group into rows.
    q_g = (q * scale).reshape(B, G, (H // G) * T, D)  # (B, G, H/G*T, D)
    scores = torch.matmul(q_g, k.transpose(-1, -2)).view(B, H, T, S)  # (B, H, T, S)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores + bias
    empty_rows = None
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))  # scores is our own fresh tensor
        empty_rows = _empty_rows(mask)
    low_precision = scores.dtype in (torch.float16, torch.bfloat16)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32 if low_precision else None)
    weights = weights.to(q.dtype)
    if empty_rows is not None:
        # Fully masked rows came out NaN (0/0); define them as zero weights.
        weights = weights.masked_fill(empty_rows, 0.0)
    return weights


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
    softcap: float | None = None,
    dropout_p: float = 0.0,
    return_weights: bool = False,
    fused: bool | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``softmax(scale * q @ k^T + bias, masked) @ v`` for MHA, GQA and MQA.

    Args:
        q: ``(B, H, T, D)`` queries.
        k: ``(B, G, S, D)`` keys with ``H % G == 0``; query head ``h`` uses kv head
            ``h // (H // G)`` (contiguous groups, as HF ``repeat_kv``).
        v: ``(B, G, S, Dv)`` values.
        mask: bool broadcastable to ``(B, H, T, S)``, **True = may attend**.
        bias: float broadcastable to ``(B, H, T, S)``, added to the scores (ALiBi, T5).
        scale: score multiplier, default ``1 / sqrt(D)``.
        softcap: Gemma 2 logit soft-cap: ``scores = softcap * tanh(scores / softcap)``.
        dropout_p: dropout on the weights (applied whenever > 0, as in torch).
        return_weights: also return the ``(B, H, T, S)`` weights (before dropout).
        fused: True forces ``F.scaled_dot_product_attention``; False forces the reference
            path; None (default) fuses unless weights or soft-capping are requested.

    Returns:
        ``out`` of shape ``(B, H, T, Dv)``, or ``(out, weights)`` if ``return_weights``.
        Rows with no allowed key give zero weights and a zero output.
    """
    H, G = _check_qkv(q, k, v)
    B, _, T, D = q.shape
    S = k.shape[2]
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p!r}")
    if fused is None:
        fused = not return_weights and softcap is None
    elif fused and (return_weights or softcap is not None):
        raise ValueError(
            "fused=True cannot return weights or apply softcap (torch's fused kernel does "
            "neither); use fused=None or False"
        )
    if not fused:
        weights = attention_weights(q, k, mask=mask, bias=bias, scale=scale, softcap=softcap)
        dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
        p_g = dropped.reshape(B, G, (H // G) * T, S)  # (B, G, H/G*T, S)
        out = torch.matmul(p_g, v).view(B, H, T, v.shape[-1])  # (B, H, T, Dv)
        return (out, weights) if return_weights else out

    _check_mask(mask, (B, H, T, S))
    _check_mask(bias, (B, H, T, S), "bias")
    scale = _resolve_scale(scale, D)
    attn_mask = mask
    empty_rows = _empty_rows(mask)
    if empty_rows is not None:
        attn_mask = mask | empty_rows  # let empty rows attend anywhere; zeroed below
    if bias is not None:
        attn_mask = bias if attn_mask is None else bias.masked_fill(~attn_mask, float("-inf"))
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask.to(q.dtype)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale, enable_gqa=G != H
    )  # (B, H, T, Dv)
    if empty_rows is not None:
        out = out.masked_fill(empty_rows, 0.0)
    return out


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with grouped key/value heads (MHA, GQA, MQA).

    Args:
        d_model: model width C.
        n_heads: query heads H.
        n_kv_heads: key/value heads G (default H = MHA; 1 = MQA). ``H % G == 0``.
        head_dim: per-head width D (default ``C // H``; may differ, as in Gemma).
        bias: whether the projections have biases.
        rope: a rotary module called as ``rope(q, k, positions) -> (q, k)`` (e.g.
            ``llmviz.position.rope.RotaryEmbedding``), or None.
        alibi: add ALiBi biases (Press et al. 2022) built by ``llmviz.position.alibi``.
        qk_norm: None, ``"rms"`` or ``"layer"``: per-head norm of q and k (``q_norm``,
            ``k_norm``) before RoPE, as in OLMo 2 / Qwen 3.
        softcap: Gemma 2 attention-logit soft-cap.
        sliding_window: each query sees this many most recent keys (Mistral).
        dropout: dropout on attention weights in training mode.
        causal: apply the causal mask.

    ``forward(x, *, mask, bias, positions, cache, layer_idx, return_weights)``: x ``(B, T, C)``;
    mask bool broadcastable to ``(B, H, T, S)`` (True = may attend), e.g. from
    :func:`llmviz.masks.padding_mask`; positions ``(T,)`` or ``(B, T)``, default
    ``cache offset + arange(T)``. Returns ``(B, T, C)`` or ``(out, weights (B, H, T, S))``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        n_kv_heads: int | None = None,
        head_dim: int | None = None,
        bias: bool = False,
        rope: Callable | None = None,
        alibi: bool = False,
        qk_norm: str | None = None,
        softcap: float | None = None,
        sliding_window: int | None = None,
        dropout: float = 0.0,
        causal: bool = True,
    ) -> None:
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if n_heads % n_kv_heads:
            raise ValueError(
                f"n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv_heads})"
            )
        if head_dim is None:
            if d_model % n_heads:
                raise ValueError(
                    f"d_model ({d_model}) must be divisible by n_heads ({n_heads}), "
                    "or pass head_dim explicitly"
                )
            head_dim = d_model // n_heads
        elif not isinstance(head_dim, int) or head_dim < 1:
            raise ValueError(f"head_dim must be a positive int, got {head_dim!r}")
        if qk_norm is not None:
            check_choice(qk_norm, "qk_norm", (None, "rms", "layer"))
        if rope is not None and alibi:
            raise ValueError("use either rope or alibi, not both")
        if rope is not None and not callable(rope):
            raise TypeError(f"rope must be callable as rope(q, k, positions), got {type(rope).__name__}")
        if softcap is not None and softcap <= 0:
            raise ValueError(f"softcap must be positive or None, got {softcap!r}")
        if sliding_window is not None and (not isinstance(sliding_window, int) or sliding_window < 1):
            raise ValueError(f"sliding_window must be a positive int or None, got {sliding_window!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.d_model, self.n_heads, self.n_kv_heads, self.head_dim = d_model, n_heads, n_kv_heads, head_dim
        self.q_proj = nn.Linear(d_model, n_heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(n_heads * head_dim, d_model, bias=bias)
        if qk_norm is None:
            self.q_norm = self.k_norm = None
        elif qk_norm == "rms":
            self.q_norm, self.k_norm = nn.RMSNorm(head_dim, eps=1e-6), nn.RMSNorm(head_dim, eps=1e-6)
        else:
            self.q_norm, self.k_norm = nn.LayerNorm(head_dim), nn.LayerNorm(head_dim)
        self.rope = rope
        self.alibi = alibi
        if alibi:
            from .position.alibi import alibi_slopes  # lazy: position package is optional here

            self.register_buffer("alibi_slopes", alibi_slopes(n_heads), persistent=False)
        self.softcap = softcap
        self.sliding_window = sliding_window
        self.dropout = dropout
        self.causal = causal

    @property
    def n_rep(self) -> int:
        """Query heads per key/value head, ``H // G``."""
        return self.n_heads // self.n_kv_heads

    def _alibi(self, T: int, S: int, device, dtype) -> torch.Tensor:
        from .position.alibi import alibi_bias

        slopes = self.alibi_slopes.to(device=device)
        full = alibi_bias(S, S, slopes=slopes, causal=self.causal, device=device, dtype=dtype)
        return full[:, S - T :, :]  # (H, T, S): queries are the last T positions

    def forward(
        self,
        x: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        cache=None,
        layer_idx: int = 0,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        check_tensor(x, "x", ndim=3, floating=True)
        B, T, C = x.shape
        if C != self.d_model:
            raise ValueError(f"x has width {C} but the module was built for d_model={self.d_model}")
        H, G, D = self.n_heads, self.n_kv_heads, self.head_dim
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = self.k_proj(x).view(B, T, G, D).transpose(1, 2)  # (B, G, T, D)
        v = self.v_proj(x).view(B, T, G, D).transpose(1, 2)  # (B, G, T, D)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        offset = cache.length(layer_idx) if cache is not None else 0
        if self.rope is not None:
            if positions is None:
                positions = torch.arange(offset, offset + T, device=x.device)  # (T,)
            q, k = self.rope(q, k, positions)
        if cache is not None:
            k, v = cache.update(layer_idx, k, v)  # (B, G, S, D)
        S = k.shape[2]
        structural = None
        if self.sliding_window is not None:
            structural = sliding_window_mask(
                T, S, window=self.sliding_window, causal=self.causal, device=x.device
            )
        elif self.causal:
            structural = causal_mask(T, S, device=x.device)
        if mask is not None:
            _check_mask(mask, (B, H, T, S))
        mask = combine_masks(structural, mask)
        if self.alibi:
            ab = self._alibi(T, S, x.device, q.dtype)
            bias = ab if bias is None else bias + ab
        result = scaled_dot_product_attention(
            q, k, v, mask=mask, bias=bias, softcap=self.softcap,
            dropout_p=self.dropout if self.training else 0.0, return_weights=return_weights,
        )
        out, weights = result if return_weights else (result, None)
        out = self.o_proj(out.transpose(1, 2).reshape(B, T, H * D))  # (B, T, C)
        return (out, weights) if return_weights else out


@torch.no_grad()
def gqa_from_mha(mha: MultiHeadAttention, n_kv_heads: int) -> MultiHeadAttention:
    """Build a GQA layer from a trained MHA layer by mean-pooling its key/value heads.

    The uptraining recipe of Ainslie et al. (2023): each group of ``H // G`` consecutive kv
    heads is averaged into one; query and output projections are copied unchanged.
    """
    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(f"mha must be a MultiHeadAttention, got {type(mha).__name__}")
    if mha.n_kv_heads != mha.n_heads:
        raise ValueError(
            f"mha must be plain multi-head (n_kv_heads == n_heads), got "
            f"n_kv_heads={mha.n_kv_heads}, n_heads={mha.n_heads}"
        )
    if mha.alibi:
        raise ValueError("gqa_from_mha does not support alibi layers yet; build the GQA layer by hand")
    has_bias = mha.q_proj.bias is not None
    gqa = MultiHeadAttention(
        mha.d_model, mha.n_heads, n_kv_heads=n_kv_heads, head_dim=mha.head_dim, bias=has_bias,
        rope=mha.rope, softcap=mha.softcap, sliding_window=mha.sliding_window,
        dropout=mha.dropout, causal=mha.causal,
        qk_norm=None if mha.q_norm is None else ("rms" if isinstance(mha.q_norm, nn.RMSNorm) else "layer"),
    ).to(device=mha.q_proj.weight.device, dtype=mha.q_proj.weight.dtype)
    gqa.q_proj.load_state_dict(mha.q_proj.state_dict())
    gqa.o_proj.load_state_dict(mha.o_proj.state_dict())
    if mha.q_norm is not None:
        gqa.q_norm.load_state_dict(mha.q_norm.state_dict())
        gqa.k_norm.load_state_dict(mha.k_norm.state_dict())
    r, D, C = mha.n_heads // n_kv_heads, mha.head_dim, mha.d_model
    for name in ("k_proj", "v_proj"):
        src, dst = getattr(mha, name), getattr(gqa, name)
        w = src.weight.view(n_kv_heads, r, D, C).mean(dim=1)  # (G, D, C)
        dst.weight.copy_(w.reshape(n_kv_heads * D, C))
        if has_bias:
            dst.bias.copy_(src.bias.view(n_kv_heads, r, D).mean(dim=1).reshape(-1))
    return gqa
