"""Reading chapter 9's runs: perplexities, checks and claims, on synthetic runs with known answers."""

from __future__ import annotations

import math

import pytest

from llmviz.evidence import CANNOT_DECIDE, FAILS, HOLDS, Runs
from llmviz.experiments import ch09
from llmviz.experiments.ch09_analysis import (context_claims, copy_gain, dilution,
                                              dilution_claims, ppl, ppl_estimates, race_checks,
                                              race_claims, retrieval_claims)

# perplexity at 1x, 2x, 4x, 8x per scheme (seed noise added below); sliding-window perplexity
TRAINED = {"ALiBi": (4.0, 4.0, 4.0, 4.0), "sinusoidal": (4.5, 20, 30, 32),
           "learned": (4.0, 35, 37, 40), "RoPE": (3.8, 20, 50, 60), "NoPE": (7.0, 8, 9, 9.6),
           "T5": (3.9, 6, 9, 10)}
SLIDING = {"ALiBi": 3.9, "sinusoidal": 4.4, "learned": 4.3, "RoPE": 3.6, "NoPE": 7.5, "T5": 3.8}


def _runs(table, jitter=0.01, sliding=None):
    sliding = SLIDING if sliding is None else sliding
    out = {}
    for seed in range(3):
        f = 1 + jitter * (seed - 1)
        out[seed] = {v: {"nll": {f"{k}x": math.log(p * f) for k, p in zip(ch09.FACTORS, pp)},
                         "sliding": math.log(sliding[v] * f)} for v, pp in table.items()}
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
    flat_runs = _runs(flat, sliding={v: 11.0 for v in TRAINED})
    checks = race_checks(flat_runs, bigram)
    assert [c.passed for c in checks] == [False, False]
    claims = race_claims(flat_runs, "live", bigram)
    assert {c.verdict for c in claims.values()} == {CANNOT_DECIDE}


def test_race_verdicts_on_known_data():
    claims = race_claims(_runs(TRAINED), "record", 9.87)
    assert claims["alibi_flat"].verdict == HOLDS
    assert claims["alibi_best"].verdict == HOLDS  # next best at 8T is NoPE, 9.6 / 4.0
    assert "NoPE" in claims["alibi_best"].quantity
    assert claims["rope"].verdict == FAILS
    assert claims["t5"].verdict == FAILS
    assert claims["press"].verdict == FAILS  # against reading T: sinusoidal 7.3x, RoPE 16.7x
    # every ratio is taken against the sliding window, not the 1x tail
    assert claims["alibi_flat"].estimate.mean == pytest.approx(4.0 / 3.9)
    assert claims["t5"].estimate.mean == pytest.approx(10 / 3.8)
    tail_ref = _runs(TRAINED, sliding={v: pp[0] for v, pp in TRAINED.items()})
    assert race_claims(tail_ref, "record", 9.87)["t5"].estimate.mean == pytest.approx(10 / 3.9)


def test_context_claims_read_the_sliding_window():
    claims = context_claims(_runs(TRAINED), "record", 9.87)
    assert claims["ALiBi"].verdict == FAILS  # 4.0 at 8T against 3.9 reading T tokens
    assert claims["ALiBi"].estimate.mean == pytest.approx(4.0 / 3.9)
    assert all(c.passed for c in claims["ALiBi"].checks)


def _context_runs(control=0.8, far=0.02, dilute=(0.1, 0.9)):
    """Two schemes: 'near' keeps its attention spread, 'wide' spreads like uniform attention."""
    out = {}
    for seed in range(3):
        j = 0.01 * (seed - 1)
        res = {}
        for v, g in zip(("near", "wide"), dilute):
            att = {f"{f}x": {"entropy": 2.0 + g * (f - 1) + j, "uniform_entropy": 3.0 + (f - 1)}
                   for f in ch09.FACTORS}
            res[v] = {"curve": [2.0, math.log(4.0 + j)], "attention": att,
                      "control": {"none": 1.5, "plant": 1.5 - control - j},
                      "copy": {"7T": {"none": 1.5, "plant": 1.5 - far - j}}}
        out[seed] = res
    return Runs(out)


def test_retrieval_claims_need_a_working_control():
    claims = retrieval_claims(_context_runs(control=0.2, far=0.15), "record", 9.87, "7T")
    assert claims["near"].verdict == HOLDS  # 0.15 / 0.2 of the gain within T
    assert claims["near"].estimate.mean == pytest.approx(0.75, abs=0.02)
    assert claims["near"].id == "ch09_retrieves_7t_near"
    assert retrieval_claims(_context_runs(), "record", 9.87, "7T")["wide"].verdict == FAILS
    broken = retrieval_claims(_context_runs(control=0.01, far=0.5), "record", 9.87, "7T")
    assert broken["near"].verdict == CANNOT_DECIDE  # the control does not see retrieval
    assert copy_gain(_context_runs(), "near", "control") == pytest.approx([0.79, 0.8, 0.81])


def test_dilution_is_entropy_growth_over_uniform_growth():
    runs = _context_runs()
    assert dilution(runs, "wide") == pytest.approx([0.9] * 3)
    claims = dilution_claims(runs, "record", 9.87)
    assert claims["near"].verdict == FAILS and claims["wide"].verdict == HOLDS
    assert dilution_claims(runs, "record", 3.0)["wide"].verdict == CANNOT_DECIDE  # loses to it


def test_context_claims_with_the_ngram_check_cannot_decide_for_models_that_lose_to_it():
    claims = context_claims(_runs(TRAINED), "record", 9.87, ngram=3.7)
    assert {c.verdict for c in claims.values()} == {CANNOT_DECIDE}  # every model is above 3.7
    assert context_claims(_runs(TRAINED), "record", 9.87, ngram=10.0)["ALiBi"].verdict == FAILS


def test_score_claim_reads_the_largest_scores_of_the_context_record():
    from llmviz.experiments.ch09_analysis import mechanism_claims
    runs = _runs(TRAINED)
    for seed in runs.seeds:
        for v in ("RoPE", "ALiBi", "T5", "NoPE"):
            runs[seed][v]["attention"] = {"far_mass": 0.9}
    cx = Runs({s: {"RoPE": {"scores": {"plain": {"far": [14.0, 16.0 + s], "near": [7.0, 6.0]}}}}
               for s in range(3)})
    claim = mechanism_claims(runs, {"seq_len": 64}, "record", 9.87, cx=cx, cx_size="context")["scores"]
    assert claim.estimate.mean == pytest.approx((16 / 6 + 17 / 6 + 18 / 6) / 3)
    assert claim.verdict == HOLDS and claim.size == "context"
