"""Chapter 17's explorer draws what analysis.design_cache_bytes computes, on Llama 2 7B's shape."""

from __future__ import annotations

import numpy as np
import pytest

from llmviz.analysis import design_cache_bytes
from llmviz.explore.latent import SHAPE, frontier_explorer, frontier_frame


def test_shape_is_llama2_7b():
    transformers = pytest.importorskip("transformers")
    from llmviz.hf import anatomy

    a = anatomy(transformers.LlamaConfig())
    assert (a.n_layers, a.n_heads, a.head_dim) == (SHAPE["n_layers"], SHAPE["n_heads"], SHAPE["head_dim"])
    # the MHA line is the real model's cache
    assert design_cache_bytes("mha", 4096, **SHAPE) == a.kv_cache_bytes(4096)


def test_frame_lines_follow_the_controls():
    f = frontier_frame(n_kv_heads=4, latent_dim=256, window=1024)
    assert len(f.traces) == 6
    x = np.asarray(f.traces[0].x)
    gqa = np.array([design_cache_bytes("gqa", int(c), **SHAPE, n_kv_heads=4) for c in x]) / 2**30
    np.testing.assert_allclose(np.asarray(f.traces[1].y, dtype=float), gqa, rtol=1e-6)
    assert f.traces[1].name == "GQA"
    # more kv heads: more cache; a wider latent: more cache; the window flattens its line
    assert frontier_frame(n_kv_heads=8).traces[1].y[-1] > frontier_frame(n_kv_heads=4).traces[1].y[-1]
    assert frontier_frame(latent_dim=1024).traces[3].y[-1] > frontier_frame(latent_dim=256).traces[3].y[-1]
    sliding = np.asarray(f.traces[4].y, dtype=float)
    assert np.ptp(sliding[x >= 1024]) == 0
    assert "128k" in f.layout["title.text"]


def test_explorer_static_grid():
    ex = frontier_explorer()
    assert [c.name for c in ex.controls] == ["n_kv_heads", "latent_dim", "window"]
    assert ex.frame(n_kv_heads=1, latent_dim=128, window=16384).traces
