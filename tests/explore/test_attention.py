"""Attention explorers: frames draw the library's numbers (entropy, KV bytes, tile map)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from llmviz.analysis import kv_cache_bytes_for
from llmviz.attention.functional import attention_weights
from llmviz.attention.metrics import row_entropy
from llmviz.attention.tiled import tile_map
from llmviz.explore.attention import (
    kv_cache_frame,
    temperature_frame,
    tiling_frame,
    weights_explorer,
)
from llmviz.model.presets import llama2


def test_kv_cache_frame_is_llama2_7b_from_the_preset():
    f = kv_cache_frame(n_kv_heads=8, context=4096, batch=1)
    mha, ours, now = f.traces
    for n_kv, trace in ((32, mha), (8, ours)):
        cfg = llama2("7b", n_kv_heads=n_kv)
        expected = [kv_cache_bytes_for(cfg, t) / 2**30 for t in trace.x]
        assert list(trace.y) == pytest.approx(expected)
    assert now.y[0] == pytest.approx(kv_cache_bytes_for(llama2("7b", n_kv_heads=8), 4096) / 2**30)
    assert mha.name == f"MHA ({llama2('7b').n_heads} kv heads)"


def test_temperature_frame_reports_the_library_entropy():
    f = temperature_frame(temperature=3.0, d=16, scaled=True)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 8, 16, generator=g)
    k = torch.randn(1, 1, 8, 16, generator=g)
    w = attention_weights(q, k, scale=(1 / math.sqrt(16)) / 3.0)[0, 0]
    ent = float(row_entropy(w).mean() / math.log(8))
    assert f"mean row entropy {ent:.2f} of the maximum" in f.layout["title.text"]
    np.testing.assert_allclose(np.asarray(f.traces[1].y), w[-1].numpy())


@pytest.mark.parametrize("block,causal", [(4, True), (16, True), (16, False), (64, True)])
def test_tiling_frame_draws_the_tile_map(block, causal):
    f = tiling_frame(block=block, causal=causal)
    status = tile_map(64, block_q=block, block_k=block, causal=causal).numpy()
    np.testing.assert_array_equal(np.asarray(f.traces[0].z), np.kron(status, np.ones((block, block))))
    assert f"{int((status > 0).sum())} computed, {int((status == 0).sum())} skipped" in f.layout["title.text"]


def test_weights_explorer_labels_queries_as_the_last_keys():
    w = torch.softmax(torch.randn(1, 2, 3, 5), -1)  # (B, H, T, S): 3 queries, 5 keys
    ex = weights_explorer([w], tokens=list("abcde"))
    trace = ex.frame(head=1).traces[0]
    assert list(trace.x) == ["0:a", "1:b", "2:c", "3:d", "4:e"]
    assert list(trace.y) == ["2:c", "3:d", "4:e"]
