"""Llama 4's query temperature (NoPE layers) and weightless RMS of q and k after RoPE."""

from __future__ import annotations

import math

import pytest
import torch

from llmviz.attention.llama4_qk import QueryTemperature, RotaryThenRMS, query_temperature
from llmviz.position.rotary import RotaryEmbedding


def test_query_temperature_formula():
    t = query_temperature(torch.arange(12), floor_scale=4, attn_scale=0.5)
    want = [1 + 0.5 * math.log(1 + (p + 1) // 4) for p in range(12)]
    torch.testing.assert_close(t, torch.tensor(want), rtol=0, atol=1e-6)
    assert t[:3].eq(1).all() and t[3] > 1  # 1 until position floor_scale - 1


def test_query_temperature_scales_queries_only():
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8)
    q2, k2 = QueryTemperature(2, 0.3)(q, k, torch.arange(6))
    assert torch.equal(k2, k)
    torch.testing.assert_close(q2, q * query_temperature(torch.arange(6), 2, 0.3)[:, None])
    with pytest.raises(ValueError, match="needs the positions"):
        QueryTemperature(2, 0.3)(q, k)
    with pytest.raises(ValueError, match="floor_scale"):
        QueryTemperature(0, 0.3)


def test_rotary_then_rms_is_weightless_rms_of_the_rotated_heads():
    rope = RotaryEmbedding(8, layout="interleaved")
    q, k = torch.randn(1, 4, 5, 8) * 3, torch.randn(1, 2, 5, 8) * 3
    pos = torch.arange(5)
    rq, rk = rope(q, k, pos)
    q2, k2 = RotaryThenRMS(rope, eps=1e-5)(q, k, pos)
    torch.testing.assert_close(q2, rq / (rq.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt())
    torch.testing.assert_close(k2.pow(2).mean(-1), torch.ones(1, 2, 5), rtol=0, atol=1e-4)
    assert sum(p.numel() for p in RotaryThenRMS(rope).parameters()) == 0
    with pytest.raises(TypeError, match="rope must be a rotary module, got int"):
        RotaryThenRMS(3)
