"""SparseMixer routing (Phi-3.5-MoE) against transformers' own ``sparsemixer`` at inference, and
what sets it apart from a softmax top-2 router."""

from __future__ import annotations

import pytest
import torch

from llmviz.moe import MoELayer, Router, route
from llmviz.moe.sparsemixer import SparseMixerRouter, sparsemixer_route


@pytest.mark.parametrize("eps", [0.01, 0.2])
def test_matches_transformers_sparsemixer(eps):
    pytest.importorskip("transformers")
    from transformers.models.phimoe.modeling_phimoe import sparsemixer

    torch.manual_seed(0)
    logits = torch.randn(256, 8) * 0.5
    logits[:4] = torch.tensor([1.0, 0.999, 0.998, -2.0, 0.0, 0.5, 1.0, -1.0])  # ties and near-ties
    w_ref, i_ref = sparsemixer(logits, jitter_eps=eps, training=False)
    got = sparsemixer_route(logits, eps)
    assert torch.equal(got.indices, i_ref)
    torch.testing.assert_close(got.weights, w_ref, rtol=0, atol=0)


def test_weights_are_softmaxes_over_the_near_experts_only():
    logits = torch.tensor([[3.0, 2.99, 0.0, -1.0]])
    r = sparsemixer_route(logits, 0.01)  # 2.99 lies within 2% of 3.0; 0 and -1 do not
    assert r.indices.tolist() == [[0, 1]]
    torch.testing.assert_close(r.weights[0, 0], torch.softmax(logits[0, :2], 0)[0])
    assert r.weights[0, 1] == 1.0  # second pick: alone in its neighbourhood once the first is out
    top2 = route(logits, 2, normalize=True)
    assert not torch.allclose(top2.weights, r.weights)  # not Mixtral's renormalised top-2


def test_router_inside_a_mixture_shares_the_weight():
    layer = MoELayer(16, n_experts=4, top_k=2, d_expert=8)
    old = layer.gate
    layer.gate = SparseMixerRouter.from_router(old, 0.01)
    assert layer.gate.weight is old.weight and "sparsemixer" in repr(layer.gate)
    x = torch.randn(2, 5, 16)
    assert layer(x).shape == x.shape


def test_errors_name_the_fix():
    with pytest.raises(ValueError, match="replaces a plain top-2 router; this one has top_k=3"):
        SparseMixerRouter.from_router(Router(16, 4, 3), 0.01)
    with pytest.raises(TypeError, match="must be a llmviz.moe.Router, got Linear"):
        SparseMixerRouter.from_router(torch.nn.Linear(2, 2), 0.01)
    with pytest.raises(ValueError, match="eps"):
        sparsemixer_route(torch.randn(3, 4), 0.0)
    with pytest.raises(ValueError, match="picks two experts; got E=1"):
        sparsemixer_route(torch.randn(3, 1), 0.01)
