"""Reading chapter 9's runs: perplexities, checks and claims, on synthetic runs with known answers."""

from __future__ import annotations

import math

import pytest

from llmviz.evidence import CANNOT_DECIDE, FAILS, HOLDS, Runs
from llmviz.experiments import ch09
from llmviz.experiments.ch09_analysis import (context_claims, ppl, ppl_estimates, race_checks,
                                              race_claims)

# perplexity at 1x, 2x, 4x, 8x per scheme (seed noise added below); sliding-window perplexity
TRAINED = {"ALiBi": (4.0, 4.0, 4.0, 4.0), "sinusoidal": (4.5, 20, 30, 32),
           "learned": (4.0, 35, 37, 40), "RoPE": (3.8, 20, 50, 60), "NoPE": (7.0, 8, 9, 9.6),
           "T5": (3.9, 6, 9, 10)}
SLIDING = {"ALiBi": 3.9, "sinusoidal": 4.4, "learned": 4.3, "RoPE": 3.6, "NoPE": 7.5, "T5": 3.8}


def _runs(table, jitter=0.01):
    out = {}
    for seed in range(3):
        f = 1 + jitter * (seed - 1)
        out[seed] = {v: {"nll": {f"{k}x": math.log(p * f) for k, p in zip(ch09.FACTORS, pp)},
                         "sliding": math.log(SLIDING[v] * f)} for v, pp in table.items()}
    return Runs(out)


def test_ppl_and_log_scale_estimates():
    runs = _runs(TRAINED)
    assert ppl(runs, "RoPE", "8x").tolist() == pytest.approx([60 * 0.99, 60, 60 * 1.01])
    est = ppl_estimates(runs, ["RoPE"])["RoPE"][8]
    assert 0 < est.low < est.mean < est.high


def test_checks_pass_for_trained_models_and_fail_for_untrained_ones():
    bigram = 9.87
    assert all(c.passed for c in race_checks(_runs(TRAINED), bigram))
    flat = {v: (11.0, 11.0, 11.0, 11.0) for v in TRAINED}  # every model worse than the bigram
    checks = race_checks(_runs(flat), bigram)
    assert [c.passed for c in checks] == [False, False]
    claims = race_claims(_runs(flat), "live", bigram)
    assert {c.verdict for c in claims.values()} == {CANNOT_DECIDE}


def test_race_verdicts_on_known_data():
    claims = race_claims(_runs(TRAINED), "record", 9.87)
    assert claims["alibi_flat"].verdict == HOLDS
    assert claims["alibi_best"].verdict == HOLDS  # next best at 8T is NoPE, 9.6 / 4.0
    assert "NoPE" in claims["alibi_best"].quantity
    assert claims["rope"].verdict == FAILS
    assert claims["t5"].verdict == FAILS
    assert claims["press"].verdict == FAILS  # sinusoidal grows 7.1x, RoPE 15.8x


def test_context_claims_read_the_sliding_window():
    claims = context_claims(_runs(TRAINED), "record", 9.87)
    assert claims["ALiBi"].verdict == FAILS  # 4.0 at 8T against 3.9 reading T tokens
    assert claims["ALiBi"].estimate.mean == pytest.approx(4.0 / 3.9)
    assert all(c.passed for c in claims["ALiBi"].checks)
