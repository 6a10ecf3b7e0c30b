"""Chapter 16's explorer: counts from MoELayer itself, on the meta device."""

from __future__ import annotations

import pytest

from llmviz.explore.moe import SHAPE, experts_explorer, experts_frame, moe_counts
from llmviz.moe import MoELayer


def test_counts_are_the_layers_own():
    got = moe_counts(8, 2, 1)
    C, F = SHAPE["d_model"], SHAPE["d_expert"]
    per_expert = 3 * C * F  # gate, up and down projections of a GLU expert
    assert got["per_expert"] == per_expert
    assert got["total"] == 8 * per_expert + per_expert + C * 8  # routed + one shared + router
    assert got["active"] == 2 * per_expert + per_expert + C * 8
    small = MoELayer(16, 8, 2, 4, n_shared=1).parameter_counts()
    assert small["total"] == sum(p.numel() for p in MoELayer(16, 8, 2, 4, n_shared=1).parameters())


def test_frame_follows_the_controls():
    a, b = experts_frame(n_experts=8, top_k=2, n_shared=0), experts_frame(n_experts=64, top_k=2, n_shared=0)
    total_a, active_a = a.traces[0].y
    total_b, active_b = b.traces[0].y
    assert total_b > total_a and active_b == pytest.approx(active_a, rel=0.01)  # memory grows, compute (router aside) not
    assert experts_frame(top_k=8).traces[0].y[1] > experts_frame(top_k=1).traces[0].y[1]
    assert "GB in bf16" in a.layout["title.text"]


def test_explorer_controls():
    ex = experts_explorer()
    assert [c.name for c in ex.controls] == ["n_experts", "top_k", "n_shared"]
    with pytest.raises(ValueError):
        ex.frame(n_experts=4, top_k=8)  # more experts per token than experts
