"""Chapter 9's sensitivity runs: the T/4 T5 recipe differs from the race's only in its buckets,
its last bucket holds most of a window, the windowed scalings never read a key past T, and bad
input names the fix."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from llmviz.experiments import ch09
from llmviz.experiments.ch09_sensitivity import (SCALINGS, SENSITIVITY, quarter_t5_config,
                                                 sensitivity)
from llmviz.model import DecoderLM
from llmviz.position.relative import t5_relative_bucket

TINY = dict(ch09.RACE_SIZES["cpu"], d_model=16, n_heads=4, steps=20, curve_every=10, n_ends=4,
            mech_windows=2, batch_size=4)


def test_quarter_config_changes_only_the_buckets_and_fills_the_last_one():
    race, quarter = ch09.config_for("T5", TINY), quarter_t5_config(TINY)
    assert dataclasses.replace(quarter, t5_bias=race.t5_bias) == race
    T = TINY["seq_len"]
    d = torch.arange(T)
    last = {}
    for name, cfg in (("race", race), ("quarter", quarter)):
        s = cfg.t5_bias
        b = t5_relative_bucket(-d, bidirectional=False, num_buckets=s.num_buckets,
                               max_distance=s.max_distance)
        last[name] = int((b == s.num_buckets - 1).sum())
    assert last["race"] < T // 8 and last["quarter"] > T // 2  # a handful against most of a window


def test_quarter_config_refuses_a_window_too_short_for_its_buckets():
    with pytest.raises(ValueError, match="T >= 64"):
        quarter_t5_config(dict(TINY, seq_len=32))


def test_unknown_variant_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="'RoPE' and 'T5 T/4'"):
        sensitivity("ALiBi", 0, **TINY)


def test_quarter_prefix_is_the_start_of_the_full_curve():
    short = sensitivity("T5 T/4", 0, prefix=10, **TINY)["curve"]
    full = sensitivity("T5 T/4", 0, **TINY)
    assert full["curve"][: len(short)] == short
    assert set(full) == {"curve", "nll", "sliding", "attention"}
    assert set(full["nll"]) == {f"{f}x" for f in ch09.FACTORS}


@torch.no_grad()
def test_windowed_scalings_ignore_keys_past_t():
    """What the windowed arm measures: a token more than T back moves the full-attention model's
    last logits under every scaling, never the windowed one's."""
    torch.manual_seed(0)
    T = TINY["seq_len"]
    state = DecoderLM(ch09.config_for("RoPE", TINY)).state_dict()
    ids = torch.randint(0, 256, (1, 2 * T))
    moved = ids.clone()
    moved[0, 0] = (ids[0, 0] + 1) % 256
    for name in SCALINGS:
        cfg = ch09.config_for("RoPE", TINY, ch09.stretch_scaling(name, TINY))
        for window, changes in ((None, True), (T, False)):
            m = DecoderLM(dataclasses.replace(cfg, sliding_window=window))
            m.load_state_dict(state)
            m.eval()
            gap = float((m(ids).logits[0, -1] - m(moved).logits[0, -1]).abs().max())
            assert (gap > 1e-6) is changes, (name, window, gap)


def test_experiment_pairs_with_the_race():
    assert list(SENSITIVITY.seeds) == list(ch09.RACE.seeds)
    assert SENSITIVITY.variants == ["RoPE", "T5 T/4"]
