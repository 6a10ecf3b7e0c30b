"""FlashAttention's backward pass, split-KV decoding and packed GQA heads, in plain PyTorch.

Shape letters: B batch, H query heads, G kv heads, R = H // G query heads per kv head,
T queries, S keys, D head dim, Dv value dim.

* :func:`flash_forward` is :func:`llmviz.attention.tiled_attention` that also returns each
  query row's log-sum-exp ``lse = m + log l`` (the row statistics a FlashAttention kernel saves).
* :func:`flash_backward` recomputes every tile of weights from ``q``, ``k`` and ``lse``
  (``p = exp(s - lse)``) instead of reading a stored ``(T, S)`` matrix (Dao 2023, Alg. 2: the
  outer loop runs over key blocks, ``dK`` and ``dV`` stay in the loop, ``dQ`` accumulates).
  :func:`flash_attention` wires both into autograd: what it saves for the backward pass is
  ``q, k, v, out, lse``, linear in ``T``.
* :func:`split_kv_decode` splits the keys into chunks, attends to each chunk separately
  (parallel work even for one query row) and merges the partial results with
  :func:`merge_partials`, the online-softmax rescaling (flash-decoding, Dao et al. 2023).
* :func:`pack_gqa` turns the R query heads that share a kv head into R*T rows of one head, so
  one product reads the shared keys once for all of them; :func:`packed_gqa_attention` runs
  torch's fused kernel on the packed rows.

Python loops over tiles: the point is the algorithm and what it stores, not speed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F

from .._checks import check_flags, check_positive_int, check_tensor
from ._checks import check_qkv
from .functional import repeat_kv
from .masks import query_positions
from .tiled import tile_map

__all__ = ["flash_forward", "flash_backward", "flash_attention", "saved_tensor_bytes",
           "merge_partials", "split_kv_decode", "pack_gqa", "unpack_gqa", "packed_gqa_attention"]


def _setup(q, k, v, causal, scale, block_q, block_k):
    H, G = check_qkv(q, k, v)
    check_positive_int(block_q, "block_q")
    check_positive_int(block_k, "block_k")
    T, S = q.shape[2], k.shape[2]
    if causal and S < T:
        raise ValueError(f"causal flash attention needs S ({S}) >= T ({T}); queries are the last T keys")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    status = tile_map(T, S, block_q=block_q, block_k=block_k, causal=causal).tolist()
    q_pos = query_positions(T, S, device=q.device) if causal else None
    return H // G, scale, status, q_pos


def _tile_scores(qb, kb, status, q_pos, qs, ks, scale):
    """Scores of one tile, ``(B, H, bq, bk)``, future keys set to -inf where the tile crosses
    the diagonal (status 1)."""
    s = (qb @ kb.transpose(-1, -2)) * scale
    if status == 1:
        k_pos = torch.arange(ks, ks + s.shape[-1], device=s.device)[None, :]
        s = s.masked_fill(k_pos > q_pos[qs : qs + s.shape[-2], None], float("-inf"))
    return s


def flash_forward(q, k, v, *, causal: bool = False, scale: float | None = None,
                  block_q: int = 64, block_k: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Tiled attention returning ``(out (B, H, T, Dv), lse (B, H, T))``.

    ``lse[..., t] = log sum_j exp(scale * q_t . k_j)`` over the keys query ``t`` may see: with
    it, any weight is ``exp(score - lse)`` and can be recomputed without the rest of its row.
    k, v: ``(B, G, S, D)``, ``H % G == 0``; causal: queries are the last T of the S keys.
    """
    check_flags(causal=causal)
    n_rep, scale, status, q_pos = _setup(q, k, v, causal, scale, block_q, block_k)
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    B, H, T, _ = q.shape
    out = q.new_empty(B, H, T, v.shape[-1])
    lse = q.new_empty(B, H, T)
    for i, qs in enumerate(range(0, T, block_q)):
        qb = q[:, :, qs : qs + block_q]
        m = torch.full(qb.shape[:-1] + (1,), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = q.new_zeros(qb.shape[:-1] + (v.shape[-1],))
        for j, ks in enumerate(range(0, k.shape[2], block_k)):
            if status[i][j] == 0:
                continue
            s = _tile_scores(qb, k[:, :, ks : ks + block_k], status[i][j], q_pos, qs, ks, scale)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            corr = torch.exp(m - m_new)
            l = l * corr + p.sum(-1, keepdim=True)
            acc = acc * corr + p @ v[:, :, ks : ks + block_k]
            m = m_new
        out[:, :, qs : qs + qb.shape[2]] = acc / l
        lse[:, :, qs : qs + qb.shape[2]] = (m + torch.log(l)).squeeze(-1)
    return out, lse


def flash_backward(q, k, v, out, lse, dout, *, causal: bool = False, scale: float | None = None,
                   block_q: int = 64, block_k: int = 64):
    """Gradients ``(dq, dk, dv)`` of attention from ``q, k, v``, its output, ``lse`` and ``dout``.

    No ``(T, S)`` tensor is read or kept: each tile's weights are recomputed as
    ``p = exp(scale * q k^T - lse)``, and the softmax's backward uses the row sums
    ``delta = rowsum(dout * out)`` (equal to ``sum_j p_j dp_j``):
    ``ds = p * (dout v^T - delta)``, ``dq = scale ds k``, ``dk = scale ds^T q``, ``dv = p^T dout``.
    Gradients of shared kv heads are summed over the query heads of their group.
    """
    n_rep, scale, status, q_pos = _setup(q, k, v, causal, scale, block_q, block_k)
    for t, name, shape in ((out, "out", q.shape[:3] + v.shape[-1:]), (dout, "dout", None),
                           (lse, "lse", q.shape[:3])):
        check_tensor(t, name, floating=True)
        want = shape if shape is not None else out.shape
        if tuple(t.shape) != tuple(want):
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {tuple(want)} "
                             "(from flash_forward on the same q, k, v)")
    G, S = k.shape[1], k.shape[2]
    kr, vr = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    delta = (dout * out).sum(-1)  # (B, H, T)
    dq = torch.zeros_like(q)
    dk, dv = torch.zeros_like(kr), torch.zeros_like(vr)
    for j, ks in enumerate(range(0, S, block_k)):
        kb, vb = kr[:, :, ks : ks + block_k], vr[:, :, ks : ks + block_k]
        for i, qs in enumerate(range(0, q.shape[2], block_q)):
            if status[i][j] == 0:
                continue
            qb, dob = q[:, :, qs : qs + block_q], dout[:, :, qs : qs + block_q]
            s = _tile_scores(qb, kb, status[i][j], q_pos, qs, ks, scale)
            p = torch.exp(s - lse[:, :, qs : qs + qb.shape[2], None])  # recomputed weights
            dv[:, :, ks : ks + block_k] += p.transpose(-1, -2) @ dob
            ds = p * (dob @ vb.transpose(-1, -2) - delta[:, :, qs : qs + qb.shape[2], None])
            dq[:, :, qs : qs + block_q] += scale * (ds @ kb)
            dk[:, :, ks : ks + block_k] += scale * (ds.transpose(-1, -2) @ qb)
    B = q.shape[0]
    dk = dk.view(B, G, n_rep, S, -1).sum(2)
    dv = dv.view(B, G, n_rep, S, -1).sum(2)
    return dq, dk, dv


class _FlashFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, block_q, block_k):
        out, lse = flash_forward(q, k, v, causal=causal, scale=scale, block_q=block_q, block_k=block_k)
        ctx.save_for_backward(q, k, v, out, lse)  # linear in T: no (T, S) weights
        ctx.opts = dict(causal=causal, scale=scale, block_q=block_q, block_k=block_k)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = flash_backward(q, k, v, out, lse, dout.contiguous(), **ctx.opts)
        return dq, dk, dv, None, None, None, None


def flash_attention(q, k, v, *, causal: bool = False, scale: float | None = None,
                    block_q: int = 64, block_k: int = 64) -> torch.Tensor:
    """Attention with FlashAttention's forward and backward passes, differentiable in autograd.

    Equal (to float rounding) to :func:`llmviz.attention.scaled_dot_product_attention`, values
    and gradients; the backward pass recomputes weights tile by tile (:func:`flash_backward`).
    """
    check_flags(causal=causal)
    return _FlashFunction.apply(q, k, v, causal, scale, block_q, block_k)


def saved_tensor_bytes(fn: Callable[[], Any], *, exclude: Iterable[torch.Tensor] = ()) -> int:
    """Bytes of the distinct tensors autograd saves for the backward pass while ``fn()`` runs.

    Counted with ``torch.autograd.graph.saved_tensors_hooks``; a storage saved twice counts once,
    whole (a view saved counts the storage it views). ``exclude``: tensors whose storages are not
    counted, e.g. the parameters and the input, which a model keeps whether or not autograd saves
    them; what is left is the memory the backward pass adds.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if isinstance(exclude, torch.Tensor):
        raise TypeError("exclude must be an iterable of tensors (e.g. [x, *model.parameters()]), "
                        "got a single tensor; wrap it in a list")
    skip = set()
    for t in exclude:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"exclude must hold tensors, got {type(t).__name__}")
        skip.add(t.untyped_storage().data_ptr())
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in skip:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn()
    del result
    return sum(seen.values())


def merge_partials(outs: torch.Tensor, lses: torch.Tensor) -> torch.Tensor:
    """Merge attention over disjoint key chunks: ``outs (n, ..., Dv)``, ``lses (n, ...)``.

    Chunk ``c`` saw the keys with normaliser ``exp(lse_c)``; the full softmax gives it the
    weight ``exp(lse_c - logsumexp_c lse_c)``. A chunk with no visible key has ``lse = -inf``
    and weight 0.
    """
    check_tensor(outs, "outs", min_ndim=2, floating=True)
    check_tensor(lses, "lses", min_ndim=1, floating=True)
    if tuple(outs.shape[:-1]) != tuple(lses.shape):
        raise ValueError(f"outs {tuple(outs.shape)} and lses {tuple(lses.shape)} must agree "
                         "except in the last (value) axis of outs")
    w = torch.softmax(lses, dim=0).nan_to_num(0.0)  # exp(lse_c - lse_total)
    return (w[..., None] * outs.nan_to_num(0.0)).sum(0)


def pack_gqa(q: torch.Tensor, n_kv_heads: int) -> torch.Tensor:
    """``(B, H, T, D) -> (B, G, R*T, D)``: the R query heads of a group become rows of one head.

    Row ``r*T + t`` of group ``g`` is query ``t`` of head ``g*R + r`` (contiguous groups, as in
    :func:`repeat_kv`). :func:`unpack_gqa` inverts it.
    """
    check_tensor(q, "q", ndim=4)
    check_positive_int(n_kv_heads, "n_kv_heads")
    B, H, T, D = q.shape
    if H % n_kv_heads:
        raise ValueError(f"query heads H ({H}) must be divisible by n_kv_heads ({n_kv_heads})")
    return q.reshape(B, n_kv_heads, (H // n_kv_heads) * T, D)


def unpack_gqa(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``(B, G, R*T, Dv) -> (B, H, T, Dv)`` with ``H = n_heads``: the inverse of :func:`pack_gqa`."""
    check_tensor(x, "x", ndim=4)
    check_positive_int(n_heads, "n_heads")
    B, G, RT, Dv = x.shape
    if n_heads % G or RT % (n_heads // G):
        raise ValueError(f"x {tuple(x.shape)} cannot hold {n_heads} heads: n_heads must be a "
                         "multiple of G and the rows a multiple of n_heads // G")
    return x.reshape(B, n_heads, RT // (n_heads // G), Dv)


def packed_gqa_attention(q, k, v, *, causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """Attention with each group's query heads packed as rows (one fused SDPA call per kv head).

    q ``(B, H, T, D)``, k, v ``(B, G, S, D)``. With ``causal`` the queries are the last T of
    the S keys and the mask is tiled over the R heads of each group (for T = 1 no mask is needed).
    """
    check_flags(causal=causal)
    H, G = check_qkv(q, k, v)
    T, S = q.shape[2], k.shape[2]
    mask = None
    if causal and T > 1:
        allowed = torch.arange(S, device=q.device)[None, :] <= query_positions(T, S, device=q.device)[:, None]
        mask = allowed.repeat(H // G, 1)  # (R*T, S)
    out = F.scaled_dot_product_attention(pack_gqa(q, G), k, v, attn_mask=mask, scale=scale)
    return unpack_gqa(out, H)


def split_kv_decode(q, k, v, *, n_splits: int, scale: float | None = None,
                    return_partials: bool = False):
    """Decoding attention (every query sees all S keys) computed in ``n_splits`` key chunks.

    Each chunk's scores, maximum, normaliser and weighted values are computed as one batched
    product over all chunks (the work items a split-KV kernel hands to separate thread blocks);
    :func:`merge_partials` combines them. Query heads are packed per kv head (:func:`pack_gqa`).
    Returns ``(B, H, T, Dv)``; with ``return_partials`` also ``(outs, lses)`` per chunk.
    """
    H, G = check_qkv(q, k, v)
    check_positive_int(n_splits, "n_splits")
    B, S = q.shape[0], k.shape[2]
    if n_splits > S:
        raise ValueError(f"n_splits ({n_splits}) must be at most the number of keys S ({S})")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    chunk = math.ceil(S / n_splits)
    pad = n_splits * chunk - S
    if pad:
        k, v = F.pad(k, (0, 0, 0, pad)), F.pad(v, (0, 0, 0, pad))
    kc = k.view(B, G, n_splits, chunk, k.shape[-1])
    vc = v.view(B, G, n_splits, chunk, v.shape[-1])
    qp = pack_gqa(q, G)[:, :, None]  # (B, G, 1, R*T, D)
    s = (qp @ kc.transpose(-1, -2)) * scale  # (B, G, n, R*T, chunk)
    if pad:  # padded keys: never seen (a chunk of padding only gets lse = -inf, weight 0)
        real = (torch.arange(n_splits * chunk, device=q.device) < S).view(n_splits, 1, chunk)
        s = s.masked_fill(~real, float("-inf"))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    outs = (p @ vc) / l  # (B, G, n, R*T, Dv); 0/0 = nan in an all-padding chunk
    lses = (m + torch.log(l)).squeeze(-1)  # (B, G, n, R*T)
    merged = merge_partials(outs.movedim(2, 0), lses.movedim(2, 0))  # (B, G, R*T, Dv)
    out = unpack_gqa(merged, H)
    return (out, (outs, lses)) if return_partials else out
