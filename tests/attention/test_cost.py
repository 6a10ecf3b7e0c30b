"""Cost model and memory measurement of attention."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention import scaled_dot_product_attention
from llmviz.attention.cost import attention_intensity, peak_memory, score_matrix_bytes
from llmviz.attention.tiled import tiled_attention


def test_score_matrix_bytes_is_quadratic():
    a = score_matrix_bytes(batch=2, n_heads=4, q_len=100)
    assert a == 2 * 4 * 100 * 100 * 4
    assert score_matrix_bytes(batch=2, n_heads=4, q_len=200) == 4 * a
    assert score_matrix_bytes(batch=1, n_heads=1, q_len=1, kv_len=10, bytes_per_el=2) == 20
    with pytest.raises(ValueError, match="q_len must be a positive int"):
        score_matrix_bytes(batch=1, n_heads=1, q_len=0)


def test_intensity_decode_vs_prefill_and_mqa():
    kw = dict(batch=1, n_heads=32, head_dim=128, kv_len=4096)
    mha = attention_intensity(n_kv_heads=32, q_len=1, **kw)
    mqa = attention_intensity(n_kv_heads=1, q_len=1, **kw)
    prefill = attention_intensity(n_kv_heads=32, q_len=4096, **kw)
    assert mha["intensity"] == pytest.approx(1.0, rel=1e-3)  # one FLOP per byte in fp16
    assert mqa["intensity"] / mha["intensity"] == pytest.approx(32, rel=0.05)
    assert prefill["intensity"] > 1000
    assert mha["flops"] == mqa["flops"] == 4 * 32 * 4096 * 128
    with pytest.raises(ValueError, match=r"n_heads \(6\) must be divisible by n_kv_heads \(4\)"):
        attention_intensity(batch=1, n_heads=6, n_kv_heads=4, head_dim=8, q_len=1, kv_len=8)


def test_peak_memory_sees_the_score_matrix():
    q = torch.randn(1, 4, 256, 16)
    score = score_matrix_bytes(batch=1, n_heads=4, q_len=256)
    with torch.no_grad():
        naive = peak_memory(lambda: scaled_dot_product_attention(q, q, q, return_weights=True))
        fused = peak_memory(lambda: scaled_dot_product_attention(q, q, q))
        tiled = peak_memory(lambda: tiled_attention(q, q, q, block_q=32, block_k=32))
    assert naive >= 2 * score  # scores and weights both exist at the peak
    assert fused < score / 4 and tiled < score / 2
    with pytest.raises(TypeError, match="fn must be callable"):
        peak_memory(3)


def test_peak_memory_counts_only_new_tensors():
    x = torch.randn(1000)
    assert peak_memory(lambda: x.view(10, 100)) == 0
    assert peak_memory(lambda: x * 2) == 4000
