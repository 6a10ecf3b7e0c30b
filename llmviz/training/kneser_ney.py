"""Interpolated modified Kneser-Ney for token streams: the strongest count baseline of the book.

:class:`KneserNey` has the interface of :class:`llmviz.training.ngram.ByteNgram` (``fit``, then
``nll(tokens, targets)``) and the smoothing Chen & Goodman call *interpolated modified
Kneser-Ney* ("An empirical study of smoothing techniques for language modeling", technical
report TR-10-98, 1998; Computer Speech & Language 13, 1999):

* the highest order counts n-grams; every lower order counts *continuations*, the number of
  distinct tokens seen just before the n-gram (a byte that follows many different contexts is a
  likelier guess in a new one than a byte that is frequent only inside one phrase);
* each order subtracts one of three discounts, D1, D2 or D3+, by whether a count is 1, 2 or
  at least 3, estimated from that order's count-of-counts n_k:
  Y = n1 / (n1 + 2 n2), D_k = k - (k + 1) Y n_{k+1} / n_k;
* the freed mass of a context, (D1 N1 + D2 N2 + D3+ N3+) / total, goes to the next shorter
  context, down to the uniform distribution over the vocabulary. An order whose context was
  never seen hands on everything.

A target with fewer tokens before it than the model reads uses the orders its context reaches.
With ``window`` in :meth:`KneserNey.nll`, a target sees only the tokens of its own block of
``window`` positions: the context a model reading non-overlapping windows of that length has.

:func:`choose_kn_order` picks the order on a held-out part of the *training* text;
:func:`best_ngram` scores the book's two byte n-grams (this one and the absolute-discounting
:class:`ByteNgram`), each with the order chosen on training text, and returns the stronger.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .._checks import check_positive_int, check_real
from ._counts import MAX_KEY_BITS as _MAX_KEY_BITS  # shared with ByteNgram
from ._counts import as_stream as _stream
from ._counts import gram_keys as _grams
from ._counts import lookup as _at

__all__ = ["KneserNey", "choose_kn_order", "NgramBaseline", "best_ngram"]


def _discounts(counts: np.ndarray) -> np.ndarray:
    """(D1, D2, D3+) from the count-of-counts of ``counts`` (Chen & Goodman's estimates).

    Where a count-of-counts needed is zero, or an estimate falls outside (0, k) (tiny or nearly
    deterministic streams, where a zero discount would give unseen tokens probability 0), Ney's
    single discount Y = n1 / (n1 + 2 n2) is used for all three, or 0.5 where Y is undefined."""
    n = [int((counts == k).sum()) for k in (1, 2, 3, 4)]
    y = n[0] / (n[0] + 2 * n[1]) if n[0] > 0 else 0.5
    if min(n) > 0:
        d = np.array([k - (k + 1) * y * n[k] / n[k - 1] for k in (1, 2, 3)])
        if np.all((d > 0) & (d < [1, 2, 3])):
            return d
    return np.array([y, y, y])


@dataclass
class _Level:
    """One order m: counts of m-grams (raw at the top order, continuations below) by context."""

    gram_keys: np.ndarray
    gram_counts: np.ndarray
    ctx_keys: np.ndarray
    ctx_totals: np.ndarray  # sum of the counts after the context
    ctx_freed: np.ndarray  # D1 N1 + D2 N2 + D3+ N3+ of the context
    discounts: np.ndarray  # (D1, D2, D3+)


def _level(keys: np.ndarray, counts: np.ndarray, vocab_size: int) -> _Level:
    d = _discounts(counts)
    taken = d[np.minimum(counts, 3) - 1]
    ctx, first = np.unique(keys // vocab_size, return_index=True)
    return _Level(keys, counts, ctx, np.add.reduceat(counts, first).astype(np.float64),
                  np.add.reduceat(taken, first), d)


@dataclass
class KneserNey:
    """Interpolated modified Kneser-Ney n-gram model over ``vocab_size`` ids.

    Args:
        order: n, the tokens in the longest n-gram (a context of ``order - 1`` tokens); 1 is a
            (discounted) unigram model interpolated with the uniform distribution.
        vocab_size: token ids lie in ``[0, vocab_size)`` (256 for bytes; orders up to 7).
    """

    order: int = 5
    vocab_size: int = 256
    _levels: list[_Level] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        check_positive_int(self.order, "order")
        check_positive_int(self.vocab_size, "vocab_size")
        if self.order * np.log2(self.vocab_size) > _MAX_KEY_BITS:
            top = int(_MAX_KEY_BITS // np.log2(self.vocab_size))
            raise ValueError(f"order {self.order} with vocab_size {self.vocab_size} overflows the "
                             f"64-bit n-gram keys; use order <= {top}")

    @property
    def fitted(self) -> bool:
        return bool(self._levels)

    @property
    def discounts(self) -> list[tuple[float, float, float]]:
        """(D1, D2, D3+) of each order, 1 to ``order``."""
        return [tuple(float(x) for x in lv.discounts) for lv in self._levels]

    def fit(self, tokens: Any) -> KneserNey:
        """Count every n-gram of ``tokens`` (a 1-D stream of ids); returns ``self``."""
        stream = _stream(tokens, self.vocab_size, "tokens")
        if len(stream) < self.order:
            raise ValueError(f"tokens has {len(stream)} ids, fewer than order={self.order}; fit "
                             "on a longer stream")
        V = self.vocab_size
        keys, counts = np.unique(_grams(stream, self.order, V), return_counts=True)
        levels = [_level(keys, counts, V)]
        for m in range(self.order - 1, 0, -1):
            # continuation count of an m-gram: distinct tokens seen before it
            above = np.unique(_grams(stream, m + 1, V))
            keys, counts = np.unique(above % V ** m, return_counts=True)
            levels.append(_level(keys, counts, V))
        self._levels = levels[::-1]  # levels[m - 1] is order m
        return self

    def nll(self, tokens: Any, targets: Any = None, *, window: int | None = None) -> np.ndarray:
        """Negative log-likelihood (nats) of ``tokens[j]`` given up to ``order - 1`` tokens before.

        Args:
            tokens: 1-D stream of ids (the text being scored, with its context).
            targets: indices j into ``tokens`` to score (default: every j >= 1).
            window: if given, target j reads only tokens from ``j // window * window`` on (the
                context of a model fed non-overlapping windows of ``window`` tokens).

        Returns:
            float64 array, one loss per target.
        """
        if not self.fitted:
            raise ValueError("this KneserNey is not fitted yet; call .fit(training_tokens) first")
        stream = _stream(tokens, self.vocab_size, "tokens")
        if window is not None:
            check_positive_int(window, "window")
        if targets is None:
            j = np.arange(1, len(stream), dtype=np.int64)
        else:
            j = np.asarray(targets.cpu() if isinstance(targets, torch.Tensor) else targets)
            if j.ndim != 1 or (j.size and not np.issubdtype(j.dtype, np.integer)):
                raise TypeError(f"targets must be a 1-D array of integer indices, got {j!r:.80}")
            j = j.astype(np.int64)
            if j.size and (j.min() < 0 or j.max() >= len(stream)):
                raise ValueError(f"targets must index tokens (0 <= j < {len(stream)}), got range "
                                 f"[{j.min()}, {j.max()}]")
        V = self.vocab_size
        start = np.zeros_like(j) if window is None else j // window * window
        word = stream[j]
        prob = np.full(len(j), 1.0 / V)
        ctx = np.zeros(len(j), dtype=np.int64)
        for m, lv in enumerate(self._levels, start=1):
            c = m - 1  # context tokens at this order
            has = j - c >= start
            if c:
                ctx = np.where(has, ctx + stream[np.maximum(j - c, 0)] * V ** (c - 1), ctx)
            total = _at(lv.ctx_keys, lv.ctx_totals, ctx)
            seen = has & (total > 0)
            n = _at(lv.gram_keys, lv.gram_counts, ctx * V + word)
            kept = np.where(n > 0, n - lv.discounts[np.clip(n, 1, 3) - 1], 0.0)
            freed = _at(lv.ctx_keys, lv.ctx_freed, ctx)
            safe = np.where(seen, total, 1.0)
            prob = np.where(seen, (kept + freed * prob) / safe, prob)
        return -np.log(prob)


def choose_kn_order(tokens: Any, orders: Any = range(1, 8), *, holdout: float = 0.1,
                    vocab_size: int = 256) -> tuple[int, dict[int, float]]:
    """The order with the lowest loss on the last ``holdout`` of ``tokens`` when fitted on the rest.

    Returns ``(best_order, {order: mean nll on the held-out part})``; fit the final model on all
    of ``tokens`` with the order returned.
    """
    stream = _stream(tokens, vocab_size, "tokens")
    check_real(holdout, "holdout")
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must lie strictly between 0 and 1, got {holdout}")
    orders = [check_positive_int(o, "each order") for o in orders]
    if not orders:
        raise ValueError("orders is empty; pass e.g. range(1, 8)")
    cut = int(len(stream) * (1 - holdout))
    if cut < max(orders) or len(stream) - cut < 2:
        raise ValueError(f"tokens ({len(stream)} ids) is too short to hold out {holdout:.0%} for "
                         f"orders up to {max(orders)}")
    fit_part, held = stream[:cut], stream[cut:]
    losses = {o: float(KneserNey(o, vocab_size).fit(fit_part).nll(held).mean()) for o in orders}
    return min(losses, key=losses.__getitem__), losses


@dataclass(frozen=True)
class NgramBaseline:
    """A byte n-gram scored on a model's targets: ``name`` (smoothing and order, for the page),
    ``loss`` (mean nats per target), ``per_target`` and every candidate's mean loss."""

    name: str
    order: int
    loss: float
    per_target: np.ndarray
    candidates: dict[str, float]


def best_ngram(train_tokens: Any, val_tokens: Any, targets: Any, *,
               window: int | None = None) -> NgramBaseline:
    """The stronger of the book's two byte n-grams on ``targets`` of ``val_tokens``.

    Candidates, each with its order chosen on a held-out tenth of ``train_tokens`` and then fitted
    on all of it: :class:`KneserNey` (orders 1-7, reading only the target's own ``window`` if
    given) and :class:`llmviz.training.ngram.ByteNgram` (orders 1-6, as it has always been
    scored). The evaluation text plays no part in either choice; the lower mean loss wins.
    """
    from .ngram import ByteNgram, choose_order

    kn_order, _ = choose_kn_order(train_tokens)
    ad_order, _ = choose_order(train_tokens)
    kn = KneserNey(kn_order).fit(train_tokens).nll(val_tokens, targets, window=window)
    ad = ByteNgram(ad_order).fit(train_tokens).nll(val_tokens, targets)
    named = {f"Kneser-Ney byte {kn_order}-gram": (kn_order, kn),
             f"absolute-discounting byte {ad_order}-gram": (ad_order, ad)}
    means = {k: float(v[1].mean()) for k, v in named.items()}
    name = min(means, key=means.__getitem__)
    return NgramBaseline(name, named[name][0], means[name], named[name][1], means)
