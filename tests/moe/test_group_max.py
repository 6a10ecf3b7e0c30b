"""DeepSeek-V2's group-limited router (groups ranked by their best expert) against transformers'
DeepseekV2TopkRouter and against DeepSeek-V3's rule, which it must differ from."""

from __future__ import annotations

import pytest
import torch

from llmviz.moe import MoELayer, Router, route
from llmviz.moe.group_max import BestInGroupRouter, route_by_best_in_group


def test_matches_transformers_deepseek_v2_router():
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2TopkRouter

    cfg = transformers.DeepseekV2Config(hidden_size=16, num_attention_heads=4, n_routed_experts=12, num_experts_per_tok=3,
                                        n_group=4, topk_group=2, topk_method="group_limited_greedy",
                                        routed_scaling_factor=1.5)
    torch.manual_seed(0)
    hf = DeepseekV2TopkRouter(cfg)
    torch.nn.init.normal_(hf.weight, std=1.0)
    ours = BestInGroupRouter(16, 12, 3, score="softmax", normalize=False, scaling=1.5,
                             n_groups=4, topk_groups=2)
    with torch.no_grad():
        ours.weight.copy_(hf.weight)
    x = torch.randn(64, 16)
    _, w_ref, i_ref = hf(x)
    got = ours(x)
    order_ref, order_got = i_ref.sort(-1), got.indices.sort(-1)
    assert torch.equal(order_ref.values, order_got.values)
    torch.testing.assert_close(w_ref.gather(1, order_ref.indices), got.weights.gather(1, order_got.indices),
                               rtol=0, atol=1e-6)


def test_differs_from_the_best_two_rule():
    # group 0: one strong expert; group 1: two fairly good ones. V2 keeps group 0, V3 group 1.
    logits = torch.log(torch.tensor([[0.40, 0.01, 0.01, 0.01, 0.27, 0.27, 0.02, 0.01]]))
    v2 = route_by_best_in_group(logits, 1, n_groups=2, topk_groups=1)
    v3 = route(logits, 1, n_groups=2, topk_groups=1, normalize=False)
    assert v2.indices.item() == 0 and v3.indices.item() in (4, 5)
    torch.testing.assert_close(v2.weights, torch.softmax(logits, -1)[:, :1])


def test_from_router_shares_the_weights_inside_a_mixture():
    layer = MoELayer(16, n_experts=8, top_k=2, d_expert=8, n_groups=2, topk_groups=1, normalize=False)
    old = layer.gate
    layer.gate = BestInGroupRouter.from_router(old)
    assert layer.gate.weight is old.weight
    x = torch.randn(2, 5, 16)
    out = layer(x)
    assert out.shape == x.shape
    allowed = layer.gate(x).indices // 4  # both picks of a token lie in one group
    assert torch.equal(allowed[:, 0], allowed[:, 1])


def test_errors_name_the_fix():
    with pytest.raises(ValueError, match="has no expert groups"):
        BestInGroupRouter.from_router(Router(16, 8, 2))
    with pytest.raises(ValueError, match="has a choice bias"):
        BestInGroupRouter.from_router(Router(16, 8, 2, n_groups=2, topk_groups=1, bias_balancing=True))
    with pytest.raises(TypeError, match="must be a llmviz.moe.Router, got Linear"):
        BestInGroupRouter.from_router(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="needs n_groups and topk_groups"):
        route_by_best_in_group(torch.randn(3, 8), 2, n_groups=None, topk_groups=None)
    with pytest.raises(ValueError, match=r"top_k \(5\) exceeds the experts in the 1 allowed groups"):
        route_by_best_in_group(torch.randn(3, 8), 5, n_groups=2, topk_groups=1)
