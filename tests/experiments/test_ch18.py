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


def test_every_window_starts_with_bos_and_predicts_every_byte():
    import torch

    w = torch.arange(12).view(2, 6)
    inp, tgt = ch18.with_bos(w)
    assert (inp[:, 0] == ch18.BOS).all() and torch.equal(inp[:, 1:], w[:, :-1])
    assert torch.equal(tgt, w)
    draw = ch18.bos_batches(torch.arange(100), batch=3, seq_len=8)
    x, y = draw(torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (3, 8) and (x[:, 0] == ch18.BOS).all()
    assert torch.equal(x[:, 2:], y[:, 1:-1])  # shifted by one: a next-token batch
    with pytest.raises(ValueError, match="longer than seq_len=8"):
        ch18.bos_batches(torch.arange(5), batch=1, seq_len=8)


def test_a_run_measures_sink_mass_and_the_cost_of_cutting_the_span():
    p = dict(PARAMS, steps=2, eval_every=1, val_windows=4)
    out = ch18.window_run("all local, short window", 0, **p)
    assert out["cut_cost"] == pytest.approx(0.0, abs=1e-5)  # already every layer at the short span
    assert list(out["sink_mass"]) == [f"L{i}" for i in range(p["n_layers"])]
    assert all(len(h) == p["n_heads"] and min(h) >= 0 for h in out["sink_mass"].values())
