"""Validity checks: a claim whose experiment cannot decide it says so, whatever its interval.

The baselines and detectable effects are checked on numbers whose answer is known by hand.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from llmviz.evidence import (
    CANNOT_DECIDE,
    FAILS,
    HOLDS,
    UNRESOLVED,
    VERDICTS,
    Check,
    Claim,
    Estimate,
    beats_baseline,
    can_detect,
    min_detectable,
    paired,
    paired_ratio,
    positive_control,
    summarize,
    t_quantile,
)


def test_four_verdicts():
    assert VERDICTS == (HOLDS, FAILS, UNRESOLVED, CANNOT_DECIDE)
    assert CANNOT_DECIDE == "cannot decide at this size"


# ----------------------------------------------------------------------------- baselines
def test_beats_baseline_uses_the_worst_model():
    models = {"rope": [4.9, 5.0, 5.1], "t5": [10.6, 10.7, 10.8], "alibi": [4.0, 4.1, 4.2]}
    check = beats_baseline(models, 9.87, name="beats the byte bigram")
    assert not check.passed
    assert "worst model (t5) 10.7 vs baseline 9.87" in check.detail
    models["t5"] = [4.5, 4.6, 4.7]
    check = beats_baseline(models, 9.87, name="beats the byte bigram")
    assert check.passed and "worst model (rope) 5 vs baseline 9.87" in check.detail


def test_beats_baseline_margin_direction_and_kinds_of_input():
    assert beats_baseline([9.5], 9.87, name="b").passed
    assert not beats_baseline([9.5], 9.87, name="b", margin=0.5).passed  # must be below 9.37
    assert "must be below 9.37" in beats_baseline([9.5], 9.87, name="b", margin=0.5).detail
    # accuracy: higher is better; the worst model is the lowest
    acc = {"a": torch.tensor([0.9, 0.92]), "b": summarize([0.3, 0.31, 0.29])}
    check = beats_baseline(acc, 0.25, name="beats chance", lower_is_better=False)
    assert check.passed and "(b) 0.3 vs" in check.detail
    assert not beats_baseline(acc, 0.25, name="c", lower_is_better=False, margin=0.1).passed
    # a per-seed baseline (measured on each seed's targets) is compared by its mean
    assert beats_baseline([1.0, 1.0], [1.5, 0.7], name="b").passed is True  # 1.0 < 1.1
    assert not beats_baseline([1.0, 1.0], [1.0, 1.0], name="b").passed  # a tie does not beat


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: beats_baseline("abc", 1.0, name="b"), TypeError, "values must be a number"),
        (lambda: beats_baseline([1.0, float("nan")], 1.0, name="b"), ValueError,
         r"values\[1\] must be finite"),
        (lambda: beats_baseline([1.0], None, name="b"), TypeError, "baseline must be"),
        (lambda: beats_baseline([1.0], 2.0, name=""), ValueError, "name must say"),
        (lambda: beats_baseline([1.0], 2.0, name="b", margin=-1), ValueError, "margin must be"),
        (lambda: beats_baseline({}, 2.0, name="b"), ValueError, "empty dict"),
        (lambda: beats_baseline([], 2.0, name="b"), ValueError, "values is empty"),
        (lambda: beats_baseline([1.0], 2.0, name="b", lower_is_better="yes"), TypeError,
         "lower_is_better must be a bool"),
        (lambda: positive_control("finds it", "yes"), TypeError, "passed must be a bool"),
        (lambda: positive_control("", True), ValueError, "name must say"),
        (lambda: Check("x", 1), TypeError, "passed must be a bool"),
        (lambda: min_detectable([1.0, 2.0]), TypeError, "estimate must be an llmviz Estimate"),
        (lambda: can_detect(summarize([1.0, 2.0]), -0.1), ValueError, "effect must be positive"),
        (lambda: can_detect(paired_ratio([1.0, 2.0], [1.0, 1.0]), 0.5), ValueError,
         "factor > 1"),
        (lambda: Claim("x", summarize([1.0, 2.0]), checks=["passed"], device="cpu"),
         TypeError, "every check must be an llmviz Check"),
        (lambda: Claim("x", summarize([1.0, 2.0]), checks="passed", device="cpu"),
         TypeError, "checks must be a list of Check"),
        (lambda: Claim("x", summarize([1.0, 2.0]), size=3, device="cpu"), TypeError,
         "size must be a Record or a label"),
    ],
)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_positive_control_accepts_a_computed_bool():
    assert positive_control("finds the planted copy", torch.tensor(True)).passed is True
    check = positive_control("finds the planted copy", torch.tensor(0.3) > 0.5, "accuracy 0.3")
    assert check.passed is False and str(check) == "FAILED: finds the planted copy (accuracy 0.3)"


# ----------------------------------------------------------------------------- detectable
def test_min_detectable_is_the_effect_found_with_80_percent_power():
    a, b = [1.0, 1.3, 1.1, 1.25], [1.0, 1.0, 1.0, 1.0]
    d = paired(a, b)
    diffs = torch.tensor(a) - torch.tensor(b)
    se = diffs.double().std().item() / math.sqrt(4)
    by_hand = (t_quantile(0.975, 3) + t_quantile(0.8, 3)) * se
    assert min_detectable(d) == pytest.approx(by_hand)
    assert min_detectable(d) > (d.high - d.low) / 2  # larger than the half-width
    # a ratio: the same on the log scale
    r = paired_ratio([2.0, 2.2, 1.9], [1.0, 1.0, 1.0])
    logs = torch.log(torch.tensor([2.0, 2.2, 1.9], dtype=torch.float64))
    se = logs.std().item() / math.sqrt(3)
    assert min_detectable(r) == pytest.approx(math.exp((t_quantile(0.975, 2) + t_quantile(0.8, 2)) * se))
    assert min_detectable(Estimate.exact(3.0)) == 0.0
    assert min_detectable(summarize([1.0])) == math.inf


def test_can_detect():
    noisy = summarize([0.0, 1.0, -1.0])  # (4.303 + 1.061) * 1 / sqrt(3) = 3.10
    assert not can_detect(noisy, 3.0).passed  # above the half-width (2.48), below 3.10
    assert can_detect(noisy, 3.2).passed
    assert "smallest detectable (80% power) ±3.1" in can_detect(noisy, 3.2).detail


# ----------------------------------------------------------------------------- the claim
def _claim(checks=()):
    return Claim("RoPE extrapolates worse than ALiBi", paired([2.0, 2.1, 2.2], [1.0, 1.0, 1.1]),
                 id="ch09_rope", device="cpu", checks=checks)


def test_a_failed_check_makes_the_verdict_cannot_decide():
    assert _claim().verdict == HOLDS
    fail = beats_baseline({"rope": [10.7, 10.8, 10.9]}, 9.87, name="beats the byte bigram")
    ok = positive_control("retrieves a planted string", True, "accuracy 1.0")
    claim = _claim([ok, fail])
    assert claim.verdict == CANNOT_DECIDE and claim.interval_verdict == HOLDS
    assert _claim([ok]).verdict == HOLDS
    assert _claim((ok,)).checks == (ok,)


def test_box_and_record_show_size_checks_and_smallest_detectable_effect(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMVIZ_CLAIMS_DIR", str(tmp_path))
    monkeypatch.setenv("LLMVIZ_CHAPTER", "09_position")
    fail = beats_baseline([10.7, 10.8, 10.9], 9.87, name="beats the byte bigram")
    claim = _claim([positive_control("retrieves a planted string", True), fail])
    detect = claim.detectable
    assert detect.startswith("±") and float(detect[1:]) == pytest.approx(claim.min_detectable,
                                                                          rel=1e-2)
    for text in (str(claim), claim._repr_markdown_(), claim._repr_html_()):
        assert "cannot decide at this size" in text
        assert "FAILED" in text and "beats the byte bigram" in text
        assert "passed" in text and "retrieves a planted string" in text
        assert f"a true value within {detect} of 0 would be missed more than one time in five" in text
        assert "n = 3 · live run, cpu size · device cpu" in text or "live run, full size" in text
        assert "the interval alone reads &#x27;holds&#x27;" in text or (
            "the interval alone reads 'holds'" in text)
    rec = json.loads((tmp_path / "09_position.jsonl").read_text().splitlines()[0])
    assert rec["verdict"] == CANNOT_DECIDE and rec["min_detectable"] == detect
    assert rec["checks"][1] == {"name": "beats the byte bigram", "passed": False,
                                "detail": fail.detail}
    assert rec["size"].startswith("live run, ")
    glued = claim.glue("ch09_rope")
    assert glued["ch09_rope_detectable"] == detect and glued["ch09_rope_size"] == claim.size
    assert glued["ch09_rope_verdict"] == CANNOT_DECIDE
    plain = Claim("x", summarize([1.0, 2.0, 3.0]), device="cpu", size="long record: 1600 steps")
    assert plain.record()["checks"] == [] and "Validity" not in plain._repr_html_()
    assert plain.record()["size"] == "long record: 1600 steps"


def test_glue_without_register_writes_no_record(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMVIZ_CLAIMS_DIR", str(tmp_path))
    monkeypatch.setenv("LLMVIZ_CHAPTER", "10_quoted_only")
    claim = _claim()
    glued = claim.glue("ch10_twin_live", register=False)
    assert glued["ch10_twin_live_verdict"] == claim.verdict
    assert not (tmp_path / "10_quoted_only.jsonl").exists()
    claim.glue("ch10_twin")
    assert (tmp_path / "10_quoted_only.jsonl").exists()
    with pytest.raises(TypeError, match="register must be True or False, got 'no'"):
        claim.glue("ch10_twin", register="no")


def test_the_power_line_reads_against_the_threshold_and_is_absent_for_computed_values():
    from llmviz.evidence import Estimate, paired_ratio

    diff = Claim("accuracy beats chance", paired([0.9, 0.95, 0.97], [0.0, 0.0, 0.0]),
                 threshold=0.5, id="ch02_x", device="cpu")
    assert diff.power_line == (f"; a true value within ±{diff.min_detectable:.3g} of 0.5 would be "
                               "missed more than one time in five")
    ratio = Claim("A is faster", paired_ratio([1.0, 1.1, 0.9], [2.0, 2.1, 2.0]), threshold=1.0,
                  direction="<", id="ch03_x", device="cpu")
    assert ratio.power_line.startswith(f"; a true value within a factor {ratio.min_detectable:.3g} of 1 ")
    exact = Claim("the mask is causal", Estimate.exact(1.0), threshold=0.5, id="ch01_x", device="cpu")
    assert exact.power_line == ""
    for text in (str(exact), exact._repr_markdown_(), exact._repr_html_()):
        assert "4 times in 5" not in text and "missed" not in text
        assert "exact (computed, not sampled)" in text
    assert exact.detectable == "any (computed)"  # the glued text other pages quote is unchanged


def test_runs_that_agree_exactly_get_no_power_statement_and_a_flagged_interval():
    from llmviz.evidence import Claim, proportion, summarize
    from llmviz.evidence.validity import format_min_detectable, power_sentence, zero_spread

    same = summarize([0.0, 0.0, 0.0])  # three seeds, each 0 of 4 heads
    assert zero_spread(same) and math.isnan(min_detectable(same))
    assert "agree exactly" in power_sentence(same, 0.5) and "±" not in power_sentence(same, 0.5)
    assert "not sized" in format_min_detectable(same)
    claim = Claim("a unanimous share", same, threshold=0.5, quantity="share", id="t_unanimous")
    assert claim.interval == "[0, 0] (a point, not a precise value)"
    assert "agree exactly" in str(claim) and "would be missed" not in str(claim)
    assert not can_detect(same, 0.1).passed
    # the share over all heads: the Wilson interval is not a point, so it is read as usual
    share = proportion(0, 12)
    assert not zero_spread(share) and share.high == pytest.approx(0.2425, abs=1e-3)
    assert "would be missed" in power_sentence(share, 0.5)
    # a normal estimate is unchanged
    normal = summarize([0.1, 0.3, 0.2])
    assert not zero_spread(normal)
    assert power_sentence(normal, 0.5).startswith("; a true value within ±")
    assert "point" not in Claim("x", normal, threshold=0.5, id="t_normal").interval
    assert not zero_spread(Estimate.exact(2.0))


def test_a_factor_prints_with_enough_digits_to_differ_from_one():
    from llmviz.evidence import Claim
    from llmviz.evidence.validity import format_factor

    assert format_factor(1.003) == "1.003" and format_factor(1.0105) == "1.01"
    assert format_factor(0.9996) == "0.9996" and format_factor(1.0) == "1"
    assert format_factor(2.81) == "2.81" and format_factor(0.431) == "0.431"
    r = Estimate(mean=1.003, std=0.001, n=3, low=0.997, high=1.0105, kind="ratio")
    claim = Claim("flat", r, threshold=1.05, direction="<", id="t_factor")
    assert claim.effect == "1.003x" and claim.interval == "[0.997x, 1.01x]"
    assert "a factor 1 " not in claim.power_line and "a factor 1.0" in claim.power_line
