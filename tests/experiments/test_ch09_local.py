"""Chapter 9's local comparator and matched score ratio: the windowed model never sees a
distance past T, the matched statistic agrees with a direct computation, and the run is the
race's model."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import llmviz as lv
from llmviz.experiments import ch09
from llmviz.experiments._ch09_probes import last_query_scores
from llmviz.experiments.ch09_local import LOCAL, LOCAL_SIZES, local, matched_score_ratios
from llmviz.model import DecoderLM

TINY = dict(ch09.RACE_SIZES["cpu"], d_model=16, n_heads=4, steps=20, curve_every=10, n_ends=4,
            mech_windows=2, batch_size=4)


def _model(seed: int = 0) -> DecoderLM:
    torch.manual_seed(seed)
    return DecoderLM(ch09.config_for("RoPE", TINY)).to(lv.device()).eval()


@torch.no_grad()
def test_matched_ratio_against_a_direct_computation():
    model, T = _model(), TINY["seq_len"]
    got = matched_score_ratios(model, TINY, draws=3)
    assert len(got["page"]) == len(got["matched"]) == TINY["n_layers"]
    L = ch09.FACTORS[-1] * T
    ends = ch09._ends(TINY)[: TINY["mech_windows"]]
    ids = ch09.data()[1][ends[:, None] - L + torch.arange(L)]
    gen = torch.Generator().manual_seed(0)
    picks = [torch.randperm(L - T, generator=gen)[:T] for _ in range(3)]
    for layer, s in enumerate(last_query_scores(model, ids)):
        s = s.float().cpu()
        near = s[..., L - T:].amax(-1).mean()
        assert got["page"][layer] == pytest.approx(float(s[..., : L - T].amax(-1).mean() / near), rel=1e-5)
        by_draw = [float(s[..., : L - T][..., p].amax(-1).mean() / near) for p in picks]
        assert got["matched"][layer] == pytest.approx(sum(by_draw) / 3, rel=1e-5)
        # a maximum over fewer keys can only be smaller, draw by draw
        assert all(b <= got["page"][layer] + 1e-6 for b in by_draw)


@torch.no_grad()
def test_windowed_model_ignores_keys_past_t():
    """Changing a token more than T back moves the plain model's last logits but not the
    windowed model's: the window is what makes it local."""
    model, T = _model(), TINY["seq_len"]
    windowed = DecoderLM(dataclasses.replace(ch09.config_for("RoPE", TINY), sliding_window=T))
    windowed = windowed.to(lv.device()).eval()
    windowed.load_state_dict(model.state_dict())
    ids = ch09.data()[1][: 3 * T][None].to(lv.device())
    other = ids.clone()
    other[0, 0] = (other[0, 0] + 1) % 256
    assert not torch.allclose(model(ids).logits[0, -1], model(other).logits[0, -1])
    assert torch.equal(windowed(ids).logits[0, -1], windowed(other).logits[0, -1])
    # within T the window changes nothing
    short = ids[:, :T]
    torch.testing.assert_close(windowed(short).logits, model(short).logits)


def test_local_run_and_bad_input(monkeypatch, tmp_path):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # a private cache of trained models
    p = dict(TINY, draws=2)
    out = local("RoPE", 0, **p)
    assert set(out) == {"curve", "nll", "windowed_nll", "score_page", "score_matched"}
    assert out["windowed_nll"]["1x"] == pytest.approx(out["nll"]["1x"], rel=1e-5)  # tails read <= T keys
    race = ch09.race("RoPE", 0, **TINY)  # the same trained model as the race's
    assert out["curve"] == race["curve"] and out["nll"] == pytest.approx(race["nll"])
    assert local("RoPE", 0, prefix=10, **p)["curve"] == race["curve"][:2]
    with pytest.raises(ValueError, match="RoPE models only, got variant 'ALiBi'"):
        local("ALiBi", 0, **p)
    with pytest.raises(ValueError, match="draws must be a positive int, got 0"):
        matched_score_ratios(_model(), TINY, draws=0)
    assert LOCAL.variants == ["RoPE"] and set(LOCAL_SIZES) == {"cpu", "long"}
