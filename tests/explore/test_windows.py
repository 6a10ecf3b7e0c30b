"""Windows explorer: layer patterns, per-layer receptive fields, cache bytes, the frames."""

from __future__ import annotations

import math

import pytest
import torch

from llmviz.attention.masks import receptive_field, sliding_window_mask
from llmviz.explore.windows import (
    cache_bytes,
    layer_mask,
    layer_pattern,
    reach_span,
    stack_reach,
    windows_explorer,
    windows_frame,
)


def test_layer_pattern_matches_the_config_rule():
    from llmviz.model import ModelConfig

    cfg = ModelConfig(vocab_size=32, d_model=32, n_layers=12, n_heads=4, sliding_window=8,
                      global_every=6)
    assert layer_pattern(12, 8, 6) == tuple(cfg.window_for(i) for i in range(12))
    assert layer_pattern(4, 8, 0) == (8, 8, 8, 8)
    assert layer_pattern(4, 8, 1) == (None,) * 4
    assert layer_pattern(3, None) == (None,) * 3


def test_uniform_stack_equals_receptive_field():
    m = sliding_window_mask(20, window=4)
    reach = stack_reach([4, 4, 4], 20)
    for depth in (1, 2, 3):
        assert torch.equal(reach[depth - 1], receptive_field(m, depth))


@pytest.mark.parametrize("windows", [(3, 5, 2), (4, None, 4), (2, 2, 2, 2), (None,)])
def test_reach_span_agrees_with_the_matrices(windows):
    T = 40
    reach = stack_reach(windows, T)
    for layer, span in enumerate(reach_span(windows)):
        seen = int(reach[layer, -1].sum())  # keys the last query reaches
        assert seen == (T if math.isinf(span) else min(T, span + 1))


def test_sinks_reach_the_first_tokens_only():
    no = stack_reach([4, 4], 30)[-1, -1]
    yes = stack_reach([4, 4], 30, sink_tokens=2)[-1, -1]
    assert not no[:2].any() and yes[:2].all()
    assert torch.equal(no[2:], yes[2:])
    assert layer_mask(10, None).sum() == 55  # a global layer is plain causal


def test_cache_bytes():
    # 2 (k, v) x tokens x heads x dim x bytes
    assert cache_bytes((None, None), 100, n_kv_heads=2, head_dim=4) == 2 * 200 * 2 * 4 * 2
    assert cache_bytes((10, None), 100, n_kv_heads=1, head_dim=1, bytes_per_value=1) == 2 * 110
    assert cache_bytes((10,), 100, n_kv_heads=1, head_dim=1, sink_tokens=4) == 2 * 14 * 2
    assert cache_bytes((10,), 5, n_kv_heads=1, head_dim=1, sink_tokens=4) == 2 * 5 * 2


def test_bad_input():
    with pytest.raises(ValueError, match=r"windows\[1\] must be None \(global\) or a positive int, got 0"):
        reach_span([4, 0])
    with pytest.raises(ValueError, match="at least one layer"):
        stack_reach([], 8)
    with pytest.raises(ValueError, match="window"):
        layer_pattern(4, 0)
    with pytest.raises(ValueError, match="context"):
        cache_bytes((4,), 0, n_kv_heads=1, head_dim=1)


def test_explorer_grid_and_frames():
    ex = windows_explorer()
    grid = ex.grid()
    assert 2 <= len(grid) <= 80
    assert {len(ex.frame(**p).traces) for p in grid} == {3}
    f = windows_frame(window=8, global_every=0, sink_tokens=0)
    z = f.traces[0].z
    assert z.shape == (12, 128)
    # 12 local layers of window 8: the last query reaches 12 * 7 + 1 positions
    assert int((z[-1] > 0).sum()) == 85
    assert "reaches 85 of 128" in f.layout["title.text"]
    g = windows_frame(window=8, global_every=6, sink_tokens=4)
    assert "reaches 128 of 128" in g.layout["title.text"]
    assert "2 global of 12" in g.layout["title.text"]


def test_local_mask_slider_reads_the_registry_and_chunks_stay_in_their_block():
    from llmviz.attention.mask_kinds import MASK_KINDS
    from llmviz.explore.windows import LOCAL_KINDS

    assert LOCAL_KINDS == MASK_KINDS.names(local=True)
    control = next(c for c in windows_explorer().controls if c.name == "local")
    assert tuple(control.values) == LOCAL_KINDS
    # chunks of 4 with 2 sinks, written by hand: own chunk, or a sink key, or a sink query
    hand = torch.tensor([[k <= q and (q // 4 == k // 4 or k < 2 or q < 2) for k in range(12)]
                         for q in range(12)])
    assert torch.equal(layer_mask(12, 4, 2, local="chunked"), hand)
    assert torch.equal(layer_mask(12, 4, 2), layer_mask(12, 4, 2, local="sliding"))
    # stacked chunked layers never leave their block: the last query of 12 reaches 8..11 only
    reach = stack_reach((4, 4, 4), 12, local="chunked")[-1, -1]
    assert reach.nonzero().flatten().tolist() == [8, 9, 10, 11]
    f = windows_frame(window=8, global_every=0, local="chunked")
    assert "chunk 8" in f.layout["title.text"] and f.traces[0].y[0] == "0: c=8"
    with pytest.raises(ValueError, match="mask kind='banded' is not supported"):
        layer_mask(8, 4, local="banded")
