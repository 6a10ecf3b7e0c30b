"""Online softmax and tiled attention: the FlashAttention idea in plain PyTorch.

Shape letters: B batch, H heads, G kv heads, T queries, S keys, D head dim.

Naive attention materialises the ``(T, S)`` score matrix per head: memory grows as ``T * S``.
The *online softmax* (Milakov & Gimelshein 2018) computes ``softmax(x) @ v`` in one pass over
blocks of ``x``, keeping only a running maximum ``m``, a running normaliser ``l`` and a running
weighted sum ``acc``; when a new block raises the maximum, the old ``l`` and ``acc`` are
rescaled by ``exp(m_old - m_new)``. FlashAttention (Dao et al. 2022) applies this to tiles of
queries and keys so that only a ``(block_q, block_k)`` tile of scores exists at any time; on a
GPU the tile lives in on-chip SRAM. Here the loops are Python loops: the point is the algorithm
and its memory footprint, not speed.
"""

from __future__ import annotations

import math

import torch

from .._checks import check_flags, check_positive_int, check_tensor
from ._checks import check_qkv
from .functional import repeat_kv
from .masks import query_positions

__all__ = ["online_softmax", "online_softmax_trace", "tiled_attention", "tile_map"]



def online_softmax(x: torch.Tensor, *, block_size: int = 16) -> torch.Tensor:
    """Softmax over the last axis, reading ``x`` one block of ``block_size`` columns at a time.

    Pass 1 keeps a running max ``m`` and normaliser ``l = sum exp(x - m)``, rescaling ``l`` when
    ``m`` grows; pass 2 writes ``exp(x - m) / l``. Equal to ``torch.softmax(x, -1)``.
    """
    check_tensor(x, "x", min_ndim=1, floating=True)
    check_positive_int(block_size, "block_size")
    m = torch.full(x.shape[:-1] + (1,), float("-inf"), dtype=x.dtype, device=x.device)
    l = torch.zeros_like(m)
    for start in range(0, x.shape[-1], block_size):
        blk = x[..., start : start + block_size]
        m_new = torch.maximum(m, blk.amax(-1, keepdim=True))
        # exp(-inf - -inf) would be NaN: a row still all -inf keeps l = 0
        rescale = torch.where(m_new == float("-inf"), torch.zeros_like(m), torch.exp(m - m_new))
        l = l * rescale + torch.exp(blk - m_new).nan_to_num(0.0).sum(-1, keepdim=True)
        m = m_new
    return torch.exp(x - m) / l


def online_softmax_trace(x: torch.Tensor, *, block_size: int = 1) -> dict[str, torch.Tensor]:
    """The running max ``m`` and normaliser ``l`` after each block of a 1-D ``x`` (for plots).

    Returns:
        ``{"m": (n_blocks,), "l": (n_blocks,), "end": (n_blocks,)}``; ``end`` is the number of
        entries read so far. ``l[-1] * exp(m[-1])`` equals ``exp(x).sum()``.
    """
    check_tensor(x, "x", ndim=1, floating=True)
    check_positive_int(block_size, "block_size")
    m, l = torch.tensor(float("-inf"), dtype=x.dtype), torch.tensor(0.0, dtype=x.dtype)
    ms, ls, ends = [], [], []
    for start in range(0, x.numel(), block_size):
        blk = x[start : start + block_size]
        m_new = torch.maximum(m, blk.max())
        l = l * torch.exp(m - m_new) + torch.exp(blk - m_new).sum()
        m = m_new
        ms.append(m.clone())
        ls.append(l.clone())
        ends.append(min(start + block_size, x.numel()))
    return {"m": torch.stack(ms), "l": torch.stack(ls), "end": torch.tensor(ends)}


def tile_map(
    T: int, S: int | None = None, *, block_q: int, block_k: int, causal: bool = True
) -> torch.Tensor:
    """What :func:`tiled_attention` does with each ``(block_q, block_k)`` tile of the scores.

    Args:
        T: number of queries (the last T of the S keys).
        S: number of keys (default ``T``).
        block_q, block_k: tile size.
        causal: with a causal mask, tiles entirely above the diagonal are skipped and tiles
            that cross it are computed with a partial mask.

    Returns:
        ``(ceil(T / block_q), ceil(S / block_k))`` long tensor: 0 = skipped, 1 = computed with a
        partial mask (crosses the diagonal), 2 = computed in full. :func:`tiled_attention`
        follows this map, so its nonzero entries are the ``"tiles"`` it reports.
    """
    check_flags(causal=causal)
    check_positive_int(block_q, "block_q")
    check_positive_int(block_k, "block_k")
    check_positive_int(T, "T", allow_zero=True)
    S = T if S is None else check_positive_int(S, "S", allow_zero=True)
    n_q, n_k = math.ceil(T / block_q), math.ceil(S / block_k)
    status = torch.full((n_q, n_k), 2, dtype=torch.long)
    if not causal:
        return status
    q_pos = query_positions(T, S)  # (T,)
    for i in range(n_q):
        first_q = int(q_pos[i * block_q])
        last_q = int(q_pos[min((i + 1) * block_q, T) - 1])
        for j in range(n_k):
            first_k, last_k = j * block_k, min((j + 1) * block_k, S) - 1
            if first_k > last_q:
                status[i, j] = 0  # every key after every query: skipped
            elif last_k > first_q:
                status[i, j] = 1  # crosses the diagonal: computed, partly masked
    return status


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_q: int = 64,
    block_k: int = 64,
    return_stats: bool = False,
):
    """Attention computed tile by tile with the online softmax (FlashAttention's forward pass).

    Args:
        q: ``(B, H, T, D)``; k, v: ``(B, G, S, D)`` with ``H % G == 0`` (contiguous groups).
        causal: causal mask with queries as the last T of the S keys; tiles entirely above the
            diagonal are skipped, not computed.
        scale: default ``1 / sqrt(D)``.
        block_q, block_k: tile size; the largest score buffer alive is
            ``(B, H, block_q, block_k)``.
        return_stats: also return ``{"tiles": computed, "skipped": skipped,
            "peak_score_elements": B*H*block_q*block_k}``.

    Returns:
        ``(B, H, T, D)`` output equal to :func:`llmviz.attention.scaled_dot_product_attention`
        (fully masked rows, possible only when ``S < T`` is excluded, do not arise).
    """
    check_flags(causal=causal, return_stats=return_stats)
    H, G = check_qkv(q, k, v)
    check_positive_int(block_q, "block_q")
    check_positive_int(block_k, "block_k")
    B, _, T, D = q.shape
    S = k.shape[2]
    if causal and S < T:
        raise ValueError(f"causal tiled attention needs S ({S}) >= T ({T})")
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    k, v = repeat_kv(k, H // G), repeat_kv(v, H // G)  # (B, H, S, D)
    out = torch.empty(B, H, T, v.shape[-1], dtype=q.dtype, device=q.device)
    status = tile_map(T, S, block_q=block_q, block_k=block_k, causal=causal).tolist()
    q_positions = query_positions(T, S, device=q.device) if causal else None  # (T,)
    tiles = skipped = 0
    for i, qs in enumerate(range(0, T, block_q)):
        qb = q[:, :, qs : qs + block_q] * scale  # (B, H, bq, D)
        bq = qb.shape[2]
        m = torch.full((B, H, bq, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(B, H, bq, v.shape[-1], dtype=q.dtype, device=q.device)
        for j, ks in enumerate(range(0, S, block_k)):
            if status[i][j] == 0:  # every key after every query of the tile
                skipped += 1
                continue
            tiles += 1
            s = qb @ k[:, :, ks : ks + block_k].transpose(-1, -2)  # (B, H, bq, bk)
            if status[i][j] == 1:  # the tile crosses the diagonal: mask its future keys
                q_pos = q_positions[qs : qs + bq, None]
                k_pos = torch.arange(ks, ks + s.shape[-1], device=q.device)[None, :]
                s = s.masked_fill(k_pos > q_pos, float("-inf"))  # (bq, bk) broadcast
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))  # (B, H, bq, 1)
            p = torch.exp(s - m_new)  # (B, H, bq, bk)
            correction = torch.exp(m - m_new)
            l = l * correction + p.sum(-1, keepdim=True)
            acc = acc * correction + p @ v[:, :, ks : ks + block_k]  # (B, H, bq, D)
            m = m_new
        out[:, :, qs : qs + bq] = acc / l
    if return_stats:
        return out, {"tiles": tiles, "skipped": skipped, "peak_score_elements": B * H * block_q * block_k}
    return out
