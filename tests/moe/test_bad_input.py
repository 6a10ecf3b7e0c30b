"""Bad input gets a clear error that names the values."""

from __future__ import annotations

import pytest
import torch

from llmviz.moe import (
    MoELayer,
    Router,
    balance_bias_update,
    combine,
    expert_capacity,
    fine_grained,
    load_balancing_loss,
    plan_dispatch,
    route,
    router_z_loss,
)


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(top_k=5), ValueError, r"top_k \(5\) must be <= n_experts \(4\)"),
        (dict(top_k=0), ValueError, "top_k must be a positive int"),
        (dict(top_k=1.5), TypeError, "top_k must be an int"),
        (dict(capacity_factor=0.0), ValueError, "capacity_factor must be positive"),
        (dict(capacity_factor=-1.0), ValueError, "capacity_factor must be positive"),
        (dict(capacity_factor="2"), TypeError, "capacity_factor must be a real number"),
        (dict(score="relu"), ValueError, "score='relu' is not supported"),
        (dict(n_groups=3, topk_groups=1), ValueError, r"divisible by n_groups \(3\)"),
        (dict(n_groups=2), ValueError, "go together"),
        (dict(n_groups=2, topk_groups=3), ValueError, r"topk_groups \(3\) must be <= n_groups"),
        (dict(top_k=3, n_groups=4, topk_groups=1), ValueError, "raise topk_groups"),
        (dict(n_shared=-1), ValueError, "n_shared must be a non-negative int"),
        (dict(activation="tanh"), ValueError, "activation='tanh' is not supported"),
        (dict(bias_rate=0.0), ValueError, "bias_rate must be positive"),
    ],
)
def test_layer_constructor_errors(kwargs, err, match):
    args = dict(d_model=8, n_experts=4, top_k=2, d_expert=4)
    args.update(kwargs)
    with pytest.raises(err, match=match):
        MoELayer(**args)


def test_forward_errors():
    layer = MoELayer(8, 4, 2, 4)
    with pytest.raises(ValueError, match="width 6 but the layer was built for d_model=8"):
        layer(torch.randn(3, 6))
    with pytest.raises(TypeError, match="floating-point"):
        layer(torch.ones(3, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="torch.Tensor"):
        layer([[0.0] * 8])
    with pytest.raises(TypeError, match="float64 .*float32"):
        layer(torch.randn(3, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="d_model=8"):
        Router(8, 4, 2)(torch.randn(2, 5))


def test_route_errors():
    with pytest.raises(ValueError, match="logits must have 2 dimensions"):
        route(torch.randn(2, 3, 4), 1)
    with pytest.raises(ValueError, match=r"top_k \(4\) must be <= n_experts \(3\)"):
        route(torch.randn(5, 3), 4)
    with pytest.raises(ValueError, match="bias has 2 entries but there are E=3"):
        route(torch.randn(5, 3), 1, bias=torch.zeros(2))
    with pytest.raises(TypeError, match="scaling must be a real number"):
        route(torch.randn(5, 3), 1, scaling=None)


def test_dispatch_and_capacity_errors():
    with pytest.raises(TypeError, match="integer expert ids"):
        plan_dispatch(torch.zeros(3, 2), 4)
    with pytest.raises(TypeError, match="integer expert ids"):
        plan_dispatch(torch.ones(3, 2, dtype=torch.bool), 4)
    with pytest.raises(ValueError, match=r"outside \[0, n_experts=2\): min 0, max 3"):
        plan_dispatch(torch.tensor([[0, 3]]), 2)
    with pytest.raises(ValueError, match="min -1"):
        plan_dispatch(torch.tensor([[-1, 0]]), 2)
    plan = plan_dispatch(torch.tensor([[0, 1]]), 2)
    with pytest.raises(TypeError, match="plan must be a DispatchPlan"):
        combine(torch.zeros(2, 4), "plan", torch.ones(1, 2), 1)
    with pytest.raises(ValueError, match="do not fit the plan"):
        combine(torch.zeros(3, 4), plan, torch.ones(1, 2), 1)
    with pytest.raises(TypeError, match="n_tokens must be an int"):
        expert_capacity(float("inf"), 2, 4, 1.0)
    with pytest.raises(ValueError, match="capacity_factor must be positive"):
        expert_capacity(10, 2, 4, 0)
    with pytest.raises(ValueError, match=r"d_expert \(10\) must be divisible by m \(4\)"):
        fine_grained(4, 10, 1, 4)


def test_loss_errors():
    probs, idx = torch.full((4, 2), 0.5), torch.zeros(4, 1, dtype=torch.long)
    with pytest.raises(ValueError, match="must share N"):
        load_balancing_loss(probs, idx[:3])
    with pytest.raises(ValueError, match="form='switch' is not supported"):
        load_balancing_loss(probs, idx, form="switch")
    with pytest.raises(TypeError, match="mask must be bool"):
        load_balancing_loss(probs, idx, mask=torch.ones(4))
    with pytest.raises(ValueError, match="mask has 3 entries but there are N=4"):
        router_z_loss(probs, mask=torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"load \(3,\) and bias \(4,\)"):
        balance_bias_update(torch.zeros(4), torch.ones(3), 0.1)
    with pytest.raises(ValueError, match="rate must be positive"):
        balance_bias_update(torch.zeros(4), torch.ones(4), 0.0)
