"""Reading chapter 9's runs: perplexities, checks and claims, on synthetic runs with known answers."""

from __future__ import annotations

import math

import pytest

from llmviz.evidence import CANNOT_DECIDE, FAILS, HOLDS, Runs
from llmviz.experiments import ch09
from llmviz.experiments.ch09_analysis import (context_claims, locality_control, ppl, ppl_estimates,
                                              race_checks, race_claims, reach)
from llmviz.experiments.ch09_context_analysis import (copy_gain, dilution, dilution_claims,
                                                      retrieval_claims)
from llmviz.experiments.ch09_stretch_analysis import lowest, stretch_claims

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


def test_checks_and_ngram_bar_read_the_sliding_reference_not_the_1x_tail():
    # T5: 1x tail 3.9 (above an n-gram of 3.85), reading T tokens 3.8 (below it)
    claims = context_claims(_runs(TRAINED), "record", 9.87, ngram=3.85)
    ngram_check = claims["T5"].checks[-1]
    assert "reading T tokens" in ngram_check.name and ngram_check.passed
    assert claims["T5"].verdict == FAILS  # 10 at 8T against 3.8: worse, not better
    assert not claims["ALiBi"].checks[-1].passed  # 3.9 reading T tokens loses to 3.85
    # the bigram check: NoPE's tail (7.0) beats a bigram of 7.2, its sliding window (7.5) does not
    assert not race_checks(_runs(TRAINED), 7.2)[0].passed


def test_nope_race_claim_needs_its_positive_control():
    # NoPE scores better with less context (tail 7.0 < sliding 7.5): broken within T
    claim = race_claims(_runs(TRAINED), "record", 9.87)["nope"]
    assert claim.verdict == CANNOT_DECIDE
    assert not claim.checks[-1].passed and "NoPE" in claim.checks[-1].detail
    working = _runs(TRAINED, sliding={**SLIDING, "NoPE": 6.5})  # tail 7.0 > sliding 6.5
    claim = race_claims(working, "record", 9.87)["nope"]
    assert claim.checks[-1].passed and claim.verdict == FAILS  # 9.6/6.5 against ALiBi's 4.0/3.9


def _with_positions(runs, drops, text=None):
    """Paired curves over a window of 8T (64 bins): the loss read with the tokens before each
    target falls until bin ``drops[v]``, then lies on the loss of the same targets read with T
    tokens. ``text`` (64 values) is how hard each bin's bytes are, added to both curves."""
    text = [0.0] * 64 if text is None else text
    for seed in runs.seeds:
        for v, d in drops.items():
            runs[seed][v]["by_position"] = [t + 2.0 - 0.1 * min(i, d) for i, t in enumerate(text)]
            runs[seed][v]["sliding_by_position"] = [t + 2.0 - 0.1 * d for t in text]
    return runs


def test_reach_reads_the_paired_curve_not_the_text():
    from llmviz.experiments.ch09_analysis import context_excess
    # easy text in bins 2 and 3: a loss by position alone would bottom out there (24 to 32
    # tokens); on the same targets, reading more context keeps helping until bin 5 (48 tokens)
    text = [0.0, 0.0, -0.3, -0.3] + [0.0] * 60
    runs = _with_positions(_runs(TRAINED), {"RoPE": 5}, text)
    assert reach(runs, "RoPE", 64) == 48
    assert context_excess(runs, "RoPE", 64).tolist() == pytest.approx([0.5, 0.4, 0.3, 0.2, 0.1,
                                                                       0, 0, 0])
    from llmviz.experiments.ch09_stretch_analysis import gains_near_t
    assert gains_near_t(runs, 64).passed and "after 48 of 64" in gains_near_t(runs, 64).detail
    for seed in runs.seeds:  # the unpaired curve alone cannot say how far a model reads
        del runs[seed]["RoPE"]["sliding_by_position"]
    with pytest.raises(ValueError, match="paired curve"):
        reach(runs, "RoPE", 64)
    assert "not measured" in locality_control(runs, 64).detail


def test_reach_and_the_locality_control_of_the_flat_claim():
    drops = {v: 2 for v in TRAINED} | {"ALiBi": 3, "NoPE": 0}
    # NoPE working within T (tail 7.0 > sliding 6.5): the one comparator whose positions stay
    # in distribution past T
    working = {**SLIDING, "NoPE": 6.5}
    runs = _with_positions(_runs(TRAINED, sliding=working), drops)
    assert reach(runs, "ALiBi", 64) == 32 and reach(runs, "NoPE", 64) == 8
    control = locality_control(runs, 64, paired=runs)
    assert control.passed and "NoPE" in control.detail  # NoPE grows 9.6 / 6.5 past T
    claim = race_claims(runs, "record", 9.87, seq_len=64, ngram=10.0,
                        paired=runs)["alibi_flat"]
    assert claim.verdict == HOLDS and claim.checks[-1] == control
    assert "3.70" in race_claims(runs, "record", 9.87, ngram=3.7)["alibi_best"].text
    # a comparator as local as ALiBi that is flat too: flatness says nothing about ALiBi's scheme
    flat = _with_positions(_runs({**TRAINED, "NoPE": (7.0, 6.5, 6.5, 6.5)}, sliding=working), drops)
    assert not locality_control(flat, 64, paired=flat).passed
    assert race_claims(flat, "record", 9.87, seq_len=64,
                       paired=flat)["alibi_flat"].verdict == CANNOT_DECIDE
    # a scheme reading more than ALiBi does not count: no comparator left
    wider = _with_positions(_runs(TRAINED, sliding=working), drops | {"NoPE": 5})
    assert not locality_control(wider, 64, paired=wider).passed
    # NoPE broken within T (tail 7.0 < sliding 7.5): the working comparators (RoPE, T5, ...) all
    # read unseen positions past T, so the control cannot separate locality from that
    broken_runs = _with_positions(_runs(TRAINED), drops)
    broken = locality_control(broken_runs, 64, paired=broken_runs)
    assert not broken.passed and "cannot separate locality" in broken.detail
    assert "NoPE" in broken.detail.split("broken within T")[1]


def test_ngram_bar_gates_the_rankings_and_not_a_model_against_itself():
    claims = race_claims(_runs(TRAINED), "record", 9.87, ngram=3.7)  # all but RoPE above 3.7
    for key in ("alibi_best", "alibi_flat", "press", "nope"):  # rankings of schemes
        assert claims[key].verdict == CANNOT_DECIDE, key
        assert any("n-gram" in c.name and not c.passed for c in claims[key].checks)
    # a model's own 8T against its own reading of T tokens: the bigram check only, so T5, which
    # loses to the n-gram, is still decided, as RoPE (which beats it) is
    for key in ("rope", "t5", "alibi_survives"):
        assert not any("n-gram" in c.name for c in claims[key].checks), key
    assert claims["rope"].verdict == FAILS and claims["t5"].verdict == FAILS
    assert claims["alibi_survives"].verdict == HOLDS
    loose = race_claims(_runs(TRAINED), "record", 9.87, ngram=10.0)
    assert loose["alibi_best"].verdict == HOLDS and loose["rope"].verdict == FAILS


def test_retrieval_claims_need_the_copy_in_order_to_beat_a_shuffled_copy():
    cx = _context_runs(control=0.2, far=0.15)
    assert retrieval_claims(cx, "record", 9.87, "7T")["near"].verdict == HOLDS
    # the same gains, but a shuffled copy helps as much (order worth ~0): not retrieval
    same = retrieval_claims(cx, "record", 9.87, "7T",
                            order={"near": [0.001, -0.002, 0.0], "wide": [0.0, 0.0, 0.001]})
    assert same["near"].verdict == CANNOT_DECIDE
    assert not same["near"].checks[-1].passed and "shuffled" in same["near"].checks[-1].name
    # the order worth more than 0.02 nats in every seed: the box is read again
    ordered = retrieval_claims(cx, "record", 9.87, "7T",
                               order={"near": [0.1, 0.11, 0.12], "wide": [0.1, 0.11, 0.12]})
    assert ordered["near"].verdict == HOLDS and ordered["near"].checks[-1].passed
    with pytest.raises(ValueError, match="order has no entry for 'wide'"):
        retrieval_claims(cx, "record", 9.87, "7T", order={"near": [0.1, 0.11, 0.12]})


def test_retrieval_and_dilution_need_a_model_that_works_and_is_not_broken():
    cx = _context_runs(control=0.2, far=0.15)
    table = {"near": (4.0, 4.0, 4.0, 4.0), "wide": (4.0, 10, 20, 40)}  # wide: broken at 8T
    race = _runs(table, sliding={"near": 3.9, "wide": 3.9})
    claims = retrieval_claims(cx, "record", 9.87, "7T", race=race)
    assert claims["near"].verdict == HOLDS
    assert claims["wide"].verdict == CANNOT_DECIDE
    assert not claims["wide"].checks[-1].passed and "broken at 8T" in claims["wide"].checks[-1].name
    # within T a model that does better with less context (tail 4.0 < sliding 4.2) is broken
    bad = _runs(table, sliding={"near": 4.2, "wide": 3.9})
    assert retrieval_claims(cx, "record", 9.87, "7T", race=bad)["near"].verdict == CANNOT_DECIDE
    dil = dilution_claims(_context_runs(), "record", 9.87, race=bad)
    assert dil["near"].verdict == CANNOT_DECIDE and dil["wide"].verdict == HOLDS


def test_summarize_share_stays_inside_0_and_1():
    from llmviz.experiments.ch09_analysis import summarize_share
    est = summarize_share([0.999, 0.99, 0.985])
    assert 0 < est.low < est.mean < est.high < 1
    with pytest.raises(ValueError, match="must lie in"):
        summarize_share([0.5, 1.2])
    with pytest.raises(ValueError, match="at least two"):
        summarize_share([0.5])


def test_sliding_baseline_claims_pair_each_scaling_with_plain_rope_reading_t():
    from llmviz.experiments.ch09_stretch_analysis import sliding_baseline_claims
    race = _runs(TRAINED)  # plain RoPE reading T tokens: 3.6
    out = {}
    for seed in range(3):
        j = 1 + 0.01 * (seed - 1)
        out[seed] = {v: {"nll": {f"{k}x": math.log(p * j) for k in ch09.FACTORS},
                         **({"ft_nll": [math.log(p * j), math.log(q * j)]} if q else {})}
                     for v, p, q in (("RoPE", 50, 6.0), ("YaRN", 13, 3.0), ("dynamic NTK", 40, None))}
        out[seed]["RoPE"]["nll"]["1x"] = math.log(3.7 * j)  # beats the bigram at T
    claims = sliding_baseline_claims(Runs(out), race, "record", 9.87, 160)
    assert claims["YaRN"].verdict == HOLDS and claims["YaRN"].estimate.mean == pytest.approx(3 / 3.6)
    assert claims["RoPE"].verdict == FAILS and "after 160 fine-tune steps" in claims["RoPE"].text
    assert claims["dynamic NTK"].estimate.mean == pytest.approx(40 / 3.6)
    assert "zero-shot" in claims["dynamic NTK"].text
    assert claims["YaRN"].id == "ch09_beats_sliding_yarn"
    with pytest.raises(ValueError, match="same seeds"):
        sliding_baseline_claims(Runs({0: out[0], 1: out[1]}), race, "record", 9.87, 160)


def test_sliding_baseline_boxes_cannot_decide_where_the_model_stops_gaining_before_t():
    from llmviz.experiments.ch09_stretch_analysis import gains_near_t, sliding_baseline_claims
    out = {}
    for seed in range(3):
        j = 1 + 0.01 * (seed - 1)
        out[seed] = {v: {"nll": {f"{k}x": math.log(p * j) for k in ch09.FACTORS}}
                     for v, p in (("RoPE", 50), ("YaRN", 13))}
        out[seed]["RoPE"]["nll"]["1x"] = math.log(3.7 * j)
    # loss within T stops falling after 24 of 64 tokens: no gain past T to detect
    early = _with_positions(_runs(TRAINED), {v: 2 for v in TRAINED})
    control = gains_near_t(early, 64)
    assert not control.passed and "after 24 of 64" in control.detail
    claims = sliding_baseline_claims(Runs(out), early, "record", 9.87, 160, control=control)
    assert {c.verdict for c in claims.values()} == {CANNOT_DECIDE}
    # still falling in the last eighth of T: the control passes and the boxes decide (both lose)
    late = _with_positions(_runs(TRAINED), {v: 7 for v in TRAINED})
    assert gains_near_t(late, 64).passed
    claims = sliding_baseline_claims(Runs(out), late, "record", 9.87, 160,
                                     control=gains_near_t(late, 64))
    assert {c.verdict for c in claims.values()} == {FAILS}
    with pytest.raises(ValueError, match="training length"):
        gains_near_t(late, 1)


def test_lowest_names_a_winner_only_where_the_paired_interval_resolves():
    import torch
    a = torch.tensor([4.0, 4.4, 3.9])
    clear = {"a": a, "b": a * 1.1, "c": a * torch.tensor([2.0, 3.0, 2.5])}
    best, closest, ratio = lowest(clear)
    assert (best, closest) == ("a", "b") and ratio.low > 1
    close = {"a": a, "b": a * torch.tensor([1.004, 0.999, 1.009]), "c": a * 1.5}
    best, closest, ratio = lowest(close)
    assert (best, closest) == ("a", "b") and ratio.low < 1 < ratio.high
    with pytest.raises(ValueError, match="at least two variants"):
        lowest({"a": a})


def test_stretch_claims_decide_the_lowest_scaling_by_paired_intervals():
    out = {}
    for seed in range(3):
        j = 1 + 0.01 * (seed - 1)
        out[seed] = {v: {"nll": {f"{k}x": math.log(p * j) for k in ch09.FACTORS},
                         "ft_nll": [math.log(2 * p), math.log(q * (1 + 0.004 * seed * (v == "B")))]}
                     for v, p, q in (("RoPE", 50, 6.0), ("PI", 30, 5.2), ("YaRN", 13, 4.1),
                                     ("B", 12, 4.1))}
        out[seed]["RoPE"]["nll"]["1x"] = math.log(3.7 * j)
        out[seed]["PI"]["nll"]["1x"] = math.log(20 * j)
        out[seed]["YaRN, no temperature"] = out[seed]["YaRN"]
    claims = stretch_claims(Runs(out), "record", 9.87, 160)
    assert claims["best_zero"].verdict == HOLDS and claims["best_zero"].text.startswith(
        "Zero-shot, B has the lowest perplexity")
    assert "YaRN" in claims["best_zero"].quantity
    assert claims["best_ft"].verdict != HOLDS  # B and YaRN tie after the fine-tune
    assert claims["yarn_pi"].verdict == HOLDS  # 13 / 30 on every seed
    # every claim compares the same model's perplexity under two scalings: one check, the
    # bigram, the same for "PI beats plain RoPE" as for the comparisons among the scalings
    names = {key: [c.name for c in claim.checks] for key, claim in claims.items()}
    assert all(n == names["pi_8x"] for n in names.values()), names
    assert len(names["pi_8x"]) == 1 and "bigram" in names["pi_8x"][0]
    # a RoPE model that loses to the bigram at T: no comparison of its scalings is decided
    weak = {s: {v: {**r, "nll": {**r["nll"], "1x": math.log(12.0)}} if v == "RoPE" else r
                for v, r in out[s].items()} for s in out}
    for key, claim in stretch_claims(Runs(weak), "record", 9.87, 160).items():
        assert claim.verdict == "cannot decide at this size", key
    with pytest.raises(TypeError):
        stretch_claims(Runs(out), "record", 9.87, 160, control=None)  # the gate is gone


def test_stopwatch_counts_seconds_from_its_start():
    import time

    from llmviz.experiments.ch09_analysis import stopwatch
    clock = stopwatch()
    time.sleep(0.02)
    first = clock()
    assert 0.02 <= first < 5 and clock() >= first


def test_strongest_ngram_is_the_lower_of_the_two_smoothings_on_the_race_targets():
    import math

    from llmviz.experiments.ch09_analysis import ngram_ppl, strongest_ngram

    p = ch09.RACE_SIZES["cpu"]
    bar = strongest_ngram(p)
    assert len(bar.candidates) == 2 and bar.name in bar.candidates  # both smoothings scored
    assert {k.split()[0] for k in bar.candidates} == {"Kneser-Ney", "absolute-discounting"}
    assert bar.loss == min(bar.candidates.values())
    assert f"{bar.order}-gram" in bar.name
    assert bar.per_target.shape[0] > 0 and math.isclose(float(bar.per_target.mean()), bar.loss)
    # the absolute-discounting candidate is the n-gram the chapter used before, same targets
    ad = next(v for k, v in bar.candidates.items() if k.startswith("absolute"))
    order = int(next(k for k in bar.candidates if k.startswith("absolute")).split()[-1].split("-")[0])
    assert math.isclose(math.exp(ad), ngram_ppl(order, p), rel_tol=1e-9)
