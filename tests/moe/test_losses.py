"""Balancing loss at its minimum for uniform routing, larger when skewed; router z-loss."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.moe import expert_fractions, load_balancing_loss, route, router_z_loss


def _uniform(E: int, k: int, reps: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Every expert chosen equally often, every probability 1/E."""
    N = E * reps
    indices = (torch.arange(N)[:, None] + torch.arange(k)[None]) % E  # cyclic: even load
    return torch.full((N, E), 1.0 / E), indices


@settings(max_examples=40, deadline=None)
@given(E=st.integers(1, 16), data=st.data())
def test_uniform_routing_gives_one_switch_form_and_k_tokens_form(E, data):
    k = data.draw(st.integers(1, E))
    probs, indices = _uniform(E, k)
    torch.testing.assert_close(load_balancing_loss(probs, indices), torch.tensor(1.0))
    torch.testing.assert_close(load_balancing_loss(probs, indices, form="tokens"), torch.tensor(float(k)))


@settings(max_examples=40, deadline=None)
@given(E=st.integers(2, 10), seed=st.integers(0, 10_000))
def test_even_choices_give_one_whatever_the_probabilities(E, seed):
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(E * 3, E, generator=g) * 3, dim=-1)
    _, indices = _uniform(E, 1, reps=3)
    torch.testing.assert_close(load_balancing_loss(probs, indices), torch.tensor(1.0))


def test_collapsed_routing_costs_more(gen):
    E = 8
    logits = torch.randn(64, E, generator=gen)
    logits[:, 0] += 6.0  # nearly every token prefers expert 0
    r = route(logits, 1)
    loss = load_balancing_loss(r.probs, r.indices)
    assert loss > 4.0  # the fully collapsed limit is E = 8
    assert loss <= E


def test_fractions_sum_to_one_or_k(gen):
    r = route(torch.randn(20, 6, generator=gen), 3)
    torch.testing.assert_close(expert_fractions(r.indices, 6).sum(), torch.tensor(1.0))
    torch.testing.assert_close(expert_fractions(r.indices, 6, form="tokens").sum(), torch.tensor(3.0))


def test_mask_excludes_tokens(gen):
    logits = torch.randn(10, 4, generator=gen)
    r = route(logits, 2)
    mask = torch.zeros(10, dtype=torch.bool)
    mask[:6] = True
    r6 = route(logits[:6], 2)
    torch.testing.assert_close(load_balancing_loss(r.probs, r.indices, mask=mask),
                               load_balancing_loss(r6.probs, r6.indices))
    torch.testing.assert_close(router_z_loss(logits, mask=mask), router_z_loss(logits[:6]))


def test_balancing_loss_gradient_flows_through_probs(gen):
    logits = torch.randn(16, 4, generator=gen, requires_grad=True)
    r = route(logits, 2)
    load_balancing_loss(r.probs, r.indices).backward()
    assert logits.grad.abs().sum() > 0


def test_router_z_loss_value(gen):
    logits = torch.randn(7, 5, generator=gen)
    want = torch.logsumexp(logits, -1).pow(2).mean()
    torch.testing.assert_close(router_z_loss(logits), want)
    # logits all equal to -log E put log Z at 0: the z-loss minimum
    flat = torch.full((3, 5), -torch.log(torch.tensor(5.0)).item())
    torch.testing.assert_close(router_z_loss(flat), torch.tensor(0.0), atol=1e-12, rtol=0)


@settings(max_examples=60, deadline=None)
@given(E=st.integers(1, 12), seed=st.integers(0, 10_000), uniform=st.booleans())
def test_with_probs_equal_to_fractions_one_is_the_minimum(E, seed, uniform):
    """P = f turns the loss into E * sum f_i^2 >= 1 (Cauchy-Schwarz), equal only when uniform."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.ones(E) if uniform else torch.randint(0, 5, (E,), generator=g).float()
    if counts.sum() == 0:
        counts[0] = 1.0
    indices = torch.repeat_interleave(torch.arange(E), counts.long())[:, None]  # (N, 1)
    f = counts / counts.sum()
    probs = f.expand(indices.shape[0], E)  # every token's P equals the dispatch shares
    loss = load_balancing_loss(probs, indices)
    assert loss >= 1 - 1e-6
    if uniform:
        torch.testing.assert_close(loss, torch.tensor(1.0))
    elif not torch.allclose(f, torch.full((E,), 1.0 / E)):
        assert loss > 1 + 1e-6


def test_a_batch_can_score_below_one():
    """Not a bound per batch: both tokens take expert 1 as a weak second pick, so f calls it the
    busiest expert (1/2 of the picks) while its probability is near 0: E * sum f P is about 3/4."""
    logits = torch.tensor([[-1.3, -1.2, 6.1], [7.1, -0.2, -3.1]])
    r = route(logits, 2)
    assert r.indices[:, 1].tolist() == [1, 1]  # the weak picks
    f = expert_fractions(r.indices, 3)
    torch.testing.assert_close(f, torch.tensor([0.25, 0.5, 0.25]))
    loss = load_balancing_loss(r.probs, r.indices)
    torch.testing.assert_close(loss, 3 * (f * r.probs.mean(0)).sum())
    assert 0.7 < loss < 0.8


# ----------------------------------------------------------------------------- load imbalance
def test_load_imbalance_bounds_and_route_counts():
    from llmviz.moe import expert_fractions, load_imbalance

    assert load_imbalance(torch.tensor([5, 5, 5, 5])) == 1.0  # even
    assert load_imbalance(torch.tensor([8.0, 0.0, 0.0, 0.0])) == 4.0  # one expert takes all: E
    assert load_imbalance(torch.tensor([3, 1])) == pytest.approx(1.5)
    idx = torch.tensor([[0], [0], [1], [2]])  # 4 tokens, top-1, 3 experts: shares 1/2, 1/4, 1/4
    shares = expert_fractions(idx, 3)
    assert load_imbalance(shares) == pytest.approx(0.5 / (1 / 3))
    assert load_imbalance(shares) == load_imbalance(shares * 40)  # counts or shares alike


@pytest.mark.parametrize(("load", "err", "match"), [
    ([1, 2], TypeError, "load"),
    (torch.zeros(2, 2), ValueError, "1"),
    (torch.tensor([1.0, -1.0]), ValueError, "non-negative"),
    (torch.tensor([1.0, float("nan")]), ValueError, "finite"),
    (torch.zeros(3), ValueError, "all zero"),
])
def test_load_imbalance_bad_input(load, err, match):
    from llmviz.moe import load_imbalance

    with pytest.raises(err, match=match):
        load_imbalance(load)
