"""Router: top-k, renormalisation, sigmoid scores, choice bias, groups, bias balancing."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.moe import Router, balance_bias_update, route


@st.composite
def logits_and_k(draw):
    E = draw(st.integers(1, 12))
    k = draw(st.integers(1, E))
    N = draw(st.integers(1, 20))
    seed = draw(st.integers(0, 2**31 - 1))
    scale = draw(st.floats(0.01, 20.0))
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, E, generator=g, dtype=torch.float64) * scale, k


@settings(max_examples=60, deadline=None)
@given(logits_and_k(), st.sampled_from(["softmax", "sigmoid"]))
def test_renormalised_weights_sum_to_one_over_chosen_experts(lk, score):
    logits, k = lk
    r = route(logits, k, score=score)
    torch.testing.assert_close(r.weights.sum(-1), torch.ones(logits.shape[0], dtype=logits.dtype))
    assert (r.weights >= 0).all()
    # chosen experts are distinct and are the k best scores. Ranked by the score the router
    # ranks (as Hugging Face's routers do): sigmoid saturates to exactly 1.0 for logits above
    # about 37 in float64, and experts tied there may be chosen in any order.
    assert (r.indices.sort(-1).values.diff(dim=-1) > 0).all()
    scores = logits.softmax(-1) if score == "softmax" else logits.sigmoid()
    kth = scores.topk(k, dim=-1).values[:, -1:]
    assert (scores.gather(1, r.indices) >= kth).all()


@settings(max_examples=40, deadline=None)
@given(logits_and_k())
def test_softmax_renormalised_is_softmax_over_the_chosen_logits(lk):
    logits, k = lk
    r = route(logits, k)
    torch.testing.assert_close(r.weights, torch.softmax(logits.gather(1, r.indices), dim=-1))


def test_unnormalised_keeps_the_raw_probabilities(gen):
    logits = torch.randn(10, 8, generator=gen)
    r = route(logits, 2, normalize=False)
    torch.testing.assert_close(r.weights, torch.softmax(logits, -1).gather(1, r.indices))
    assert (r.weights.sum(-1) < 1).all()


def test_scaling_multiplies_the_weights(gen):
    logits = torch.randn(10, 8, generator=gen)
    a = route(logits, 3, score="sigmoid")
    b = route(logits, 3, score="sigmoid", scaling=2.5)
    torch.testing.assert_close(b.weights, 2.5 * a.weights)


def test_bias_changes_the_choice_but_not_the_weights(gen):
    logits = torch.randn(50, 8, generator=gen)
    bias = torch.zeros(8)
    bias[7] = 10.0  # expert 7 is always chosen
    r = route(logits, 2, score="sigmoid", bias=bias, normalize=False)
    assert (r.indices == 7).any(dim=-1).all()
    s = torch.sigmoid(logits)
    torch.testing.assert_close(r.weights, s.gather(1, r.indices))  # weights: unbiased scores


def test_group_limited_routing_stays_inside_the_best_groups(gen):
    logits = torch.randn(40, 16, generator=gen)
    r = route(logits, 4, score="sigmoid", n_groups=4, topk_groups=2)
    groups = r.indices // 4
    assert all(len(set(row.tolist())) <= 2 for row in groups)
    # the allowed groups are the two with the largest sum of their two best scores
    s = torch.sigmoid(logits).view(40, 4, 4)
    best = s.topk(2, -1).values.sum(-1).topk(2, -1).indices
    for row, allowed in zip(groups, best):
        assert set(row.tolist()) <= set(allowed.tolist())


def test_one_group_is_ordinary_routing(gen):
    logits = torch.randn(20, 8, generator=gen)
    a = route(logits, 3, score="sigmoid", n_groups=1, topk_groups=1)
    b = route(logits, 3, score="sigmoid")
    assert torch.equal(a.indices, b.indices)


def test_load_counts_every_assignment(gen):
    r = route(torch.randn(30, 6, generator=gen), 2)
    load = r.load()
    assert load.sum().item() == 60
    assert torch.equal(load, torch.bincount(r.indices.reshape(-1), minlength=6))


def test_bias_update_moves_against_the_load_error():
    bias = torch.zeros(4)
    new = balance_bias_update(bias, torch.tensor([10, 2, 4, 4]), 0.01)
    torch.testing.assert_close(new, torch.tensor([-0.01, 0.01, 0.01, 0.01]))
    # balanced load: sign(0) = 0, nothing moves
    torch.testing.assert_close(balance_bias_update(bias, torch.tensor([5, 5, 5, 5]), 0.01), bias)


def test_bias_balancing_evens_out_a_skewed_router(gen):
    torch.manual_seed(0)
    router = Router(16, 8, 2, score="sigmoid", bias_balancing=True, bias_rate=0.02)
    with torch.no_grad():
        router.weight[0] += 0.5  # expert 0 is favoured by most tokens
    x = torch.randn(512, 16, generator=gen) + 1.0
    first = router(x).load()
    for _ in range(300):
        router.update_bias(router(x).load())
    last = router(x).load()
    assert last.max() - last.min() < (first.max() - first.min()) / 2
    assert router.e_score_correction_bias[0] < 0


def test_router_without_bias_refuses_update():
    with pytest.raises(ValueError, match="bias_balancing=True"):
        Router(4, 4, 1).update_bias(torch.ones(4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_router_dtypes_and_devices(dtype, device):
    router = Router(8, 4, 2).to(device=device, dtype=dtype)
    r = router(torch.randn(3, 5, 8, device=device, dtype=dtype))
    assert r.weights.dtype == dtype and r.weights.device.type == device.type
    assert r.indices.shape == (15, 2)
    assert r.probs.dtype in (torch.float32, torch.float64)
