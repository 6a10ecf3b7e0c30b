"""Scaled dot-product attention, the pure functions: weights, output, GQA head sharing.

Shape letters: B batch, T query length, S key length, H query heads, G key/value heads
(``H % G == 0``), D head dim.

Conventions (see :mod:`llmviz.attention` for the module built on these):

* Masks are ``bool`` with **True = may attend** (torch's convention), broadcastable to
  ``(B, H, T, S)``; :mod:`llmviz.masks` builds them. Additive float terms (ALiBi, T5 relative
  bias) go in ``bias=``.
* Grouped-query attention (Ainslie et al. 2023) shares each key/value head with ``H // G``
  *consecutive* query heads: query head ``h`` uses kv head ``h // (H // G)``, exactly like
  Hugging Face's ``repeat_kv``. ``G = 1`` is multi-query attention (Shazeer 2019), ``G = H``
  is ordinary multi-head attention (Vaswani et al. 2017).
* **Fully masked rows** (a query that may attend to no key, through ``mask`` or ``-inf`` in
  ``bias``): the softmax over an empty set is undefined and a naive implementation returns NaN.
  Here such a row gets **zero weights and a zero output** on every path (reference, fused,
  and :class:`llmviz.position.relative.ShawRelativePosition`).
* **Blocked keys never contribute, whatever they hold**: a key that no query may attend to
  (padding, a ``-inf`` bias column) has its key and value replaced by zeros first, so an
  ``inf``/NaN there cannot leak through ``0 * inf``. (A key that some query may see is
  used as is: an ``inf`` there reaches the queries that see it, as it should.) Both rules are
  applied with ``masked_fill`` on the device, never by reading values back to the host.
* Soft-capping (Gemma 2): ``scores = cap * tanh(scores / cap)`` before masking.

Two paths compute the same thing: the *reference* path, written out
(``q @ k^T -> softmax -> @ v``), which can return the weights; and the *fused* path,
``torch.nn.functional.scaled_dot_product_attention`` (flash / memory-efficient kernels on GPU),
used when weights are not needed.

Which kernel the fused path reaches depends on what it is handed, so the structure is passed
in the cheapest form that describes it (see ``MultiHeadAttention.forward``):

================================  ====================================  =====================
structure                         what reaches torch                    CUDA SDPA backend
================================  ====================================  =====================
plain causal, ``T == S``          ``is_causal=True``, no mask tensor    flash (else efficient)
one decode step, ``T == 1``       no mask: the query sees every key     flash (else efficient)
causal with ``T < S`` (chunked    explicit ``(T, S)`` bool mask         efficient or math
prefill), sliding window
(window < S), sparse patterns
padding (``attention_mask``)      bool mask ``(B, 1, T, S)``            efficient or math
ALiBi, T5/relative bias, sinks    additive float mask ``(B, H, T, S)``  efficient or math
soft-cap, ``return_weights``      the reference path (no SDPA call)     none
================================  ====================================  =====================

FlashAttention takes no explicit mask, so any mask or additive bias rules it out on CUDA; the
memory-efficient kernel accepts one, the math kernel always works. On CPU, torch's flash
kernel handles both ``is_causal`` and explicit masks, but an explicit mask costs a ``(T, S)``
tensor (1 GiB of bool at ``T = S = 32k``) and its reads. A sliding window that covers every
key (window >= S) is plain causal and takes the first row.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._checks import check_flags, check_positive, check_positive_int, check_real, check_tensor
from ._blocked import blocked_rows, dead_keys
from ._checks import check_mask, check_qkv, check_sinks
from ._layout import Layout

__all__ = ["repeat_kv", "attention_weights", "scaled_dot_product_attention"]


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Repeat each kv head ``n_rep`` times, consecutively: ``(B, G, S, D) -> (B, G*n_rep, S, D)``.

    Identical to ``transformers.models.llama.modeling_llama.repeat_kv`` (and to
    ``x.repeat_interleave(n_rep, dim=1)``).
    """
    check_tensor(x, "x", ndim=4)
    check_positive_int(n_rep, "n_rep")
    if n_rep == 1:
        return x
    B, G, S, D = x.shape
    x = x[:, :, None, :, :].expand(B, G, n_rep, S, D)  # (B, G, n_rep, S, D)
    return x.reshape(B, G * n_rep, S, D)  # (B, H, S, D)


def _empty_rows(mask: torch.Tensor) -> torch.Tensor:
    """``(..., T, 1)`` bool, True where a query may attend to no key.

    Reduces over uint8 (``amax``), which is much faster than ``any`` on bool tensors on CPU.
    Never read back to the host: callers apply it with ``masked_fill``/``where``.
    """
    return mask.view(torch.uint8).amax(dim=-1, keepdim=True) == 0  # (..., T, 1)


def _causal_structure(T: int, S: int, device: torch.device) -> torch.Tensor | None:
    """The explicit causal mask for ``is_causal`` (queries = last T of S keys); None if T == 1."""
    if S < T:
        raise ValueError(
            f"is_causal needs S ({S}) >= T ({T}): queries are the last T of the S key "
            "positions (S = cached length + T)"
        )
    if T == 1:
        return None  # the newest query sees every key
    from .masks import causal_mask

    return causal_mask(T, S, device=device)  # (T, S)


def _resolve_scale(scale: float | None, D: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(D)
    return float(check_positive(scale, "scale"))


def attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
    softcap: float | None = None,
    is_causal: bool = False,
    sinks: torch.Tensor | None = None,
    enable_gqa: bool | None = None,
) -> torch.Tensor:
    """Attention weights ``softmax(scale * q @ k^T + bias)`` over allowed keys.

    Args:
        q: ``(B, H, T, D)`` queries, or any ``(..., H, T, D)`` (see
            :func:`scaled_dot_product_attention` for the leading dims).
        k: ``(B, G, S, D)`` keys, ``H % G == 0`` (contiguous groups).
        mask: bool, broadcastable to ``(B, H, T, S)``, True = may attend.
        bias: float, broadcastable to ``(B, H, T, S)``, added to the scores.
        scale: multiplies ``q @ k^T``; default ``1 / sqrt(D)``.
        softcap: if given, ``scores = softcap * tanh(scores / softcap)`` (Gemma 2).
        is_causal: add the causal structure (queries are the last T of the S keys), on top
            of ``mask``; built here as an explicit ``(T, S)`` mask, since the weights are
            ``(T, S)`` anyway.
        sinks: ``(H,)`` learned sink logits (gpt-oss): each row's softmax gets one extra
            column holding its head's sink logit, which takes mass and is then dropped, so a
            row sums to ``1 - p_sink`` and a head can attend to "nothing".

        enable_gqa: as in :func:`scaled_dot_product_attention`.

    Returns:
        ``(B, H, T, S)`` weights (``(..., H, T, S)`` for other ranks); each row sums to 1
        (less the sink's share with ``sinks``), fully blocked rows (by ``mask`` or by ``-inf``
        in ``bias``) are all zero.
    """
    check_flags(is_causal=is_causal)
    layout = Layout(q, k, None, enable_gqa)
    q, k = layout.q, layout.k
    H, G = check_qkv(q, k, k)
    B, _, T, D = q.shape
    S = k.shape[2]
    mask = layout.mask(mask, "mask", T, S)
    bias = layout.mask(bias, "bias", T, S)
    return layout.back(_weights(q, k, mask, bias, scale, softcap, is_causal, sinks))


def _weights(q, k, mask, bias, scale, softcap, is_causal, sinks) -> torch.Tensor:
    """:func:`attention_weights` on checked ``(B, H, T, D)`` inputs and 4-D-ready masks."""
    B, H, T, D = q.shape
    G, S = k.shape[1], k.shape[2]
    scale = _resolve_scale(scale, D)
    if softcap is not None:
        check_positive(softcap, "softcap")
    if sinks is not None:
        check_sinks(sinks, H)
    dead = dead_keys(mask, bias)
    if dead is not None:
        k = k.masked_fill(dead, 0.0)  # a blocked key never contributes, whatever it holds
    # Grouped queries without copying k: fold the H // G query heads of a group into rows.
    q_g = (q * scale).reshape(B, G, (H // G) * T, D)  # (B, G, H/G*T, D)
    scores = torch.matmul(q_g, k.transpose(-1, -2)).view(B, H, T, S)  # (B, H, T, S)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores + bias
    if is_causal:
        structure = _causal_structure(T, S, q.device)
        if structure is not None:
            mask = structure if mask is None else structure & mask
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))  # scores is our own fresh tensor
    low_precision = scores.dtype in (torch.float16, torch.bfloat16)
    if sinks is not None:  # one more column per row, the head's sink logit; dropped after
        sink = sinks.to(scores.dtype).view(1, H, 1, 1).expand(B, H, T, 1)
        scores = torch.cat([scores, sink], dim=-1)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32 if low_precision else None)
    if sinks is not None:  # a blocked row puts all its mass on the sink: zeros, no NaN
        return weights[..., :S].to(q.dtype)
    weights = weights.to(q.dtype)
    if mask is not None or bias is not None:
        # Fully blocked rows came out NaN (0/0); define them as zero weights. Decided on the
        # device (no host read), so the same code runs under torch.compile and on a GPU stream.
        weights = weights.masked_fill(blocked_rows(scores), 0.0)  # (B, H, T, 1) rows
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
    is_causal: bool = False,
    sinks: torch.Tensor | None = None,
    enable_gqa: bool | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``softmax(scale * q @ k^T + bias, masked) @ v`` for MHA, GQA and MQA.

    Any leading dimensions, as torch's ``scaled_dot_product_attention``: q ``(..., H, T, D)``,
    k ``(..., G, S, D)``, v ``(..., G, S, Dv)`` (3-D ``(H, T, D)`` and 2-D ``(T, D)`` too); the
    leading dims broadcast between q, k and v, and ``mask``/``bias`` broadcast to
    ``(..., H, T, S)``. The shapes below name the usual 4-D case.

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
        is_causal: causal structure on top of ``mask``/``bias``, with the queries the last T
            of the S keys (what a KV cache gives). Prefer it to passing ``causal_mask``:
            with no mask and no bias the fused path then builds no ``(T, S)`` tensor at all
            (``is_causal=True`` in torch when ``T == S``, nothing when ``T == 1``).
        sinks: ``(H,)`` learned sink logits (gpt-oss; see :func:`attention_weights`). Runs
            the reference path: torch's fused kernel has no sink input.
        enable_gqa: torch's flag. None (default): grouped-query sharing whenever ``G < H``
            divides ``H``; True: the same, as torch's ``enable_gqa=True``; False: ``G`` must
            equal ``H``, as torch's default.

    Returns:
        ``out`` of shape ``(B, H, T, Dv)`` (``(..., H, T, Dv)`` for other ranks), or
        ``(out, weights)`` if ``return_weights``. Rows with no allowed key give zero weights
        and a zero output.

    Unlike torch's, ``is_causal`` with ``T < S`` puts the queries at the END of the keys (a
    KV cache's layout; torch aligns them to the start); with ``T == S`` the two agree.
    """
    check_flags(is_causal=is_causal, return_weights=return_weights)
    layout = Layout(q, k, v, enable_gqa)
    q, k, v = layout.q, layout.k, layout.v
    H, G = check_qkv(q, k, v)
    B, _, T, D = q.shape
    S = k.shape[2]
    mask = layout.mask(mask, "mask", T, S)
    bias = layout.mask(bias, "bias", T, S)
    out = _attend(q, k, v, mask, bias, scale, softcap, dropout_p, return_weights, fused,
                  is_causal, sinks)
    if return_weights:
        return layout.back(out[0]), layout.back(out[1])
    return layout.back(out)


def _attend(q, k, v, mask, bias, scale, softcap, dropout_p, return_weights, fused, is_causal,
            sinks):
    """:func:`scaled_dot_product_attention` on checked ``(B, H, T, D)`` inputs."""
    B, H, T, D = q.shape
    G, S = k.shape[1], k.shape[2]
    check_real(dropout_p, "dropout_p")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p!r}")
    if fused is None:
        fused = not return_weights and softcap is None and sinks is None
    elif fused and (return_weights or softcap is not None or sinks is not None):
        raise ValueError(
            "fused=True cannot return weights, apply softcap or add sinks (torch's fused "
            "kernel does none of these); use fused=None or False"
        )
    if not fused:
        weights = _weights(q, k, mask, bias, scale, softcap, is_causal, sinks)
        dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
        dead = dead_keys(mask, bias)
        if dead is not None:
            v = v.masked_fill(dead, 0.0)  # zero weight times inf would still be NaN
        p_g = dropped.reshape(B, G, (H // G) * T, S)  # (B, G, H/G*T, S)
        out = torch.matmul(p_g, v).view(B, H, T, v.shape[-1])  # (B, H, T, Dv)
        return (out, weights) if return_weights else out

    scale = _resolve_scale(scale, D)
    if is_causal and mask is None and bias is None and T == S:
        # Plain causal self-attention: torch's own flag, no (T, S) tensor at all.
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale, enable_gqa=G != H
        )  # (B, H, T, Dv)
    dead = dead_keys(mask, bias)
    if dead is not None:  # blocked keys never contribute, whatever they hold
        k, v = k.masked_fill(dead, 0.0), v.masked_fill(dead, 0.0)
    if is_causal:  # T < S (chunked prefill; T = 1 needs nothing) or combined with mask/bias
        structure = _causal_structure(T, S, q.device)
        if structure is not None:
            mask = structure if mask is None else structure & mask
    attn_mask, empty_rows = mask, None
    if mask is not None:
        empty_rows = _empty_rows(mask)  # (..., T, 1)
        attn_mask = mask | empty_rows  # let empty rows attend anywhere; zeroed below
    if bias is not None:
        attn_mask = bias if attn_mask is None else bias.masked_fill(~attn_mask, float("-inf"))
        blocked = blocked_rows(attn_mask)  # (..., T, 1): -inf throughout
        attn_mask = attn_mask.masked_fill(blocked, 0.0)
        empty_rows = blocked if empty_rows is None else empty_rows | blocked
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask.to(q.dtype)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale, enable_gqa=G != H
    )  # (B, H, T, Dv)
    if empty_rows is not None:
        out = out.masked_fill(empty_rows, 0.0)  # on the device: no host read
    return out
