"""Chapter 9's context experiment: planted-copy retrieval and loss by position against a
sliding window, checked against direct computations, and its run against the race's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import llmviz as lv
from llmviz.experiments import ch09
from llmviz.experiments._ch09_probes import sliding_losses, window_losses
from llmviz.experiments.ch09_context import context, copy_losses, position_losses
from llmviz.model import DecoderLM
from llmviz.training.evaluation import tail_ends

TINY = dict(ch09.RACE_SIZES["cpu"], d_model=16, n_heads=4, steps=20, curve_every=10, n_ends=4,
            mech_windows=2, batch_size=4)


def _model(scheme: str, seed: int = 0) -> DecoderLM:
    torch.manual_seed(seed)
    return DecoderLM(ch09.config_for(scheme, TINY)).to(lv.device()).eval()


@torch.no_grad()
def test_copy_losses_match_a_window_built_by_hand():
    model, tokens = _model("ALiBi"), ch09.data()[1]
    ends = tail_ends(len(tokens), max_length=128, tail=16, n_ends=4)
    length, d, k = 100, 40, 8
    got = copy_losses(model, tokens, ends, length, d, k)
    for key in ("none", "plant"):
        losses = []
        for i, e in enumerate(ends.tolist()):
            w = tokens[e - length : e + 1].clone()
            other = int(ends[(i - 2) % 4])  # roll by n // 2 = 2
            seg = tokens[other - k + 1 : other + 1]
            w[-k:] = seg
            if key == "plant":  # the same bytes, d earlier
                w[length + 1 - k - d : length + 1 - d] = seg
                assert torch.equal(w[-k:], w[-k - d : -d])
            logits = model(w[None, :-1].to(lv.device())).logits[0].float()
            losses.append(F.cross_entropy(logits[-(k - 1):], w[-(k - 1):].to(lv.device())))
        assert got[key] == pytest.approx(float(torch.stack(losses).mean()), rel=1e-5)


def test_copy_losses_bad_input():
    model, tokens = _model("NoPE"), ch09.data()[1]
    ends = tail_ends(len(tokens), max_length=128, tail=16, n_ends=2)
    with pytest.raises(ValueError, match="distance >= copy_len"):
        copy_losses(model, tokens, ends, 64, 4, 8)
    with pytest.raises(ValueError, match="does not fit a window of 64; use a distance up to 57"):
        copy_losses(model, tokens, ends, 64, 60, 8)


def test_position_losses_are_window_and_sliding_losses_binned():
    model, tokens = _model("T5"), ch09.data()[1]
    ends = tail_ends(len(tokens), max_length=64, tail=16, n_ends=4)
    assert int(ends[0]) == 64  # the first window starts at the stream's start: left out
    full, slide = position_losses(model, tokens, ends, 64, 16, 8)
    kept = ends[1:]
    ref_full = window_losses(model, tokens, kept, 64).mean(0).view(8, 8).mean(1)
    targets = kept[:, None] - 63 + torch.arange(64)
    ref_slide = sliding_losses(model, tokens, targets, 16).view(3, 64).mean(0).view(8, 8).mean(1)
    assert full == pytest.approx(ref_full.tolist(), rel=1e-6)
    assert slide == pytest.approx(ref_slide.tolist(), rel=1e-6)
    # at the last position of a window of 16 the two read the same 16 tokens
    f16, s16 = position_losses(model, tokens, kept, 16, 16, 16)
    assert f16[-1] == pytest.approx(s16[-1], rel=1e-5)
    with pytest.raises(ValueError, match="bins"):
        position_losses(model, tokens, ends, 64, 16, 7)


def test_context_measures_the_race_model():
    p = dict(TINY, copy_len=8, copy_distances=[0.5, 2])
    out = context("ALiBi", 1, **p)
    race = ch09.race("ALiBi", 1, **TINY)
    assert out["curve"] == pytest.approx(race["curve"])  # the same model as the race's
    assert set(out["copy"]) == {"0.5T", "2T"} and set(out["attention"]) == {"1x", "2x", "4x", "8x"}
    assert out["attention"]["1x"]["far_mass"] == 0.0
    assert context("ALiBi", 1, prefix=10, **p) == {"curve": race["curve"][:2]}


def test_attention_spread_agrees_with_the_race_probe_and_adds_top_mass():
    from llmviz.experiments._ch09_probes import attention_probe
    from llmviz.experiments.ch09_context import attention_spread
    model, tokens = _model("T5"), ch09.data()[1]
    ends = tail_ends(len(tokens), max_length=128, tail=16, n_ends=2)
    ours, ref = attention_spread(model, tokens, ends, 128, 16), attention_probe(model, tokens, ends, 128, 16)
    for key in ("far_mass", "entropy", "uniform_entropy"):
        assert ours[key] == pytest.approx(ref[key], rel=1e-5)
    assert 5 / 128 <= ours["top_mass"] <= 1.0  # at least uniform attention's top 5


def test_max_scores_split_the_last_querys_scores_at_the_training_length():
    from llmviz.experiments._ch09_probes import last_query_scores
    from llmviz.experiments.ch09_context import max_scores
    model, tokens = _model("RoPE"), ch09.data()[1]
    ends = tail_ends(len(tokens), max_length=96, tail=16, n_ends=3)
    got = max_scores(model, tokens, ends, 96, 64)
    s = last_query_scores(model, tokens[ends[:, None] - 96 + torch.arange(96)])[0]
    distance = torch.arange(95, -1, -1)
    assert got["far"][0] == pytest.approx(float(s[..., distance >= 64].amax(-1).mean()), rel=1e-5)
    assert got["near"][0] == pytest.approx(float(s[..., distance < 64].amax(-1).mean()), rel=1e-5)
    assert len(got["far"]) == model.config.n_layers


@torch.no_grad()
def test_shuffle_control_repeats_copy_losses_and_plants_the_same_bytes_out_of_order():
    from llmviz.experiments.ch09_shuffle import order_gain, shuffle_control
    model, tokens = _model("RoPE"), ch09.data()[1]
    ends = tail_ends(len(tokens), max_length=128, tail=16, n_ends=4)
    length, d, k = 100, 40, 8
    got = shuffle_control(model, tokens, ends, length, d, k, seed=3)
    ref = copy_losses(model, tokens, ends, length, d, k)
    assert got["none"] == pytest.approx(ref["none"], rel=1e-6)
    assert got["plant"] == pytest.approx(ref["plant"], rel=1e-6)
    # the shuffled plant, rebuilt by hand: a permutation of the segment's bytes, one per window
    gen = torch.Generator().manual_seed(3)
    losses = []
    for i, e in enumerate(ends.tolist()):
        w = tokens[e - length : e + 1].clone()
        other = int(ends[(i - 2) % 4])
        seg = tokens[other - k + 1 : other + 1]
        w[-k:] = seg
        w[length + 1 - k - d : length + 1 - d] = seg[torch.randperm(k, generator=gen)]
        assert sorted(w[-k - d : -d].tolist()) == sorted(seg.tolist())
        logits = model(w[None, :-1].to(lv.device())).logits[0].float()
        losses.append(F.cross_entropy(logits[-(k - 1):], w[-(k - 1):].to(lv.device())))
    assert got["shuffled"] == pytest.approx(float(torch.stack(losses).mean()), rel=1e-5)
    gains = order_gain(got)
    assert gains["gain"] - gains["shuffled_gain"] == pytest.approx(gains["order"], abs=1e-9)
    with pytest.raises(ValueError, match="missing \\['shuffled'\\]"):
        order_gain(ref)
    with pytest.raises(ValueError, match="distance >= copy_len"):
        shuffle_control(model, tokens, ends, 64, 4, 8)
    with pytest.raises(ValueError, match="use a distance up to 57"):
        shuffle_control(model, tokens, ends, 64, 60, 8)
