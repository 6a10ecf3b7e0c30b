"""Chapter 18's window ablation: the layer patterns and a run's curve."""

from __future__ import annotations

import pytest

from llmviz.experiments import ch18

PARAMS = dict(ch18.SIZES["cpu"], short=16, long=48, seq_len=128)  # the windows the asserts name


def test_layer_patterns_follow_gemma3s_layout():
    assert ch18.layer_windows("all global", **PARAMS) == (None,) * 6
    assert ch18.layer_windows("5:1, short window", **PARAMS) == (16,) * 5 + (None,)
    assert ch18.layer_windows("5:1, long window", **PARAMS) == (48,) * 5 + (None,)
    assert ch18.layer_windows("2:1, short window", **PARAMS) == (16, 16, None) * 2
    assert ch18.layer_windows("all local, short window", **PARAMS) == (16,) * 6
    for size in ch18.SIZES.values():  # at every size the windows cut the context
        assert size["seq_len"] > size["long"] > size["short"]
    with pytest.raises(ValueError, match="variant='3:1' is not one of"):
        ch18.layer_windows("3:1", **PARAMS)


def test_a_prefix_reproduces_the_start_of_the_curve():
    p = dict(PARAMS, steps=3, eval_every=1, val_windows=4)
    full = ch18.window_run("2:1, short window", 0, **p)
    assert len(full["curve"]) == 4 and full["loss"] == pytest.approx(full["curve"][-1])
    assert ch18.window_run("2:1, short window", 0, prefix=1, **p)["curve"] == pytest.approx(full["curve"][:2])
