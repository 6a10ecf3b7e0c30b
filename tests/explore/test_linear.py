"""Linear-attention explorer: memory of hybrid stacks, the frames."""

from __future__ import annotations

import pytest

from llmviz.attention.linear import state_bytes
from llmviz.explore.linear import hybrid_memory_bytes, linear_explorer, linear_frame

KW = dict(n_layers=8, n_kv_heads=2, head_dim=16, linear_heads=4, linear_head_dim=8)


def test_all_softmax_is_the_kv_cache():
    assert hybrid_memory_bytes(100, ratio=0, **KW) == 8 * 2 * 2 * 16 * 100 * 2


def test_all_linear_is_constant_in_context():
    a = hybrid_memory_bytes(10, ratio=None, **KW)
    assert a == hybrid_memory_bytes(10**6, ratio=None, **KW) == 8 * state_bytes(4, 8, 8)


def test_three_to_one_splits_the_layers():
    got = hybrid_memory_bytes(50, ratio=3, **KW)
    assert got == 2 * (2 * 2 * 16 * 50 * 2) + 6 * state_bytes(4, 8, 8)


@pytest.mark.parametrize("ratio", [0, 1, 3, 7])
def test_memory_grows_with_context_when_a_softmax_layer_is_left(ratio):
    assert hybrid_memory_bytes(200, ratio=ratio, **KW) > hybrid_memory_bytes(100, ratio=ratio, **KW)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="context"):
        hybrid_memory_bytes(0, ratio=1, **KW)
    with pytest.raises(ValueError, match="ratio"):
        hybrid_memory_bytes(5, ratio=-1, **KW)


def test_frames_and_explorer():
    f = linear_frame(ratio=3)
    assert len(f.traces) == 3 and "3:1" in f.layout["title.text"]
    soft = f.traces[1].y
    assert all(b > a for a, b in zip(soft[:-1], soft[1:]))
    assert len(set(f.traces[2].y)) == 1
    ex = linear_explorer()
    assert ex.frame(ratio=None, linear_heads=8, linear_head_dim=64).traces
