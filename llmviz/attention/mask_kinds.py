"""Attention masks as composable objects, and the registry of a layer's mask kinds.

A :class:`Mask` is a rule on absolute positions, ``rule(q, k) -> bool`` (True = may attend),
with queries the last T of S keys (the convention of :mod:`llmviz.attention.masks`, so a KV
cache needs nothing special). Masks compose with ``&`` and ``|``; calling one gives its dense
``(T, S)`` tensor. A model's attention layer holds one Mask instead of a window int, e.g.

* ``Causal()``: GPT; ``SlidingWindow(4096)``: Mistral (``q - w < k <= q``);
* ``Chunked(8192)``: Llama 4's local layers: a query sees the earlier keys of its own chunk
  (``k // c == q // c``, ``k <= q``; transformers' ``chunked_causal_mask_function``);
* ``SlidingWindow(w) | Sinks(4)``: a window that keeps the first 4 tokens visible
  (StreamingLLM); ``GlobalTokens((0,))``: Longformer's global positions;
* ``Padding(attention_mask)``: the Hugging Face (B, S) 0/1 mask as a rule, ``(B, 1, T, S)``.

:data:`MASK_KINDS` registers the per-layer kinds a config can ask for (``"global"``,
``"sliding"``, ``"chunked"``): ``build(size, causal=True) -> Mask``. Masks hold no parameters
(``params`` is 0; the count test builds a model with each kind all the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from .._checks import check_flags, check_positive_int
from .._registry import Registry
from .masks import padding_mask, query_positions

__all__ = ["Mask", "Causal", "Full", "SlidingWindow", "Chunked", "Sinks", "GlobalTokens",
           "Padding", "MASK_KINDS", "layer_mask"]


class Mask:
    """A boolean attention rule on absolute positions; ``mask(T, S)`` is its ``(T, S)`` tensor."""

    def rule(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """``q`` ``(T, 1)`` query positions, ``k`` ``(1, S)`` key positions -> bool, True = attend."""
        raise NotImplementedError

    def __call__(self, T: int, S: int | None = None, *, device=None) -> torch.Tensor:
        S = T if S is None else S
        check_positive_int(T, "T")
        check_positive_int(S, "S")
        q = query_positions(T, S, device=device)[:, None]  # (T, 1); checks S >= T
        k = torch.arange(S, device=device)[None, :]  # (1, S)
        return self.rule(q, k)  # (T, S), or (B, 1, T, S) with a Padding in it

    def simplify(self, S: int) -> "Mask":
        """An equal mask for ``S`` keys in its cheapest form (a window covering every key is
        :class:`Causal`, so attention can run as ``is_causal`` without a tensor)."""
        return self

    def mean_keys(self, T: int) -> float:
        """Keys a query sees on average over a sequence of ``T`` (FLOPs of ``QK^T``)."""
        return float(self(T).sum()) / T

    def kept_keys(self, S: int) -> int:
        """Most keys a decoding query can still reach after ``S`` tokens (KV-cache size)."""
        return S

    def __and__(self, other: "Mask") -> "Mask":
        return _And(self, _as_mask(other))

    def __or__(self, other: "Mask") -> "Mask":
        return _Or(self, _as_mask(other))


def _as_mask(m) -> Mask:
    if not isinstance(m, Mask):
        raise TypeError(f"masks compose with other Mask objects, got {type(m).__name__}; wrap a "
                        "HF attention_mask in Padding(...)")
    return m


@dataclass(frozen=True)
class _And(Mask):
    a: Mask
    b: Mask

    def rule(self, q, k):
        return self.a.rule(q, k) & self.b.rule(q, k)

    def simplify(self, S):
        return _And(self.a.simplify(S), self.b.simplify(S))


@dataclass(frozen=True)
class _Or(Mask):
    a: Mask
    b: Mask

    def rule(self, q, k):
        return self.a.rule(q, k) | self.b.rule(q, k)

    def simplify(self, S):
        return _Or(self.a.simplify(S), self.b.simplify(S))


@dataclass(frozen=True)
class Causal(Mask):
    """``k <= q``: every earlier key and the query's own."""

    def rule(self, q, k):
        return k <= q

    def mean_keys(self, T):
        return (T + 1) / 2


@dataclass(frozen=True)
class Full(Mask):
    """Every key (bidirectional attention)."""

    def rule(self, q, k):
        return (q >= 0) | (k >= 0)

    def mean_keys(self, T):
        return float(T)


@dataclass(frozen=True)
class SlidingWindow(Mask):
    """The ``window`` most recent keys, the query's own included (``|q - k| < window`` if not
    causal); as :func:`llmviz.attention.masks.sliding_window_mask`."""

    window: int
    causal: bool = True

    def __post_init__(self):
        check_flags(causal=self.causal)
        check_positive_int(self.window, "window")

    def rule(self, q, k):
        d = q - k
        return (d >= 0) & (d < self.window) if self.causal else d.abs() < self.window

    def simplify(self, S):
        if self.window >= S:
            return Causal() if self.causal else Full()
        return self

    def mean_keys(self, T):
        if not self.causal:
            return super().mean_keys(T)
        return sum(min(t + 1, self.window) for t in range(T)) / T

    def kept_keys(self, S):
        return min(S, self.window)


@dataclass(frozen=True)
class Chunked(Mask):
    """Llama 4's chunked local attention: a query sees the keys of its own ``chunk``-sized
    block (``q // chunk == k // chunk``), only the earlier ones when causal."""

    chunk: int
    causal: bool = True

    def __post_init__(self):
        check_positive_int(self.chunk, "chunk")

    def rule(self, q, k):
        same = torch.div(q, self.chunk, rounding_mode="floor") == torch.div(
            k, self.chunk, rounding_mode="floor")
        return same & (k <= q) if self.causal else same

    def simplify(self, S):
        if self.chunk >= S:
            return Causal() if self.causal else Full()
        return self

    def mean_keys(self, T):
        if not self.causal:
            return super().mean_keys(T)
        return sum(t % self.chunk + 1 for t in range(T)) / T

    def kept_keys(self, S):
        return min(S, self.chunk)


@dataclass(frozen=True)
class Sinks(Mask):
    """The first ``n`` keys (attention sinks, Xiao et al. 2023); OR it into a local mask."""

    n: int

    def __post_init__(self):
        check_positive_int(self.n, "n", allow_zero=True)

    def rule(self, q, k):
        return (k < self.n) & (k <= q)


@dataclass(frozen=True)
class GlobalTokens(Mask):
    """Global positions (Longformer, BigBird): they see every key and every query sees them;
    causal unless ``causal=False``."""

    positions: tuple[int, ...]
    causal: bool = True

    def __init__(self, positions: int | Sequence[int], causal: bool = True):
        check_flags(causal=causal)
        if isinstance(positions, int) and not isinstance(positions, bool):
            check_positive_int(positions, "positions", allow_zero=True)
            positions = tuple(range(positions))
        object.__setattr__(self, "positions", tuple(int(p) for p in positions))
        object.__setattr__(self, "causal", causal)

    def rule(self, q, k):
        g = torch.tensor(self.positions, dtype=q.dtype, device=q.device)
        hit = (k[..., None] == g).any(-1) | (q[..., None] == g).any(-1)
        return hit & (k <= q) if self.causal else hit


class Padding(Mask):
    """A Hugging Face ``attention_mask`` ``(B, S)`` (1 = keep) as a rule: ``(B, 1, T, S)``."""

    def __init__(self, attention_mask: torch.Tensor):
        self.keep = padding_mask(attention_mask)  # (B, 1, 1, S), checked

    def rule(self, q, k):
        if k.shape[-1] != self.keep.shape[-1]:
            raise ValueError(f"the padding mask covers {self.keep.shape[-1]} keys, asked for "
                             f"{k.shape[-1]}; give it cached + new tokens")
        return self.keep & (k >= 0)

    def __call__(self, T, S=None, *, device=None):
        S = T if S is None else S
        q = query_positions(T, S, device=device)[:, None]
        return self.rule(q, torch.arange(S, device=device)[None, :]).expand(-1, -1, T, -1)


#: The registry of per-layer mask kinds (``ModelConfig.local_attention`` and global layers):
#: ``build(size, causal=True) -> Mask``; ``local`` marks the kinds that take a size.
MASK_KINDS = Registry("mask kind")
MASK_KINDS.register("global", build=lambda size=None, causal=True: Causal() if causal else Full(),
                    params=lambda *a, **k: 0, summary="every earlier key", local=False)
MASK_KINDS.register("sliding", build=lambda size, causal=True: SlidingWindow(size, causal),
                    params=lambda *a, **k: 0, summary="the last `size` keys (Mistral, Gemma)",
                    local=True)
MASK_KINDS.register("chunked", build=lambda size, causal=True: Chunked(size, causal),
                    params=lambda *a, **k: 0, summary="the query's own block of `size` (Llama 4)",
                    local=True)


def layer_mask(kind: str, size: int | None = None, *, causal: bool = True) -> Mask:
    """The mask of one layer: ``kind`` from :data:`MASK_KINDS`, ``size`` its window or chunk
    (None means a global layer whatever ``kind``)."""
    entry = MASK_KINDS.kind(kind)
    if size is None or not entry.info["local"]:
        return MASK_KINDS["global"].build(causal=causal)
    return entry.build(size, causal=causal)
