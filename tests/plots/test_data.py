"""Tests for llmviz.plots._data: every accepted input layout reduces to the same arrays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from llmviz.plots import select_weights
from llmviz.plots._data import color_limit, panel_inches, query_key_labels, to_numpy


def test_to_numpy_is_float64_whatever_the_input():
    for x in (torch.arange(6).reshape(2, 3), torch.ones(2, dtype=torch.bfloat16), [1, 2], 3.5):
        a = to_numpy(x)
        assert isinstance(a, np.ndarray) and a.dtype == np.float64
    t = torch.tensor([1.0 / 3.0], dtype=torch.float64)
    assert to_numpy(t)[0] == 1.0 / 3.0  # float64 tensors keep every bit


def test_every_layout_selects_the_same_map():
    g = torch.Generator().manual_seed(0)
    w = torch.rand(2, 3, 4, 5, generator=g)  # (B, H, T, S)
    expected = w[1, 2].double().numpy()  # batch 1, head 2: (T, S)
    for weights, kwargs in (
        (w, {"batch": 1, "head": 2}),
        ([w], {"batch": 1, "head": 2}),
        ([w * 0, w], {"layer": 1, "batch": 1, "head": 2}),
        (w[1], {"head": 2}),
        (w[1, 2], {}),
        (w.numpy(), {"batch": 1, "head": -1}),
    ):
        np.testing.assert_array_equal(select_weights(weights, **kwargs), expected)
    assert select_weights(w, batch=1).shape == (3, 4, 5)  # head=None keeps every head


def test_query_labels_are_the_last_T_keys():
    tokens = ["a", "b", "c", "d", "e"]
    q, k = query_key_labels(tokens, 2, 5)
    assert k == tokens and q == ["d", "e"]
    assert query_key_labels(None, 2, 5) == (None, None)
    with pytest.raises(ValueError, match="tokens has 5 entries but the weights have S=4 keys"):
        query_key_labels(tokens, 2, 4)


def test_color_limit_and_panel_size():
    assert color_limit(np.array([0.2, 0.7]), None) == 0.7  # the largest value shown
    assert color_limit(np.zeros(3), None) == 1.0
    assert color_limit(np.array([0.2]), 2.0) == 2.0
    assert panel_inches(2.5) == (2.5, 2.5) and panel_inches((3, 2)) == (3.0, 2.0)
    with pytest.raises(ValueError, match="vmax must be positive, got 0"):
        color_limit(np.ones(2), 0)
    with pytest.raises(TypeError, match="panel_size must be a number of inches or a"):
        panel_inches("big")
    with pytest.raises(ValueError, match=r"panel_size must be a positive finite number of inches, got \(3, 0\)"):
        panel_inches((3, 0))
