"""Byte n-gram baseline: probabilities sum to one, counts are exact, order choice, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.training.ngram import ByteNgram, choose_order


def _full_distribution(model: ByteNgram, context: list[int]) -> np.ndarray:
    """p(w | context) for every w, by scoring context + [w]."""
    out = []
    for w in range(model.vocab_size):
        stream = np.array(context + [w])
        out.append(math.exp(-model.nll(stream, [len(context)])[0]))
    return np.array(out)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=8, max_size=60), st.integers(1, 4),
       st.floats(0.05, 0.95), st.lists(st.integers(0, 5), min_size=0, max_size=4))
def test_distribution_sums_to_one(train, order, discount, context):
    model = ByteNgram(order, discount, vocab_size=6).fit(train)
    p = _full_distribution(model, context)
    assert np.all(p > 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-9)


def test_unigram_is_add_one():
    stream = [0, 0, 0, 1]
    model = ByteNgram(1, vocab_size=3).fit(stream)
    p = np.exp(-model.nll(np.array([2, 0, 1, 2])))  # targets 0, 1, 2 (index 1..3)
    assert p == pytest.approx([4 / 7, 2 / 7, 1 / 7])


def test_bigram_discounting_by_hand():
    # after "a" (0): b (1) twice, c (2) once; 2 distinct followers, 3 in all
    stream = [0, 1, 0, 1, 0, 2]
    D = 0.5
    model = ByteNgram(2, D, vocab_size=3).fit(stream)
    uni = (np.bincount(stream, minlength=3) + 1) / (len(stream) + 3)
    expected_b = (2 - D + D * 2 * uni[1]) / 3
    expected_unseen = D * 2 * uni[0] / 3
    got = np.exp(-model.nll(np.array([0, 1, 0, 0]), [1, 3]))
    assert got == pytest.approx([expected_b, expected_unseen])


def test_unseen_context_falls_back_to_shorter_order():
    stream = [0, 1, 2, 0, 1, 2]
    tri = ByteNgram(3, vocab_size=4).fit(stream)
    bi = ByteNgram(2, vocab_size=4).fit(stream)
    # context (3, 1) never occurs: the trigram model falls back to the bigram's p(. | 1)
    assert tri.nll(np.array([3, 1, 2]), [2]) == pytest.approx(bi.nll(np.array([3, 1, 2]), [2]))


def test_longer_context_helps_on_repetitive_text():
    rng = np.random.default_rng(0)
    phrase = rng.integers(0, 256, size=40)
    stream = np.tile(phrase, 50)
    losses = [ByteNgram(o).fit(stream[:1500]).nll(stream[1500:]).mean() for o in (1, 2, 4)]
    assert losses[0] > losses[1] > losses[2]


def test_inputs_accepted_in_every_form():
    data = b"the cat sat on the mat; the cat sat."
    a = ByteNgram(3).fit(data).nll(torch.tensor(list(data)))
    b = ByteNgram(3).fit(torch.tensor(list(data))).nll(np.frombuffer(data, np.uint8))
    assert np.allclose(a, b)
    assert a.shape == (len(data) - 1,)


def test_choose_order_picks_the_lowest_loss():
    rng = np.random.default_rng(1)
    stream = np.tile(rng.integers(0, 256, size=30), 40)
    best, losses = choose_order(stream, range(1, 5))
    assert best == min(losses, key=losses.get)
    assert set(losses) == {1, 2, 3, 4}


def test_bad_input():
    with pytest.raises(ValueError, match="discount must lie strictly between 0 and 1"):
        ByteNgram(3, 1.0)
    with pytest.raises(ValueError, match="overflows the 64-bit"):
        ByteNgram(9)
    with pytest.raises(TypeError, match="order must be an int"):
        ByteNgram(2.5)
    with pytest.raises(ValueError, match="not fitted yet"):
        ByteNgram(2).nll([1, 2, 3])
    with pytest.raises(ValueError, match="token id 300, outside"):
        ByteNgram(2).fit([1, 2, 300])
    with pytest.raises(TypeError, match="integer token ids"):
        ByteNgram(2).fit(torch.rand(10))
    with pytest.raises(ValueError, match="fewer than order=4"):
        ByteNgram(4).fit([1, 2])
    model = ByteNgram(2).fit([1, 2, 3, 4])
    with pytest.raises(ValueError, match="targets must index tokens"):
        model.nll([1, 2, 3], [5])
    with pytest.raises(TypeError, match="targets must be a 1-D array of integer"):
        model.nll([1, 2, 3], [0.5])
    with pytest.raises(TypeError, match="1-D integer tensor"):
        ByteNgram(2).fit("text")
    with pytest.raises(ValueError, match="holdout must lie strictly"):
        choose_order([1, 2, 3] * 10, holdout=1.5)
    with pytest.raises(ValueError, match="too short"):
        choose_order([1, 2, 3], range(1, 5))
