"""Dispatch: the sorted path equals a naive per-token reference; capacity drops exactly the
overflow; shared experts; gradients; parameter counts."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.moe import MoELayer, dense_forward, expert_capacity, fine_grained, plan_dispatch


def naive_per_token(layer: MoELayer, x: torch.Tensor, kept: torch.Tensor | None = None) -> torch.Tensor:
    """Every token, one at a time, through each of its chosen experts (Python loops)."""
    flat = x.reshape(-1, layer.d_model)
    r = layer.gate(flat)
    out = torch.zeros_like(flat)
    for t in range(flat.shape[0]):
        for j in range(layer.top_k):
            if kept is not None and not kept[t, j]:
                continue
            e = int(r.indices[t, j])
            gate, up = (layer.experts.gate_up_proj[e] @ flat[t]).chunk(2)
            h = torch.nn.functional.silu(gate) * up
            out[t] += r.weights[t, j] * (layer.experts.down_proj[e] @ h)
    if layer.shared_experts is not None:
        out = out + layer.shared_experts(flat)
    return out.view(x.shape)


@settings(max_examples=25, deadline=None)
@given(E=st.integers(1, 8), data=st.data(), N=st.integers(1, 24), shared=st.booleans(),
       score=st.sampled_from(["softmax", "sigmoid"]), seed=st.integers(0, 10_000))
def test_dispatch_equals_naive_per_token_reference(E, data, N, shared, score, seed):
    k = data.draw(st.integers(1, E))
    torch.manual_seed(seed)
    layer = MoELayer(12, E, k, 8, n_shared=int(shared), score=score).double()
    x = torch.randn(N, 12, dtype=torch.float64)
    with torch.no_grad():
        got = layer(x)
        torch.testing.assert_close(got, naive_per_token(layer, x))
        r = layer.gate(x)
        dense = dense_forward(x, r.indices, r.weights, layer.experts.experts_as_functions())
        if layer.shared_experts is not None:
            dense = dense + layer.shared_experts(x)
        torch.testing.assert_close(got, dense)


def test_plan_groups_rows_by_expert_in_priority_order():
    indices = torch.tensor([[2, 0], [0, 1], [2, 1]])  # N=3, k=2
    plan = plan_dispatch(indices, 4)
    assert plan.counts == [2, 2, 2, 0]
    experts = indices.reshape(-1)[plan.assignment]
    assert experts.tolist() == [0, 0, 1, 1, 2, 2]
    # inside expert 0: token 1's first choice beats token 0's second choice
    assert plan.tokens.tolist()[:2] == [1, 0]


@settings(max_examples=60, deadline=None)
@given(N=st.integers(1, 30), E=st.integers(1, 6), data=st.data(), factor=st.floats(0.1, 2.0),
       seed=st.integers(0, 10_000))
def test_capacity_drops_exactly_the_overflow(N, E, data, factor, seed):
    k = data.draw(st.integers(1, E))
    g = torch.Generator().manual_seed(seed)
    indices = torch.rand(N, E, generator=g).argsort(dim=-1)[:, :k]  # distinct experts per token
    cap = expert_capacity(N, k, E, factor)
    assert cap == max(1, math.ceil(factor * N * k / E))
    plan = plan_dispatch(indices, E, capacity=cap)
    load = torch.bincount(indices.reshape(-1), minlength=E)
    dropped = torch.bincount(indices[~plan.kept], minlength=E)
    assert torch.equal(dropped, (load - cap).clamp_min(0))  # exactly the overflow
    assert plan.n_dropped == int((load - cap).clamp_min(0).sum())
    assert plan.counts == load.clamp(max=cap).tolist()
    # the kept ones are the first `cap` in priority order (rank-major, then token order)
    for e in range(E):
        t, j = (indices == e).nonzero(as_tuple=True)
        order = (j * N + t).argsort()
        want = torch.zeros(len(t), dtype=torch.bool)
        want[order[:cap]] = True
        assert torch.equal(plan.kept[t, j], want)


def test_layer_with_capacity_matches_reference_without_the_dropped(gen):
    torch.manual_seed(3)
    layer = MoELayer(16, 4, 2, 8, capacity_factor=0.5).double()
    x = torch.randn(2, 10, 16, dtype=torch.float64, generator=gen)
    with torch.no_grad():
        out, info = layer(x, return_info=True)
        want = naive_per_token(layer, x, kept=info.plan.kept)
    assert info.n_dropped > 0 and info.plan.capacity == 5
    assert info.dropped_fraction == info.n_dropped / 40
    torch.testing.assert_close(out, want)


def test_large_capacity_drops_nothing(gen):
    layer = MoELayer(16, 4, 2, 8, capacity_factor=4.0)
    x = torch.randn(30, 16, generator=gen)
    out, info = layer(x, return_info=True)
    assert info.n_dropped == 0
    layer.capacity_factor = None
    torch.testing.assert_close(out, layer(x))


def test_gradients_reach_router_and_experts(gen):
    layer = MoELayer(16, 4, 2, 8, n_shared=1)
    x = torch.randn(20, 16, generator=gen, requires_grad=True)
    layer(x).pow(2).sum().backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert x.grad.abs().sum() > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_layer_dtypes_devices_and_shapes(dtype, device):
    layer = MoELayer(16, 4, 2, 8, n_shared=1).to(device=device, dtype=dtype)
    x = torch.randn(2, 3, 16, device=device, dtype=dtype)
    out = layer(x)
    assert out.shape == x.shape and out.dtype == dtype and out.device.type == device.type


def test_parameter_counts():
    layer = MoELayer(16, 8, 2, 10, n_shared=1)
    c = layer.parameter_counts()
    assert c["total"] == sum(p.numel() for p in layer.parameters())
    assert c["per_expert"] == 3 * 16 * 10
    assert c["active"] == c["router"] + c["shared"] + 2 * c["per_expert"]


def test_fine_grained_keeps_total_and_active_parameters():
    base = MoELayer(16, 4, 1, 32).parameter_counts()
    cfg = fine_grained(4, 32, 1, 4)
    assert cfg["combinations"] == math.comb(16, 4)
    fine = MoELayer(16, cfg["n_experts"], cfg["top_k"], cfg["d_expert"]).parameter_counts()
    assert fine["total"] - fine["router"] == base["total"] - base["router"]  # expert weights
    assert fine["active"] - fine["router"] == base["active"] - base["router"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_mm_path_equals_expert_loop(dtype, device, monkeypatch):
    import llmviz.moe.layer as moe_layer

    torch.manual_seed(0)
    layer = MoELayer(16, 4, 2, 8, n_shared=1).to(device=device, dtype=dtype)
    x = torch.randn(40, 16, device=device, dtype=dtype, requires_grad=True)
    results = []
    for use_grouped in (True, False):
        if use_grouped and not moe_layer._grouped_mm_ok(x, layer.experts.gate_up_proj):
            pytest.skip("torch.nn.functional.grouped_mm does not run here")
        monkeypatch.setattr(moe_layer, "_grouped_mm_ok", lambda r, w, g=use_grouped: g)
        layer.zero_grad(set_to_none=True)
        x.grad = None
        out = layer(x)
        out.pow(2).sum().backward()
        results.append((out.detach(), x.grad.clone(), layer.experts.gate_up_proj.grad.clone()))
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, **tol)


def test_no_tokens_gives_an_empty_output():
    layer = MoELayer(16, 4, 2, 8, n_shared=1, capacity_factor=1.0)
    out, info = layer(torch.randn(2, 0, 16), return_info=True)
    assert out.shape == (2, 0, 16) and info.n_dropped == 0 and info.load.sum() == 0
