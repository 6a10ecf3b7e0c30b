"""Sampling filters: properties (kept mass, never an empty row, composition) and HF parity."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.model.sampling import (
    apply_temperature,
    filtered_probs,
    greedy,
    min_p_filter,
    sample,
    top_k_filter,
    top_p_filter,
)

hf_gen = pytest.importorskip("transformers.generation.logits_process")


def _logits(gen, B=6, V=50, spread=3.0):
    return torch.randn(B, V, generator=gen) * spread


def _ids(B):
    return torch.zeros(B, 1, dtype=torch.long)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.99])
def test_top_p_matches_hf(gen, p, device):
    logits = _logits(gen).to(device)
    ours = top_p_filter(logits, p)
    ref = hf_gen.TopPLogitsWarper(p)(_ids(6).to(device), logits.clone())
    assert torch.equal(torch.isinf(ours), torch.isinf(ref))


@pytest.mark.parametrize("k", [1, 5, 49, 50, 80])
def test_top_k_matches_hf(gen, k, device):
    logits = _logits(gen).to(device)
    ref = hf_gen.TopKLogitsWarper(k)(_ids(6).to(device), logits.clone())
    assert torch.equal(top_k_filter(logits, k), ref)


@pytest.mark.parametrize("m", [0.0, 0.05, 0.3, 1.0])
def test_min_p_matches_hf(gen, m, device):
    logits = _logits(gen).to(device)
    ref = hf_gen.MinPLogitsWarper(m)(_ids(6).to(device), logits.clone())
    assert torch.equal(torch.isinf(min_p_filter(logits, m)), torch.isinf(ref))


@pytest.mark.parametrize("t", [0.3, 1.0, 2.5])
def test_temperature_matches_hf(gen, t):
    logits = _logits(gen)
    ref = hf_gen.TemperatureLogitsWarper(t)(_ids(6), logits.clone())
    torch.testing.assert_close(apply_temperature(logits, t), ref)


def test_composition_matches_hf_order(gen):
    logits = _logits(gen)
    procs = [
        hf_gen.TemperatureLogitsWarper(0.7),
        hf_gen.TopKLogitsWarper(10),
        hf_gen.TopPLogitsWarper(0.8),
        hf_gen.MinPLogitsWarper(0.1),
    ]
    ref = logits.clone()
    for proc in procs:
        ref = proc(_ids(6), ref)
    ours = filtered_probs(logits, temperature=0.7, top_k=10, top_p=0.8, min_p=0.1)
    torch.testing.assert_close(ours, torch.softmax(ref, -1))


@settings(max_examples=60, deadline=None)
@given(
    p=st.floats(0.01, 1.0),
    seed=st.integers(0, 10_000),
    spread=st.sampled_from([0.1, 1.0, 5.0, 30.0]),
)
def test_top_p_is_smallest_set_reaching_p(p, seed, spread):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(4, 40, generator=g) * spread
    probs = torch.softmax(logits, -1)
    kept = torch.isfinite(top_p_filter(logits, p))
    for row in range(4):
        mass = probs[row][kept[row]].sum()
        assert kept[row].any()
        assert mass >= p - 1e-6  # the crossing token is included
        # removing the least likely kept token would drop below p (smallest such set)
        smallest = probs[row][kept[row]].min()
        if kept[row].sum() > 1:
            assert mass - smallest < p + 1e-6
        # every kept token is at least as likely as every removed one
        if (~kept[row]).any():
            assert probs[row][kept[row]].min() >= probs[row][~kept[row]].max()


def test_top_p_keeps_dominant_token_alone():
    logits = torch.tensor([[10.0, 0.0, 0.0, 0.0]])
    kept = torch.isfinite(top_p_filter(logits, 0.5))
    assert kept.tolist() == [[True, False, False, False]]


def test_filters_never_empty_a_row():
    logits = torch.tensor([[0.0, 0.0, 0.0], [5.0, -5.0, 1.0]])
    for out in (top_p_filter(logits, 1e-9), min_p_filter(logits, 1.0), top_k_filter(logits, 1)):
        assert torch.isfinite(out).any(dim=-1).all()
    probs = filtered_probs(logits, top_k=1, top_p=1e-6, min_p=1.0)
    assert not torch.isnan(probs).any()


def test_top_k_and_top_p_compose():
    logits = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.1]]))
    both = filtered_probs(logits, top_k=2, top_p=0.95)
    only_p = filtered_probs(logits, top_p=0.95)
    assert (both > 0).sum() == 2  # top-k is not ignored when top-p is set
    assert (only_p > 0).sum() == 4


def test_sample_greedy_and_seeded(gen):
    logits = _logits(gen)
    assert torch.equal(sample(logits, temperature=0), greedy(logits))
    a = sample(logits, top_p=0.9, generator=torch.Generator().manual_seed(3))
    b = sample(logits, top_p=0.9, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    kept = torch.isfinite(top_p_filter(logits, 0.9))
    assert kept.gather(-1, a[:, None]).all()


def test_sample_frequencies_follow_filtered_distribution():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    g = torch.Generator().manual_seed(0)
    draws = sample(logits.expand(20000, 4), top_p=0.8, generator=g)
    freq = torch.bincount(draws, minlength=4).float() / draws.numel()
    expected = filtered_probs(logits, top_p=0.8)
    assert freq[3] == 0 and freq[2] == 0
    torch.testing.assert_close(freq, expected, atol=0.02, rtol=0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda x: apply_temperature(x, 0.0), "temperature must be > 0"),
        (lambda x: top_k_filter(x, 0), "top_k must be a positive int, got 0"),
        (lambda x: top_p_filter(x, 1.5), r"top_p must be in \(0, 1\]"),
        (lambda x: top_p_filter(x, 0.0), r"top_p must be in \(0, 1\]"),
        (lambda x: min_p_filter(x, -0.1), r"min_p must be in \[0, 1\]"),
    ],
)
def test_bad_options_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call(torch.zeros(2, 5))


def test_integer_logits_rejected():
    with pytest.raises(TypeError, match="floating-point"):
        sample(torch.zeros(2, 5, dtype=torch.long))


def test_top_p_at_exactly_the_top_probability_keeps_one_token():
    # p equal to the top token's probability is the boundary case: the exclusive cumulative
    # mass in front of the second token is exactly p, so it must go. cumsum(probs) - probs
    # rounds and kept two tokens for about a third of random rows; this walks 2000 of them.
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2000, 64, generator=g) * 3.0
    for row in range(logits.shape[0]):
        top = float(torch.softmax(logits[row].float(), dim=-1).max())
        kept = torch.isfinite(top_p_filter(logits[row], top))
        assert int(kept.sum()) == 1, (row, top)
