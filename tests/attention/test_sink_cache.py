"""SinkCache: sinks plus a rolling window, positions in the cache, RoPE keys moved on eviction."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention import MultiHeadAttention
from llmviz.attention.kv_cache import SinkCache, rope_key_shift
from llmviz.position.rotary import RotaryEmbedding


def _layer(rope=True, alibi=False):
    torch.manual_seed(0)
    rot = RotaryEmbedding(8) if rope else None
    return MultiHeadAttention(32, 4, n_kv_heads=2, rope=rot, alibi=alibi).double().eval(), rot


@pytest.mark.parametrize("kind", ["rope", "alibi"])
@pytest.mark.parametrize("sinks,window", [(2, 5), (0, 4), (4, 1)])
def test_streaming_equals_attention_over_sinks_and_window_at_cache_positions(kind, sinks, window):
    """Token by token through the cache = attending afresh over (sinks, window, new token)."""
    layer, rot = _layer(rope=kind == "rope", alibi=kind == "alibi")
    shift = rope_key_shift(rot.inv_freq) if rot is not None else None
    cache = SinkCache(window, sinks, rope_shift=shift)
    x = torch.randn(1, 20, 32, dtype=torch.float64)
    with torch.no_grad():
        for t in range(20):
            out = layer(x[:, t:t + 1], cache=cache)
            past = list(range(t))
            kept = past if len(past) <= sinks + window else past[:sinks] + past[len(past) - window:]
            ref = layer(x[:, kept + [t]])[:, -1:]  # fresh positions 0..len(kept)
            torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-9)
            assert cache.length() == min(t + 1, sinks + window)
    assert cache.evicted == [max(0, 20 - sinks - window)]


def test_without_the_shift_rope_keys_keep_stale_positions():
    layer, rot = _layer()
    stale, moved = SinkCache(3, 1), SinkCache(3, 1, rope_shift=rope_key_shift(rot.inv_freq))
    x = torch.randn(1, 9, 32, dtype=torch.float64)
    with torch.no_grad():
        for t in range(9):
            a, b = layer(x[:, t:t + 1], cache=stale), layer(x[:, t:t + 1], cache=moved)
    assert (a - b).abs().max() > 1e-3  # the ablation differs once tokens have left


def test_rope_key_shift_adds_positions():
    rot = RotaryEmbedding(8)
    k = torch.randn(1, 2, 5, 8, dtype=torch.float64)
    pos = torch.arange(5)
    shift = rope_key_shift(rot.inv_freq)
    _, k3 = rot(k, k, pos)
    _, k_plus = rot(k, k, pos + 3)
    # angles are float32 (as Hugging Face keeps them), so agreement is to float32 rounding
    torch.testing.assert_close(shift(k3, 3), k_plus, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(shift(shift(k3, 3), -3), k3, rtol=1e-6, atol=1e-6)


def test_sink_cache_bad_input():
    with pytest.raises(ValueError, match=r"window must be a positive int .*got 0"):
        SinkCache(0)
    with pytest.raises(ValueError, match=r"sink_tokens must be an int >= 0; got -1"):
        SinkCache(4, -1)
    with pytest.raises(TypeError, match=r"rope_shift must be callable"):
        SinkCache(4, 2, rope_shift=3)
