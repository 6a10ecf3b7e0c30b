"""Chapter 16's experiment: the router learns (its gradient), the variants match compute."""

from __future__ import annotations

import pytest
import torch

from llmviz.analysis import count_parameters
from llmviz.experiments import ch16

PARAMS = ch16.SIZES["cpu"]


@pytest.mark.parametrize("name", ch16.MOE_VARIANTS)
def test_router_gets_a_gradient_in_the_chapters_config(name):
    config = ch16.variants(**PARAMS)[name]
    assert config.experts_top_k == 1 and config.moe_normalize is False
    assert ch16.router_grad_norm(config) > 1e-5


def test_renormalised_top1_starves_the_router():
    # one kept weight renormalised is exactly 1: the loss cannot reach the router
    config = ch16.variants(**PARAMS, normalize=True)["MoE, no balancing"]
    assert ch16.router_grad_norm(config) == 0.0


def test_variants_match_active_compute_and_total_ffn():
    v = ch16.variants(**PARAMS)
    dense, wide, moe = (count_parameters(v[n]) for n in ("dense", "dense 4x FFN", "MoE, no balancing"))
    assert v["MoE, no balancing"].expert_d_ff == v["dense"].d_ff  # one expert per token = the dense FFN
    assert v["dense 4x FFN"].d_ff == ch16.N_EXPERTS * v["dense"].d_ff
    # same total parameters as four experts, up to the router
    assert abs(wide["total"] - moe["total"]) / moe["total"] < 0.01
    assert dense["total"] < moe["total"]


def test_moe_run_prefix_returns_its_curve_and_load():
    # warmup 1, so the learning-rate schedule after it depends on the run's length
    params = dict(PARAMS, val_windows=8, eval_every=2, warmup=1, steps=6)
    out = ch16.moe_run("MoE + bias balancing", 0, prefix=4, **params)
    assert set(out) == {"curve", "course"}  # a prefix returns only what is measured at fixed steps
    assert len(out["curve"]) == 3 and set(out["course"]) == {f"e{e}" for e in range(ch16.N_EXPERTS)}
    full = ch16.moe_run("MoE + bias balancing", 0, **params)
    assert len(full["curve"]) == 4 and full["curve"][-1] == pytest.approx(full["loss"], abs=1e-5)
    # the prefix trains on the full run's schedule: its curve and load course are the record's start
    assert out["curve"] == pytest.approx(full["curve"][:3], abs=1e-6)
    for key, course in out["course"].items():
        assert course == pytest.approx(full["course"][key][:3], abs=1e-6)
    # a run of 4 steps (its own, shorter schedule) is not the start of the 6-step run
    short = ch16.moe_run("MoE + bias balancing", 0, **dict(params, steps=4))
    assert abs(short["curve"][2] - full["curve"][2]) > 1e-5
    out = ch16.moe_run("MoE + bias balancing", 0, **dict(params, steps=2))
    for shares in out["load"].values():
        assert sum(shares) == pytest.approx(1.0)
    # the dropped share never rises as the capacity grows, and a half capacity drops half or more
    assert len(out["dropped"]) == len(ch16.FACTORS) and ch16.FACTORS[0] == 0.5
    assert all(a >= b for a, b in zip(out["dropped"], out["dropped"][1:]))
    assert out["dropped"][0] >= 0.5
    text = out["text"]  # layer 0's router probabilities on the chapter's sentence, per expert
    assert set(text) == {f"e{e}" for e in range(ch16.N_EXPERTS)}
    assert all(len(p) == len(ch16.SENTENCE) for p in text.values())
    assert sum(text[f"e{e}"][0] for e in range(ch16.N_EXPERTS)) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="variant='sparse' is not one of"):
        ch16.moe_run("sparse", 0, prefix=1, **params)


def test_bigram_baseline_is_on_the_models_targets():
    loss = ch16.bigram_loss(**dict(PARAMS, val_windows=16))
    assert 1.5 < loss < 4.0  # nats per byte, well below the uniform 5.55


@pytest.mark.parametrize("size", sorted(ch16.SIZES))
def test_records_check_compares_curve_points_after_step_0(size):
    params, prefix = ch16.SIZES[size], ch16.MOE.prefix_for(size)
    assert prefix % params["eval_every"] == 0 and 2 * params["eval_every"] <= prefix < params["steps"]


def test_gap_change_fails_a_steady_trend_and_passes_a_flat_gap():
    steps = torch.arange(13, dtype=torch.float64)
    base = [3.0 - 0.1 * steps + 0.001 * s for s in range(4)]
    # a gap that closes steadily in every seed (0.2 -> 0.0 over the run), as the record's did
    trending = [b + 0.2 * (1 - steps / 12) + 0.002 * s for s, b in enumerate(base)]
    closing = ch16.gap_change(trending, base, start=9)
    assert closing.high < 0  # the interval excludes zero: the check fails for the trend
    # a gap that is flat up to per-seed noise of both signs
    noise = [0.003, -0.004, 0.002, -0.001]
    flat = [b + 0.01 + torch.where(steps >= 12, noise[s], 0.0) for s, b in enumerate(base)]
    held = ch16.gap_change(flat, base, start=9)
    assert held.low <= 0 <= held.high


def test_gap_change_names_bad_input():
    with pytest.raises(ValueError, match="same number"):
        ch16.gap_change([[1.0, 2.0]], [[1.0, 2.0], [1.0, 2.0]], start=0)
    with pytest.raises(ValueError, match="start must index"):
        ch16.gap_change([[1.0, 2.0]] * 2, [[1.0, 2.0]] * 2, start=1)


def test_gap_slopes_sees_a_steady_trend_that_noisy_end_points_hide():
    steps = torch.arange(13, dtype=torch.float64)
    base = [3.0 - 0.1 * steps + 0.001 * s for s in range(4)]
    # every seed's gap closes by 0.01 per point; the last point carries noise of both signs
    noise = [0.03, -0.02, 0.025, -0.03]
    closing = [b + 0.1 - 0.01 * steps + torch.where(steps >= 12, noise[s], 0.0)
               for s, b in enumerate(base)]
    slopes = ch16.gap_slopes(closing, base, start=8, every=100)
    assert all(s < 0 for s in slopes)
    # against numpy's least-squares fit of the same points (per 1000 steps)
    import numpy as np
    x = np.arange(8, 13) * 100
    for s, c in enumerate(closing):
        gap = (c - base[s]).numpy()[8:]
        assert abs(slopes[s] - 1000 * np.polyfit(x, gap, 1)[0]) < 1e-9
    # a flat gap fits a slope of zero
    flat = [b + 0.01 for b in base]
    assert all(abs(s) < 1e-9 for s in ch16.gap_slopes(flat, base, start=8, every=100))


def test_gap_slopes_names_bad_input():
    with pytest.raises(ValueError, match="same number"):
        ch16.gap_slopes([[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]] * 2, start=0)
    with pytest.raises(ValueError, match="three curve points"):
        ch16.gap_slopes([[1.0, 2.0, 3.0]] * 2, [[1.0, 2.0, 3.0]] * 2, start=1)
    with pytest.raises(ValueError, match="every must be"):
        ch16.gap_slopes([[1.0, 2.0, 3.0]] * 2, [[1.0, 2.0, 3.0]] * 2, start=0, every=0)
