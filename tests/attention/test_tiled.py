"""Online softmax and tiled attention equal the naive computation."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.attention import scaled_dot_product_attention
from llmviz.attention.masks import causal_mask
from llmviz.attention.tiled import (
    online_softmax,
    online_softmax_trace,
    tile_map,
    tiled_attention,
)


@given(n=st.integers(1, 50), block=st.integers(1, 20), big=st.booleans())
@settings(max_examples=40, deadline=None)
def test_online_softmax_equals_softmax(n, block, big):
    x = torch.randn(3, n, generator=torch.Generator().manual_seed(n)) * (100.0 if big else 1.0)
    torch.testing.assert_close(online_softmax(x, block_size=block), torch.softmax(x, -1))


def test_online_softmax_handles_masked_entries():
    x = torch.tensor([[float("-inf"), float("-inf"), 1.0, 2.0, float("-inf")]])
    torch.testing.assert_close(online_softmax(x, block_size=2), torch.softmax(x, -1))


def test_trace_ends_at_the_full_normaliser():
    x = torch.randn(37, dtype=torch.float64)
    tr = online_softmax_trace(x, block_size=5)
    assert tr["end"][-1] == 37 and len(tr["m"]) == 8
    assert torch.all(tr["m"][1:] >= tr["m"][:-1])  # running max never decreases
    torch.testing.assert_close(tr["l"][-1] * torch.exp(tr["m"][-1]), torch.exp(x).sum())


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T,S,bq,bk,G", [(16, 16, 4, 4, 4), (10, 23, 3, 5, 2), (1, 9, 4, 2, 1), (33, 33, 64, 8, 4)])
def test_tiled_equals_naive(causal, T, S, bq, bk, G, device):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, T, 8, generator=g).to(device)
    k = torch.randn(2, G, S, 8, generator=g).to(device)
    v = torch.randn(2, G, S, 8, generator=g).to(device)
    mask = causal_mask(T, S, device=device) if causal else None
    want = scaled_dot_product_attention(q, k, v, mask=mask, fused=False)
    got = tiled_attention(q, k, v, causal=causal, block_q=bq, block_k=bk)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_causal_tiles_are_skipped():
    q = k = v = torch.randn(1, 1, 64, 8)
    _, full = tiled_attention(q, k, v, block_q=16, block_k=16, return_stats=True)
    _, causal = tiled_attention(q, k, v, causal=True, block_q=16, block_k=16, return_stats=True)
    assert full["tiles"] == 16 and causal["tiles"] == 10 and causal["skipped"] == 6
    assert causal["peak_score_elements"] == 256


def test_errors():
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match="block_q must be a positive int"):
        tiled_attention(q, q, q, block_q=0)
    with pytest.raises(ValueError, match=r"needs S \(4\) >= T \(6\)"):
        tiled_attention(torch.randn(1, 2, 6, 8), q, q, causal=True)
    with pytest.raises(ValueError, match="block_size must be a positive int"):
        online_softmax(torch.randn(3), block_size=0)
    with pytest.raises(TypeError, match="floating-point"):
        online_softmax(torch.arange(3))


# ----------------------------------------------------------------------------- tile_map
@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 24), cached=st.integers(0, 12), bq=st.integers(1, 9), bk=st.integers(1, 9),
       causal=st.booleans())
def test_tile_map_is_what_tiled_attention_does(T, cached, bq, bk, causal):
    S = T + cached
    status = tile_map(T, S, block_q=bq, block_k=bk, causal=causal)
    q = torch.randn(1, 1, T, 4)
    k = torch.randn(1, 1, S, 4)
    _, stats = tiled_attention(q, k, k, causal=causal, block_q=bq, block_k=bk, return_stats=True)
    assert int((status > 0).sum()) == stats["tiles"]
    assert int((status == 0).sum()) == stats["skipped"]
    # a tile is "partial" exactly when the causal mask blocks some but not all of its cells
    allowed = causal_mask(T, S) if causal else torch.ones(T, S, dtype=torch.bool)
    for i in range(status.shape[0]):
        for j in range(status.shape[1]):
            cell = allowed[i * bq : (i + 1) * bq, j * bk : (j + 1) * bk]
            expected = 0 if not cell.any() else (2 if cell.all() else 1)
            assert int(status[i, j]) == expected


def test_tile_map_errors():
    with pytest.raises(ValueError, match="block_q must be a positive int, got 0"):
        tile_map(8, block_q=0, block_k=4)
