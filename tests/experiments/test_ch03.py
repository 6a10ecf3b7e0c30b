"""Chapter 3's uptraining experiment: the conversions, one short run, and bad input."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention import MultiHeadAttention, gqa_from_mha
from llmviz.experiments import ch03


def _tiny():
    return dict(ch03.SIZES["cpu"], teacher_steps=3, uptrain_steps=5, val_size=8, batch=4)


def test_first_head_keeps_head_zero_of_each_group():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    out = ch03.first_head_of_group(mha, 2)
    d = mha.head_dim
    for name in ("k_proj", "v_proj"):
        full = getattr(mha, name).weight.view(4, d, 16)
        kept = getattr(out, name).weight.view(2, d, 16)
        assert torch.equal(kept[0], full[0]) and torch.equal(kept[1], full[2])
        pooled = getattr(gqa_from_mha(mha, 2), name).weight.view(2, d, 16)
        assert torch.allclose(pooled[1], full[2:].mean(0))  # the mean-pool differs from it
        assert not torch.allclose(pooled[1], kept[1])


def test_a_run_returns_every_start_and_both_references():
    out = ch03.uptrain_run("uptrain", 0, **_tiny())
    assert set(out) == {"teacher", "curve", *ch03.STARTS, "teacher+", "scratch"}
    for start in ch03.STARTS:
        r = out[start]
        assert len(r["curve"]) == 6 and r["curve"][0] == r["before"] and r["curve"][-1] == r["after"]
    assert 0.0 <= out["teacher"]["acc"] <= 1.0
    # the same seed gives the same numbers; a prefix reproduces the teacher's start
    again = ch03.uptrain_run("uptrain", 0, **_tiny())
    assert again["mean-pool"]["after"] == out["mean-pool"]["after"]
    short = ch03.uptrain_run("uptrain", 0, prefix=2, **_tiny())
    assert list(short) == ["curve"] and short["curve"][0] == out["curve"][0]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="is not one of"):
        ch03.uptrain_run("mha", 0, **_tiny())
    with pytest.raises(ValueError, match="prefix must be an int"):
        ch03.uptrain_run("uptrain", 0, prefix=9, **_tiny())


def test_the_live_run_is_the_run_without_the_scratch_reference():
    full = ch03.uptrain_run("uptrain", 0, **_tiny())
    live = ch03.uptrain_live(0, **_tiny())
    assert live == {k: v for k, v in full.items() if k != "scratch"}
