"""Mask objects: each against a hand-written rule and the existing mask functions, composition,
the cheap forms attention runs, Hugging Face's chunked mask, and the registry of layer kinds."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.attention import MultiHeadAttention
from llmviz.attention.mask_kinds import (
    MASK_KINDS,
    Causal,
    Chunked,
    Full,
    GlobalTokens,
    Padding,
    Sinks,
    SlidingWindow,
    layer_mask,
)
from llmviz.attention.masks import causal_mask, global_local_mask, sliding_window_mask


def by_hand(rule, T, S):
    """A (T, S) mask from a Python predicate on absolute positions (queries last T of S)."""
    return torch.tensor([[bool(rule(S - T + i, j)) for j in range(S)] for i in range(T)])


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 9), extra=st.integers(0, 6), size=st.integers(1, 7), causal=st.booleans())
def test_each_mask_equals_its_rule_written_by_hand(T, extra, size, causal):
    S = T + extra
    assert torch.equal(Causal()(T, S), by_hand(lambda q, k: k <= q, T, S))
    assert torch.equal(Full()(T, S), by_hand(lambda q, k: True, T, S))
    assert torch.equal(SlidingWindow(size, causal)(T, S),
                       by_hand(lambda q, k: (0 <= q - k < size) if causal else abs(q - k) < size, T, S))
    assert torch.equal(Chunked(size, causal)(T, S),
                       by_hand(lambda q, k: q // size == k // size and (k <= q or not causal), T, S))
    assert torch.equal(Sinks(size)(T, S), by_hand(lambda q, k: k < size and k <= q, T, S))
    # the existing functions are the same rules
    assert torch.equal(SlidingWindow(size, causal)(T, S),
                       sliding_window_mask(T, S, window=size, causal=causal))
    assert torch.equal(Causal()(T, S), causal_mask(T, S))
    g = min(size, S)
    assert torch.equal((SlidingWindow(size, causal) | GlobalTokens(g, causal))(T, S),
                       global_local_mask(T, S, window=size, global_tokens=g, causal=causal))


def test_composition_with_and_or_and_padding():
    m = SlidingWindow(2) | Sinks(2)  # StreamingLLM: window plus the first two tokens
    assert m(6)[5].tolist() == [True, True, False, False, True, True]
    am = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    both = (Causal() & Padding(am))(2, 4)
    assert both.shape == (2, 1, 2, 4)
    assert both[0, 0, 0].tolist() == [False, True, True, False]
    assert torch.equal(both[1, 0], causal_mask(2, 4))
    with pytest.raises(TypeError, match="compose with other Mask objects"):
        Causal() & torch.ones(3, 3, dtype=torch.bool)


def test_global_local_mask_takes_any_local_part():
    ours = global_local_mask(8, window=None, local=Chunked(3), global_tokens=1)
    assert torch.equal(ours, (Chunked(3) | GlobalTokens(1))(8))
    with pytest.raises(ValueError, match="exactly one local part"):
        global_local_mask(8, window=2, local=Chunked(3))
    with pytest.raises(TypeError, match="local must be a mask callable"):
        global_local_mask(8, local=3)


def test_simplify_drops_windows_and_chunks_that_cover_every_key():
    assert SlidingWindow(8).simplify(8) == Causal() and Chunked(8).simplify(5) == Causal()
    assert SlidingWindow(4, causal=False).simplify(4) == Full()
    assert SlidingWindow(3).simplify(8) == SlidingWindow(3)
    assert Chunked(3).simplify(8) == Chunked(3)


@pytest.mark.parametrize("mask", [Causal(), SlidingWindow(3), Chunked(3), Chunked(5)])
def test_mean_and_kept_keys_match_the_dense_mask(mask):
    T = 11
    assert mask.mean_keys(T) == pytest.approx(float(mask(T).sum()) / T)
    assert mask.kept_keys(100) == (100 if mask == Causal() else getattr(mask, "window", None)
                                   or mask.chunk)


@pytest.mark.parametrize("use_vmap", [False, True])
@pytest.mark.parametrize("T,S,chunk", [(6, 6, 3), (3, 9, 4), (1, 9, 4), (8, 8, 1), (5, 12, 20)])
def test_chunked_matches_hf_chunked_causal_mask(T, S, chunk, use_vmap):
    from transformers.masking_utils import chunked_causal_mask_function, sdpa_mask

    hf = sdpa_mask(batch_size=1, q_length=T, kv_length=S, q_offset=S - T,
                   mask_function=chunked_causal_mask_function(chunk, torch.zeros(1, dtype=torch.long)),
                   allow_is_causal_skip=False, use_vmap=use_vmap)
    assert torch.equal(Chunked(chunk)(T, S), hf[0, 0])


def test_attention_with_a_chunked_layer_mask_equals_the_hand_mask(gen):
    torch.manual_seed(0)
    a = MultiHeadAttention(16, 4, n_kv_heads=2, layer_mask=Chunked(3)).eval()
    b = MultiHeadAttention(16, 4, n_kv_heads=2, causal=False).eval()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 7, 16, generator=gen)
    hand = by_hand(lambda q, k: q // 3 == k // 3 and k <= q, 7, 7)
    torch.testing.assert_close(a(x), b(x, mask=hand), rtol=0, atol=0)


def test_attention_keeps_sliding_window_and_refuses_two_windows():
    a = MultiHeadAttention(16, 4, sliding_window=3)
    assert a.layer_mask == SlidingWindow(3) and a.sliding_window == 3
    assert MultiHeadAttention(16, 4, layer_mask=Chunked(3)).sliding_window is None
    with pytest.raises(ValueError, match="not both"):
        MultiHeadAttention(16, 4, sliding_window=3, layer_mask=Chunked(3))
    with pytest.raises(TypeError, match="layer_mask must be a llmviz.attention.mask_kinds.Mask"):
        MultiHeadAttention(16, 4, layer_mask=3)


def test_registry_of_layer_mask_kinds():
    assert MASK_KINDS.names(local=True) == ("sliding", "chunked")
    assert layer_mask("chunked", 4) == Chunked(4) and layer_mask("sliding", 4) == SlidingWindow(4)
    assert layer_mask("chunked", None) == Causal() and layer_mask("global") == Causal()
    with pytest.raises(ValueError, match=r"mask kind='dilated' is not supported"):
        layer_mask("dilated", 4)
