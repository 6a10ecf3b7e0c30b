"""Kneser-Ney baseline: normalisation, a brute-force reference, the unigram, order choice, input."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.training.kneser_ney import KneserNey, best_ngram, choose_kn_order


def _full_distribution(model: KneserNey, context: list[int]) -> np.ndarray:
    """p(w | context) for every w, scored as the last target of context + [w]."""
    streams = np.array([context + [w] for w in range(model.vocab_size)]).ravel()
    n = len(context) + 1
    targets = np.arange(model.vocab_size) * n + len(context)
    return np.exp(-model.nll(streams, targets, window=n))


def _reference(train: list[int], order: int, V: int):
    """Chen & Goodman's interpolated modified Kneser-Ney, written from the definitions with dicts."""
    raw = Counter(tuple(train[i:i + order]) for i in range(len(train) - order + 1))
    tables = {order: raw}
    for m in range(order - 1, 0, -1):
        above = {tuple(train[i:i + m + 1]) for i in range(len(train) - m)}
        tables[m] = Counter(g[1:] for g in above)  # distinct tokens seen before each m-gram

    def discounts(counts):
        n = [sum(1 for c in counts.values() if c == k) for k in (1, 2, 3, 4)]
        y = n[0] / (n[0] + 2 * n[1]) if n[0] > 0 else 0.5
        if min(n) == 0:
            return [y] * 3
        d = [k - (k + 1) * y * n[k] / n[k - 1] for k in (1, 2, 3)]
        return d if all(0 < x < k for x, k in zip(d, (1, 2, 3))) else [y] * 3

    ds = {m: discounts(t) for m, t in tables.items()}

    def prob(context: list[int], w: int) -> float:
        p = 1.0 / V
        for m in range(1, order + 1):
            if m - 1 > len(context):
                break
            h = tuple(context[len(context) - (m - 1):]) if m > 1 else ()
            follow = {g[-1]: c for g, c in tables[m].items() if g[:-1] == h}
            total = sum(follow.values())
            if total == 0:
                continue
            d = ds[m]
            freed = sum(d[min(c, 3) - 1] for c in follow.values())
            c = follow.get(w, 0)
            p = ((c - d[min(c, 3) - 1] if c else 0.0) + freed * p) / total
        return p

    return prob


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=8, max_size=80), st.integers(1, 4),
       st.lists(st.integers(0, 5), min_size=0, max_size=5))
def test_distribution_sums_to_one(train, order, context):
    model = KneserNey(order, vocab_size=6).fit(train)
    p = _full_distribution(model, context)
    assert np.all(p > 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-9)


def test_sums_to_one_on_bytes_for_random_contexts():
    rng = np.random.default_rng(0)
    train = rng.integers(0, 40, 5000)  # a skewed byte stream: ids >= 40 are never seen
    train[::7] = 32
    model = KneserNey(4).fit(train)
    for _ in range(5):
        context = rng.integers(0, 256, int(rng.integers(0, 6))).tolist()
        assert _full_distribution(model, context).sum() == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_matches_brute_force_reference(order):
    rng = np.random.default_rng(order)
    train = rng.choice(4, size=300, p=[0.5, 0.25, 0.15, 0.1]).tolist() + [0, 1, 2, 3] * 20
    model = KneserNey(order, vocab_size=5).fit(train)
    ref = _reference(train, order, 5)
    test = rng.integers(0, 5, 40).tolist()
    got = np.exp(-model.nll(test, np.arange(len(test))))
    want = [ref(test[max(0, j - order + 1):j], test[j]) for j in range(len(test))]
    assert got == pytest.approx(want, rel=1e-12)


def test_near_deterministic_stream_keeps_unseen_tokens_possible():
    model = KneserNey(3, vocab_size=4).fit([0, 1, 2, 3] * 50)  # n2 = n3 = 0 at every order
    assert all(0 < d <= k for ds in model.discounts for d, k in zip(ds, (1, 2, 3)))
    assert _full_distribution(model, [0, 1]).min() > 0


def test_order_one_is_the_unigram():
    train = [0, 0, 0, 0, 1, 1, 2, 0, 1, 0]
    model = KneserNey(1, vocab_size=4).fit(train)
    # the same probability of each token after any context
    p = np.array([_full_distribution(model, ctx) for ctx in ([], [1], [2, 3, 0])])
    assert np.allclose(p, p[0], atol=0)
    # counts 6, 3, 1, 0: discounted counts plus the freed mass spread uniformly
    d1, d2, d3 = model.discounts[0]
    freed = d1 + d3 + d3  # one token seen once, two seen 3+ times
    want = np.array([6 - d3, 3 - d3, 1 - d1, 0]) / 10 + freed / 10 / 4
    assert p[0] == pytest.approx(want, abs=1e-12)
    assert p[0][0] > p[0][1] > p[0][2] >= p[0][3] > 0  # D1 = 1 here: a single count keeps nothing


def test_window_hides_the_bytes_before_the_block():
    model = KneserNey(3, vocab_size=3).fit([0, 1, 2] * 30)
    stream = np.array([0, 1, 2, 0, 1, 2])
    free = model.nll(stream, [3])  # reads 1, 2 before it: 0 is almost certain
    blocked = model.nll(stream, [3], window=3)  # first of its block: no context
    alone = model.nll(np.array([0]), [0])
    assert free[0] < 0.05 and blocked[0] == pytest.approx(alone[0])


def test_continuation_counts_drive_the_lower_order():
    # 'b' is frequent but follows only 'a'; 'c' is rarer but follows three different tokens
    train = [0, 1] * 20 + [2, 3, 4, 3, 5, 3]
    model = KneserNey(2, vocab_size=6).fit(train)
    after_new = _full_distribution(model, [3])  # context 3 was followed only by 4 and 5
    assert after_new[3] > after_new[1]


def test_choose_order_prefers_the_true_order():
    rng = np.random.default_rng(3)
    # a second-order source: the next token is a function of the two before it (plus noise)
    stream = [0, 1]
    for _ in range(6000):
        nxt = (stream[-1] + 2 * stream[-2]) % 5 if rng.random() < 0.9 else int(rng.integers(5))
        stream.append(nxt)
    best, losses = choose_kn_order(stream, range(1, 6), vocab_size=5)
    # orders 1 and 2 see no structure (about ln 5 nats); 3 sees all of it; 4, 5 only dilute it
    assert best == 3 and losses[3] < min(losses[1], losses[2]) - 0.5
    assert all(math.isfinite(v) for v in losses.values())


def test_best_ngram_names_the_stronger_and_reports_both():
    rng = np.random.default_rng(1)
    text = (b"the cat sat on the mat and the dog sat on the log. " * 300)
    noise = bytes(rng.integers(97, 123, 2000).astype(np.uint8))
    train = torch.tensor(list(text + noise))
    val = torch.tensor(list(text[:640]))
    targets = (torch.arange(10)[:, None] * 64 + torch.arange(1, 64)).flatten()
    b = best_ngram(train, val, targets, window=64)
    assert len(b.candidates) == 2 and b.loss == min(b.candidates.values())
    assert b.name in b.candidates and b.per_target.shape == (len(targets),)
    assert b.loss == pytest.approx(float(b.per_target.mean()))


def test_bad_input():
    with pytest.raises(ValueError, match="order"):
        KneserNey(0)
    with pytest.raises(ValueError, match="use order <= 7"):
        KneserNey(8)
    with pytest.raises(ValueError, match="not fitted"):
        KneserNey(2).nll([0, 1])
    with pytest.raises(ValueError, match="fewer than order=3"):
        KneserNey(3).fit([1, 2])
    with pytest.raises(ValueError, match="outside"):
        KneserNey(2, vocab_size=4).fit([0, 1, 7])
    with pytest.raises(TypeError, match="integer token ids"):
        KneserNey(2).fit(torch.tensor([0.5, 1.0, 2.0]))
    with pytest.raises(TypeError, match="1-D integer tensor"):
        KneserNey(2).fit("abc")
    model = KneserNey(2, vocab_size=4).fit([0, 1, 2, 3] * 3)
    with pytest.raises(ValueError, match="targets must index"):
        model.nll([0, 1, 2], [5])
    with pytest.raises(TypeError, match="integer indices"):
        model.nll([0, 1, 2], [0.5])
    with pytest.raises(ValueError, match="window"):
        model.nll([0, 1, 2], [1], window=0)
    with pytest.raises(ValueError, match="holdout"):
        choose_kn_order([0, 1] * 50, holdout=1.5, vocab_size=2)
    with pytest.raises(ValueError, match="too short"):
        choose_kn_order([0, 1, 0], range(1, 5), vocab_size=2)
    with pytest.raises(ValueError, match="orders is empty"):
        choose_kn_order([0, 1] * 50, [], vocab_size=2)


def test_log_is_finite_for_unseen_tokens():
    model = KneserNey(3).fit(b"aaaa bbbb aaaa")
    assert math.isfinite(float(model.nll(b"zzzz").max()))
