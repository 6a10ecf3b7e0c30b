"""Chapter 9's experiments: the probes against independent computations, prefixes, bad input."""

from __future__ import annotations

import math

import pytest
import torch

import llmviz as lv
from llmviz.attention.metrics import mass_by_distance
from llmviz.experiments import ch09
from llmviz.experiments._ch09_probes import (attention_probe, last_query_scores, sinusoidal_norms,
                                             sliding_losses, uniform_far_mass, window_losses)
from llmviz.model import DecoderLM
from llmviz.training.evaluation import score_tails, tail_ends, tail_targets

TINY = dict(ch09.RACE_SIZES["cpu"], d_model=16, n_heads=4, steps=20, curve_every=10, n_ends=4,
            mech_windows=2, batch_size=4)


def _model(scheme: str, seed: int = 0) -> DecoderLM:
    torch.manual_seed(seed)
    return DecoderLM(ch09.config_for(scheme, TINY)).to(lv.device()).eval()


def test_window_losses_tail_equals_score_tails():
    model, tokens = _model("RoPE"), ch09.data()[1]
    ends = tail_ends(len(tokens), max_length=256, tail=64, n_ends=5)
    for length in (64, 256):
        ours = window_losses(model, tokens, ends, length)[:, -64:].mean(1)
        ref = score_tails(model, tokens, length, ends, tail=64)[0]
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)


def test_sliding_loss_is_the_last_position_of_a_window_of_that_length():
    model, tokens = _model("ALiBi"), ch09.data()[1]
    ends = tail_ends(len(tokens), max_length=128, tail=8, n_ends=3)
    targets = tail_targets(ends, 8)
    ours = sliding_losses(model, tokens, targets, 32, batch_windows=5)
    ref = torch.stack([window_losses(model, tokens, t.view(1), 32)[0, -1]
                       for t in targets.flatten()])
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("length, tail", [(64, 64), (512, 64), (100, 10)])
def test_uniform_far_mass_matches_mass_by_distance_of_uniform_weights(length, tail):
    causal = torch.tril(torch.ones(length, length))
    uniform = (causal / causal.sum(-1, keepdim=True))[-tail:][None]  # (1, tail, length)
    expected = float(mass_by_distance(uniform)[0, tail:].sum())
    assert uniform_far_mass(length, tail) == pytest.approx(expected, abs=1e-6)
    if length == tail:
        assert uniform_far_mass(length, tail) == 0.0


def test_attention_probe_is_a_share_and_entropy_is_below_uniform():
    model, tokens = _model("NoPE"), ch09.data()[1]
    ends = tail_ends(len(tokens), max_length=128, tail=16, n_ends=2)
    probe = attention_probe(model, tokens, ends, 128, 16)
    assert 0.0 <= probe["far_mass"] <= 1.0
    assert 0.0 < probe["entropy"] <= probe["uniform_entropy"] + 1e-6
    # a NoPE model at initialisation attends almost uniformly: its far share is uniform's
    assert probe["far_mass"] == pytest.approx(uniform_far_mass(128, 16), abs=0.02)


def test_last_query_scores_reproduce_the_models_attention_weights():
    model, tokens = _model("RoPE"), ch09.data()[1]
    ids = tokens[:40].view(2, 20)
    scores = last_query_scores(model, ids)
    weights = model(ids.to(lv.device()), return_weights=True).weights
    for s, w in zip(scores, weights):
        torch.testing.assert_close(torch.softmax(s.float(), -1), w[:, :, -1, :].float(),
                                   rtol=1e-4, atol=1e-6)


def test_sinusoidal_norms_position_norm_is_sqrt_half_width():
    model = _model("sinusoidal")
    used = torch.zeros(256, dtype=torch.bool)
    used[32:127] = True
    norms = sinusoidal_norms(model, used, 64)
    assert norms["position"] == pytest.approx(math.sqrt(16 / 2), rel=1e-5)
    # init std 0.02, scaled by sqrt(C): about 0.02 * sqrt(C) * sqrt(C)
    assert norms["token"] == pytest.approx(0.02 * 16, rel=0.2)


def test_race_prefix_repeats_the_start_of_the_full_curve():
    full = ch09.race("T5", 1, **TINY)
    assert len(full["curve"]) == TINY["steps"] // TINY["curve_every"] + 1
    assert set(full["nll"]) == {"1x", "2x", "4x", "8x"}
    assert len(full["by_position"]) == 8 * 8  # bins of T/8 over the 8T window
    short = ch09.race("T5", 1, prefix=10, **TINY)
    assert short == {"curve": full["curve"][:2]}
    assert ch09.race("T5", 1, prefix=5, **TINY) == short  # stops at the next curve point
    assert full["curve"][-1] < full["curve"][0]  # it learned something in 20 steps


def test_stretch_starts_from_the_race_model_and_fine_tunes():
    p = dict(TINY, ft_steps=[2, 4], ft_batch=1)
    rope = ch09.race("RoPE", 0, **TINY)
    plain = ch09.stretch("RoPE", 0, **p)
    assert plain["nll"] == pytest.approx(rope["nll"])  # same weights, same targets
    assert plain["curve"] == pytest.approx(rope["curve"])
    assert len(plain["ft_nll"]) == 3 and plain["ft_nll"][0] == pytest.approx(rope["nll"]["8x"])
    pi = ch09.stretch("PI", 0, **p)
    assert pi["nll"]["1x"] != pytest.approx(rope["nll"]["1x"], abs=1e-9)
    assert "ft_nll" not in ch09.stretch("dynamic NTK", 0, **p)
    assert next(ch09.trained_model("RoPE", 0, TINY).parameters()).device.type == lv.device().type


def test_bad_input_names_the_fix():
    with pytest.raises(ValueError, match="unknown scheme 'rope'.*ALiBi"):
        ch09.config_for("rope", TINY)
    with pytest.raises(ValueError, match="unknown stretch 'ntk'"):
        ch09.stretch_scaling("ntk", TINY)
    with pytest.raises(ValueError, match=r"prefix must be an int number of training steps in \[1, 20\]"):
        ch09.race("ALiBi", 0, prefix=25, **TINY)


def test_recording_runs_the_code_instead_of_reading_the_cache(monkeypatch):
    from llmviz.evidence.records import RECORDING_ENV

    cached = ch09.race("NoPE", 2, **TINY)  # trains and caches
    calls = []
    real = ch09._pretrain
    monkeypatch.setattr(ch09, "_pretrain", lambda *a: calls.append(a) or real(*a))
    assert ch09.race("NoPE", 2, **TINY) == cached and not calls  # read from the cache
    monkeypatch.setenv(RECORDING_ENV, "ch09_race long")
    assert ch09.race("NoPE", 2, **TINY) == cached and len(calls) == 1  # trained again, same numbers
