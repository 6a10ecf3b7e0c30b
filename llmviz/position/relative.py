"""Relative position schemes: Shaw et al. 2018, Transformer-XL (Dai et al. 2019), T5 (Raffel et
al. 2020).

Shapes: B batch, H heads, T queries, S keys, D head dim. Queries are the LAST T of the S key
positions (query t sits at ``i = S - T + t``), so every function works with a KV cache. The
relative position of key j seen from query i is ``j - i`` (negative = in the past), as in T5.

* Shaw: a learned vector per clipped offset ``clip(j - i, -K, K)`` added to the keys (and
  optionally the values): ``score_ij = q_i . (k_j + a_ij)``.
* Transformer-XL: with sinusoidal relative encodings R and two global vectors u, v, the score
  splits into four terms: content-content ``q_i . k_j``, content-position ``q_i . r_{i-j}``,
  global content bias ``u . k_j`` and global position bias ``v . r_{i-j}``.
* T5: one learned scalar per head and per *bucket* of offsets: exact buckets for small
  distances, logarithmic ones up to ``max_distance``, one shared bucket beyond.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from .._checks import check_flags, check_positive_int, check_tensor
from ..attention._blocked import blocked_rows, dead_keys
from ..attention._checks import check_mask
from ..attention.masks import query_positions

__all__ = [
    "relative_positions",
    "shaw_relative_index",
    "ShawRelativePosition",
    "XLTerms",
    "transformer_xl_terms",
    "t5_relative_bucket",
    "T5RelativeBias",
]


def relative_positions(
    T: int, S: int | None = None, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """``j - i`` for every query i (last T of S) and key j: (T, S) long."""
    query_pos = query_positions(T, S, device=device)  # (T,); checks 0 <= T <= S
    key_pos = torch.arange(T if S is None else S, device=device)  # (S,)
    return key_pos[None, :] - query_pos[:, None]  # (T, S)


# ----------------------------------------------------------------------------- Shaw
def shaw_relative_index(
    T: int, S: int | None = None, *, max_distance: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Row of the Shaw table for each (query, key): ``clip(j - i, -K, K) + K``, (T, S) long."""
    check_positive_int(max_distance, "max_distance")
    rel = relative_positions(T, S, device=device)
    return rel.clamp(-max_distance, max_distance) + max_distance


class ShawRelativePosition(nn.Module):
    """Shaw et al.'s clipped relative position representations for one attention layer.

    Args:
        head_dim: D.
        max_distance: K; offsets beyond +-K share the edge vectors (2K + 1 rows).
        values: also add relative vectors to the values (the paper's ``a^V``).

    Parameters ``rel_k`` (2K+1, D) and, with ``values=True``, ``rel_v`` (2K+1, D), shared by
    all heads (as in the paper).
    """

    def __init__(self, head_dim: int, *, max_distance: int, values: bool = True) -> None:
        check_flags(values=values)
        super().__init__()
        check_positive_int(head_dim, "head_dim")
        check_positive_int(max_distance, "max_distance")
        self.head_dim, self.max_distance = head_dim, max_distance
        rows = 2 * max_distance + 1
        self.rel_k = nn.Parameter(torch.randn(rows, head_dim) * head_dim**-0.5)
        self.rel_v = nn.Parameter(torch.randn(rows, head_dim) * head_dim**-0.5) if values else None

    def score_bias(self, q: torch.Tensor, S: int | None = None) -> torch.Tensor:
        """The position part of the scores, ``q_i . a_ij``: q (B, H, T, D) -> (B, H, T, S)."""
        check_tensor(q, "q", ndim=4, floating=True)
        if q.shape[-1] != self.head_dim:
            raise ValueError(
                f"q has head dim {q.shape[-1]} (shape {tuple(q.shape)}) but this "
                f"ShawRelativePosition was built for head_dim={self.head_dim}"
            )
        T = q.shape[-2]
        idx = shaw_relative_index(T, S, max_distance=self.max_distance, device=q.device)
        a = self.rel_k.to(q.dtype)[idx]  # (T, S, D)
        return torch.einsum("bhtd,tsd->bhts", q, a)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attention with relative keys/values. q (B, H, T, D), k and v (B, H, S, D).

        ``mask``: bool broadcastable to (B, H, T, S), True = may attend. Returns out (B, H, T, D)
        and, if asked, the weights (B, H, T, S). A query with no allowed key gets zero weights
        and a zero output (the relative value term included), and keys no query may attend to
        never contribute, as in :func:`llmviz.attention.scaled_dot_product_attention`.
        """
        check_flags(return_weights=return_weights)
        for t, name in ((q, "q"), (k, "k"), (v, "v")):
            check_tensor(t, name, ndim=4, floating=True)
            if t.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} has head dim {t.shape[-1]} (shape {tuple(t.shape)}) but this "
                    f"ShawRelativePosition was built for head_dim={self.head_dim}; build it "
                    f"with head_dim={t.shape[-1]} or reshape {name} to (B, H, T, {self.head_dim})"
                )
        if k.shape != v.shape or k.shape[:2] != q.shape[:2]:
            raise ValueError(
                f"q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} must share "
                "(B, H), and k and v their length S: expected q (B, H, T, D), k and v (B, H, S, D)"
            )
        if q.dtype != k.dtype or k.dtype != v.dtype:
            raise TypeError(
                f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}; "
                "cast them with .to(q.dtype)"
            )
        S = k.shape[-2]
        check_mask(mask, (q.shape[0], q.shape[1], q.shape[2], S))
        if mask is not None:  # blocked keys never contribute, whatever they hold
            dead = dead_keys(mask, None)  # (b, 1, S, 1)
            k, v = k.masked_fill(dead, 0.0), v.masked_fill(dead, 0.0)
        scores = (q @ k.transpose(-1, -2) + self.score_bias(q, S)) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)  # (B, H, T, S)
        if mask is not None:
            # a query with no allowed key: zero weights and output, as in scaled_dot_product_attention
            weights = weights.masked_fill(blocked_rows(scores), 0.0)  # (B, H, T, 1) rows
        out = weights @ v
        if self.rel_v is not None:
            idx = shaw_relative_index(q.shape[-2], S, max_distance=self.max_distance,
                                      device=q.device)
            out = out + torch.einsum("bhts,tsd->bhtd", weights, self.rel_v.to(q.dtype)[idx])
        return (out, weights) if return_weights else out

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_distance={self.max_distance}"


# ----------------------------------------------------------------------------- Transformer-XL
class XLTerms(NamedTuple):
    """The four Transformer-XL score terms, each (..., T, S); ``total`` is their sum."""

    content: torch.Tensor  # (a) q_i . k_j
    content_position: torch.Tensor  # (b) q_i . r_{i-j}
    global_content: torch.Tensor  # (c) u . k_j
    global_position: torch.Tensor  # (d) v . r_{i-j}

    @property
    def total(self) -> torch.Tensor:
        return self.content + self.content_position + self.global_content + self.global_position


def transformer_xl_terms(
    q: torch.Tensor, k: torch.Tensor, r: torch.Tensor, u: torch.Tensor, v: torch.Tensor
) -> XLTerms:
    """Split Transformer-XL attention scores into their four terms.

    Args:
        q: (..., T, D) projected queries ``W_q x_i``.
        k: (..., S, D) projected content keys ``W_{k,E} x_j``.
        r: (..., 2S - 1, D) projected relative encodings ``W_{k,R} R_d`` for the distances
            ``d = i - j = -(S-1) .. S-1`` in that order (row ``d + S - 1``); build R with
            ``sinusoidal_features(torch.arange(-(S-1), S), C)``.
        u, v: (..., D) the global content and position vectors (one per head).

    Returns:
        :class:`XLTerms`. Terms (c) and (d) do not depend on the query content; (d) depends on
        the positions only through ``i - j``.
    """
    for name, t in (("q", q), ("k", k), ("r", r)):
        check_tensor(t, name, min_ndim=2, floating=True)
    T, S = q.shape[-2], k.shape[-2]
    if r.shape[-2] != 2 * S - 1:
        raise ValueError(
            f"r must hold 2S-1 = {2 * S - 1} relative encodings (distances -(S-1)..S-1), "
            f"got {r.shape[-2]}"
        )
    idx = (S - 1) - relative_positions(T, S, device=q.device)  # (T, S): row of i - j
    r_ij = r[..., idx, :]  # (..., T, S, D)
    content = q @ k.transpose(-1, -2)  # (..., T, S)
    content_position = torch.einsum("...td,...tsd->...ts", q, r_ij)
    global_content = (k @ u[..., :, None]).transpose(-1, -2).expand_as(content)  # (..., T, S)
    global_position = torch.einsum("...d,...tsd->...ts", v, r_ij)
    return XLTerms(content, content_position, global_content, global_position)


# ----------------------------------------------------------------------------- T5
def t5_relative_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """Map offsets ``j - i`` to T5 buckets (long tensor of the same shape).

    Bidirectional: half the buckets for keys after the query (``j > i``), half for the rest.
    Within each half, the first half of the buckets are exact offsets 0, 1, 2, ...; the others
    grow logarithmically up to ``max_distance``, and every larger offset lands in the last one.
    Unidirectional (decoder): future offsets all map to bucket 0.
    """
    check_flags(bidirectional=bidirectional)
    check_tensor(relative_position, "relative_position")
    if relative_position.is_floating_point() or relative_position.dtype == torch.bool:
        raise TypeError(
            f"relative_position must be an integer tensor, got {relative_position.dtype}"
        )
    if not isinstance(num_buckets, int) or num_buckets < (4 if bidirectional else 2):
        raise ValueError(
            f"num_buckets must be an integer >= {4 if bidirectional else 2}, got {num_buckets!r}"
        )
    buckets = torch.zeros_like(relative_position, dtype=torch.long)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # past keys: distance i - j >= 0
    exact = num_buckets // 2
    check_positive_int(max_distance, "max_distance")
    if max_distance <= exact:
        raise ValueError(
            f"max_distance ({max_distance}) must exceed the {exact} exact buckets "
            f"(num_buckets={num_buckets * (2 if bidirectional else 1)})"
        )
    # logarithmic buckets for distances in [exact, max_distance), clamped to the last one
    log_ratio = torch.log(distance.float() / exact) / math.log(max_distance / exact)
    far = exact + (log_ratio * (num_buckets - exact)).long()
    far = far.clamp(max=num_buckets - 1)
    return buckets + torch.where(distance < exact, distance, far)


class T5RelativeBias(nn.Module):
    """T5's learned per-head bias over relative-position buckets.

    Args:
        n_heads: H.
        num_buckets, max_distance, bidirectional: see :func:`t5_relative_bucket`
            (T5 uses 32, 128, and bidirectional in the encoder only).

    Parameter ``relative_attention_bias``: ``nn.Embedding(num_buckets, H)`` (Hugging Face name).
    ``forward(T, S=None)`` -> (H, T, S) bias, queries the last T of S positions.
    """

    def __init__(
        self,
        n_heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
    ) -> None:
        check_flags(bidirectional=bidirectional)
        super().__init__()
        check_positive_int(n_heads, "n_heads")
        # validate the bucket settings once, on a dummy offset
        t5_relative_bucket(torch.zeros(1, dtype=torch.long), bidirectional=bidirectional,
                           num_buckets=num_buckets, max_distance=max_distance)
        self.n_heads, self.num_buckets = n_heads, num_buckets
        self.max_distance, self.bidirectional = max_distance, bidirectional
        self.relative_attention_bias = nn.Embedding(num_buckets, n_heads)

    def buckets(self, T: int, S: int | None = None) -> torch.Tensor:
        """Bucket of every (query, key) pair: (T, S) long."""
        rel = relative_positions(T, S, device=self.relative_attention_bias.weight.device)
        return t5_relative_bucket(rel, bidirectional=self.bidirectional,
                                  num_buckets=self.num_buckets, max_distance=self.max_distance)

    def forward(self, T: int, S: int | None = None) -> torch.Tensor:
        values = self.relative_attention_bias(self.buckets(T, S))  # (T, S, H)
        return values.permute(2, 0, 1)  # (H, T, S)

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.n_heads}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, bidirectional={self.bidirectional}"
        )
