"""A byte n-gram language model: the baseline a trained transformer must beat.

:class:`ByteNgram` counts every n-gram of a token stream (orders 1 to ``order``) and predicts
the next token by *interpolated absolute discounting*: at each context length the counts are
lowered by a fixed ``discount``, and the mass that frees is handed to the next shorter context,
down to an add-one unigram. It looks at most ``order - 1`` tokens back, so it uses no long
context at all: scored on the same targets at every evaluation length it gives one number, a
flat line against which a model's use of (or trouble with) longer inputs shows.

:func:`choose_order` picks the order on a held-out part of the *training* text, so the
evaluation text plays no part in fitting it.

Everything is counted with numpy on integer keys (a context of ``c`` tokens is the base-V number
its tokens spell), so fitting a few hundred thousand bytes takes well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .._checks import check_positive, check_positive_int, check_real
from ._counts import MAX_KEY_BITS as _MAX_KEY_BITS
from ._counts import as_stream as _as_stream
from ._counts import gram_keys as _keys
from ._counts import lookup as _lookup

__all__ = ["ByteNgram", "choose_order"]

@dataclass
class _Table:
    """Counts at one context length c: n-grams (c + 1 tokens) and their contexts."""

    gram_keys: np.ndarray  # sorted unique keys of (context, next token)
    gram_counts: np.ndarray
    ctx_keys: np.ndarray  # sorted unique context keys
    ctx_counts: np.ndarray  # times the context was followed by anything
    ctx_types: np.ndarray  # distinct tokens seen after the context


@dataclass
class ByteNgram:
    """Interpolated absolute-discounting n-gram model over a vocabulary of ``vocab_size`` ids.

    Args:
        order: n, the tokens in the longest n-gram (context of ``order - 1`` tokens); 1 is a
            unigram model.
        discount: absolute discount D in (0, 1), subtracted from every seen n-gram count.
        vocab_size: token ids lie in ``[0, vocab_size)`` (256 for bytes).

    Call :meth:`fit` on a training stream, then :meth:`nll` for per-target losses.
    """

    order: int = 4
    discount: float = 0.75
    vocab_size: int = 256
    _tables: list[_Table] = field(default_factory=list, init=False, repr=False)
    _unigram: np.ndarray | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        check_positive_int(self.order, "order")
        check_positive_int(self.vocab_size, "vocab_size")
        check_positive(self.discount, "discount")
        if not self.discount < 1:
            raise ValueError(
                f"discount must lie strictly between 0 and 1 (0.75 is usual), got {self.discount}"
            )
        if self.order * np.log2(self.vocab_size) > _MAX_KEY_BITS:
            top = int(_MAX_KEY_BITS // np.log2(self.vocab_size))
            raise ValueError(
                f"order {self.order} with vocab_size {self.vocab_size} overflows the 64-bit "
                f"n-gram keys; use order <= {top}"
            )

    @property
    def fitted(self) -> bool:
        return self._unigram is not None

    def fit(self, tokens: Any) -> ByteNgram:
        """Count every n-gram of ``tokens`` (a 1-D stream of ids); returns ``self``."""
        stream = _as_stream(tokens, self.vocab_size, "tokens")
        if len(stream) < self.order:
            raise ValueError(
                f"tokens has {len(stream)} ids, fewer than order={self.order}; fit on a longer "
                "stream"
            )
        counts = np.bincount(stream, minlength=self.vocab_size).astype(np.float64)
        self._unigram = (counts + 1.0) / (counts.sum() + self.vocab_size)  # add-one
        self._tables = []
        for c in range(1, self.order):
            grams, gram_counts = np.unique(_keys(stream, c + 1, self.vocab_size),
                                           return_counts=True)
            ctx_of_gram = grams // self.vocab_size
            ctx_keys, first, ctx_types = np.unique(ctx_of_gram, return_index=True,
                                                   return_counts=True)
            ctx_counts = np.add.reduceat(gram_counts, first)
            self._tables.append(_Table(grams, gram_counts, ctx_keys, ctx_counts, ctx_types))
        return self

    def nll(self, tokens: Any, targets: Any = None) -> np.ndarray:
        """Negative log-likelihood (nats) of ``tokens[j]`` given the ``order - 1`` before it.

        Args:
            tokens: 1-D stream of ids (the text being scored, with its context).
            targets: indices j into ``tokens`` to score (default: every j >= 1). A target with
                fewer than ``order - 1`` tokens before it uses the context it has.

        Returns:
            float64 array, one loss per target.
        """
        if not self.fitted:
            raise ValueError("this ByteNgram is not fitted yet; call .fit(training_tokens) first")
        stream = _as_stream(tokens, self.vocab_size, "tokens")
        if targets is None:
            j = np.arange(1, len(stream), dtype=np.int64)
        else:
            j = np.asarray(targets.cpu() if isinstance(targets, torch.Tensor) else targets)
            if j.ndim != 1 or (j.size and not np.issubdtype(j.dtype, np.integer)):
                raise TypeError(f"targets must be a 1-D array of integer indices, got {j!r:.80}")
            j = j.astype(np.int64)
            if j.size and (j.min() < 0 or j.max() >= len(stream)):
                raise ValueError(
                    f"targets must index tokens (0 <= j < {len(stream)}), got range "
                    f"[{j.min()}, {j.max()}]"
                )
        V, D = self.vocab_size, self.discount
        assert self._unigram is not None
        word = stream[j]
        prob = self._unigram[word]
        ctx = np.zeros(len(j), dtype=np.int64)
        for c, table in enumerate(self._tables, start=1):
            has = j - c >= 0  # targets with at least c tokens before them
            ctx = np.where(has, ctx + stream[np.maximum(j - c, 0)] * V ** (c - 1), ctx)
            n_ctx = _lookup(table.ctx_keys, table.ctx_counts, ctx).astype(np.float64)
            types = _lookup(table.ctx_keys, table.ctx_types, ctx).astype(np.float64)
            n_gram = _lookup(table.gram_keys, table.gram_counts, ctx * V + word)
            seen = has & (n_ctx > 0)
            safe = np.where(seen, n_ctx, 1.0)
            mixed = (np.maximum(n_gram - D, 0.0) + D * types * prob) / safe
            prob = np.where(seen, mixed, prob)
        return -np.log(prob)


def choose_order(tokens: Any, orders: Any = range(1, 7), *, holdout: float = 0.1,
                 discount: float = 0.75, vocab_size: int = 256) -> tuple[int, dict[int, float]]:
    """The order with the lowest loss on the last ``holdout`` of ``tokens`` when fitted on the rest.

    Returns ``(best_order, {order: mean nll on the held-out part})``. Fit the final model on
    all of ``tokens`` with the order returned.
    """
    stream = _as_stream(tokens, vocab_size, "tokens")
    check_real(holdout, "holdout")
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must lie strictly between 0 and 1, got {holdout}")
    orders = [check_positive_int(o, "each order") for o in orders]
    if not orders:
        raise ValueError("orders is empty; pass e.g. range(1, 7)")
    cut = int(len(stream) * (1 - holdout))
    if cut < max(orders) or len(stream) - cut < 2:
        raise ValueError(
            f"tokens ({len(stream)} ids) is too short to hold out {holdout:.0%} for orders up to "
            f"{max(orders)}"
        )
    fit_part, held = stream[:cut], stream[cut:]
    losses = {}
    for o in orders:
        model = ByteNgram(o, discount, vocab_size).fit(fit_part)
        losses[o] = float(model.nll(held).mean())
    best = min(losses, key=losses.__getitem__)
    return best, losses
