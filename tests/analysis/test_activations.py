"""Activation memory (Korthikanti et al.), window-aware per layer: hand-computed cases."""

import pytest

from llmviz.analysis import activation_bytes, activation_bytes_by_layer
from llmviz.model.presets import gemma2, llama2, mistral

# width 64, 4 heads, 2 layers, 32 tokens, one sequence: per layer sbC * 34 = 32 * 64 * 34 = 69632
TOKEN_TERM = 32 * 64 * 34


def _cfg(**kw):
    return llama2(d_model=64, n_heads=4, n_kv_heads=4, n_layers=2, max_seq_len=64, **kw)


def test_global_layers_keep_every_key():
    # 5 a s^2 b = 5 * 4 * 32 * 32 = 20480 per layer
    assert activation_bytes_by_layer(_cfg(), 32) == [TOKEN_TERM + 20480] * 2
    assert activation_bytes(_cfg(), 32) == 2 * (69632 + 20480) == 180224


def test_windowed_layers_keep_only_the_window():
    # window 8: 5 a s min(s, W) b = 5 * 4 * 32 * 8 = 5120 per layer
    assert activation_bytes(_cfg(sliding_window=8), 32) == 2 * (69632 + 5120) == 149504
    # a window longer than the sequence changes nothing
    assert activation_bytes(_cfg(sliding_window=64), 32) == activation_bytes(_cfg(), 32)


def test_local_and_global_layers_mixed():
    # Gemma 2's pattern: layer 0 sliding, layer 1 global
    cfg = _cfg(sliding_window=8, global_every=2)
    assert [cfg.window_for(i) for i in range(2)] == [8, None]
    assert activation_bytes_by_layer(cfg, 32) == [69632 + 5120, 69632 + 20480]


def test_without_dropout_and_batch():
    # sbC * 32 + 2 a s min(s, W) b, twice for b = 2: (65536 + 2048) * 2 per layer
    assert activation_bytes_by_layer(_cfg(sliding_window=8), 32, batch=2, dropout=False) == [135168] * 2


def test_published_models():
    # Mistral 7B at 32k with its 4096 window: 32 * s * C * 34 + 32 * 5 * 32 * s * 4096
    s, C = 32768, 4096
    assert activation_bytes(mistral("7b"), s) == 32 * (s * C * 34 + 5 * 32 * s * 4096)
    # the formula as written (every key) is the same model without its window
    full = 32 * s * C * (34 + 5 * 32 * s / C)
    assert activation_bytes(mistral("7b").replace(sliding_window=None), s) == full
    assert activation_bytes(mistral("7b"), s) < full / 6
    # Gemma 2 2B: half its layers windowed, so between the two bounds
    g = gemma2("2b")
    s = g.max_seq_len * 2
    every_key = activation_bytes(g.replace(sliding_window=None, global_every=None), s)
    assert every_key > activation_bytes(g, s) > activation_bytes(g.replace(global_every=None), s)


def test_bad_input():
    with pytest.raises(TypeError, match="config must be a ModelConfig"):
        activation_bytes({"d_model": 64}, 32)
    with pytest.raises(ValueError, match="seq_len"):
        activation_bytes(_cfg(), 0)
    with pytest.raises(ValueError, match="batch"):
        activation_bytes(_cfg(), 32, batch=-1)
    with pytest.raises(TypeError, match="dropout"):
        activation_bytes(_cfg(), 32, dropout=1)
