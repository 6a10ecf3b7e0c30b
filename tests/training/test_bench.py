"""llmviz.training.bench: interleaved timing, the ratio's interval, the speed verdict.

Timed tests use sleeps and wide tolerances, so a loaded machine cannot flip them: a sleep
takes at least its duration, and the ratio of 20 ms to 10 ms sleeps stays near 2 whatever the
overhead per call.
"""

from __future__ import annotations

import time

import pytest
import torch

from llmviz.evidence import CANNOT_DECIDE, FAILS, HOLDS, UNRESOLVED, Estimate
from llmviz.training.bench import (
    Comparison, Timing, compare, control_check, measure, speed_claim,
)

FAST = dict(repeats=5, warmup=1, min_run_time=0.02)


def _sleep(seconds: float):
    return lambda: time.sleep(seconds)


def test_timing_statistics():
    t = Timing("f", (3.0, 1.0, 2.0, 5.0, 4.0))
    assert t.median == 3.0
    assert (t.min, t.max) == (1.0, 5.0)
    q1, q3 = t.iqr
    assert q1 == 2.0 and q3 == 4.0
    assert "f: 3 s per call (IQR 2 s to 4 s, 5 rounds)" == str(t)


class _Cost:
    """A callable whose "time" is its declared cost: the timer below reads it instead of a
    clock, so these tests check the interleaving, the ratio and the verdict deterministically
    (a loaded CI machine cannot flip them; real clocks are exercised by benchmarks/)."""

    def __init__(self, cost: float):
        self.cost = cost
        self.calls = 0

    def __call__(self):
        self.calls += 1


@pytest.fixture
def fake_clock(monkeypatch):
    from llmviz.training import bench

    rounds = []

    def one_round(fn, min_run_time):
        # a deterministic wobble per round, the same for both sides of a round pair
        k = len(rounds) // 2
        wobble = 1.0 + 0.05 * ((k * 7) % 5 - 2) / 2
        rounds.append(fn.cost)
        return fn.cost * wobble

    monkeypatch.setattr(bench, "_one_round", one_round)
    return rounds


def test_ratio_of_a_function_against_itself_contains_one(fake_clock):
    f = _Cost(0.002)
    c = compare("self", f, f, control=False, **FAST)
    r = c.ratio
    assert isinstance(r, Estimate) and r.kind == "ratio" and r.n == 5
    assert r.low <= 1.0 <= r.high, str(c)
    assert r.mean == pytest.approx(1.0)
    assert f.calls >= 2 * FAST["warmup"]  # both sides warmed up before timing


def test_rounds_interleave_the_two_sides(fake_clock):
    compare("order", _Cost(1.0), _Cost(2.0), control=False, **FAST)
    # ours first, then peer first, alternately: drift on the machine hits both sides
    pairs = [tuple(fake_clock[i : i + 2]) for i in range(0, len(fake_clock), 2)]
    assert pairs[0] == (1.0, 2.0) and pairs[1] == (2.0, 1.0)


def test_twice_as_slow_is_not_faster(fake_clock):
    c = compare("sleep", _Cost(0.020), _Cost(0.010), ours_name="slow", peer_name="fast", **FAST)
    assert c.ratio.mean == pytest.approx(2.0, rel=0.05), str(c)
    claim = speed_claim(c)
    assert claim.verdict == FAILS
    assert claim.text == "slow is faster than fast (sleep)"
    # ... and read the other way round the claim holds
    back = compare("sleep", _Cost(0.010), _Cost(0.020), **FAST)
    assert speed_claim(back).verdict == HOLDS, str(back)
    assert "ratio ours/peer" in str(back) and str(back.threads) in str(back)


def test_real_clock_measures_a_sleep():
    # the real timer, with no ratio asserted: a sleep takes at least its duration
    t = measure(_sleep(0.002), repeats=2, warmup=1, min_run_time=0.01)
    assert t.min >= 0.0019 and len(t.times_s) == 2


def test_speed_claim_threshold_and_single_round():
    t = Timing("a", (1.0, 1.1, 0.9))
    u = Timing("b", (2.0, 2.0, 2.0))
    c = Comparison("x", t, u, device="cpu", threads=1)
    assert speed_claim(c).verdict == HOLDS  # about 0.5x
    assert speed_claim(c, threshold=0.2).verdict == FAILS  # not 5x faster
    one = Comparison("x", Timing("a", (1.0,)), Timing("b", (2.0,)), "cpu", 1)
    assert speed_claim(one).verdict == UNRESOLVED  # no interval from one round


def test_measure_and_thread_count_restored():
    before = torch.get_num_threads()
    t = measure(_sleep(0.001), name="nap", threads=1, **FAST)
    assert torch.get_num_threads() == before
    assert len(t.times_s) == 5 and t.min >= 0.0009
    c = compare("n", _sleep(0.001), _sleep(0.001), threads=1, **FAST)
    assert c.threads == 1 and torch.get_num_threads() == before


def test_backward_can_be_timed_outside_inference_mode():
    w = torch.randn(8, 8, requires_grad=True)
    step = lambda: (w @ w).sum().backward()
    with pytest.raises(RuntimeError):
        measure(step, repeats=1, warmup=1, min_run_time=0.01)
    t = measure(step, repeats=1, warmup=1, min_run_time=0.01, inference=False)
    assert t.median > 0


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(repeats=0), ValueError, r"repeats must be a positive int, got 0"),
        (dict(repeats=2.5), TypeError, r"repeats must be an int, got float 2.5"),
        (dict(warmup=-1), ValueError, r"warmup must be a non-negative int, got -1"),
        (dict(min_run_time=0), ValueError, r"min_run_time must be positive, got 0"),
        (dict(threads=0), ValueError, r"threads must be a positive int, got 0"),
    ],
)
def test_bad_options(kwargs, exc, match):
    f = _sleep(0)
    with pytest.raises(exc, match=match):
        compare("x", f, f, **kwargs)


def test_not_callable():
    with pytest.raises(TypeError, match=r"peer must be callable with no arguments, got int 3; "
                                         r"wrap the call, e.g. peer=lambda: f\(x\)"):
        compare("x", _sleep(0), 3)
    with pytest.raises(TypeError, match=r"fn must be callable"):
        measure(None)
    with pytest.raises(TypeError, match=r"comparison must be a Comparison from compare\(\), "
                                         r"got Timing"):
        speed_claim(Timing("a", (1.0,)))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU present")
def test_compare_on_cuda_times_the_kernels_not_the_launches():
    x = torch.randn(2048, 2048, device="cuda")
    c = compare("cuda matmuls", lambda: x @ x @ x, lambda: x @ x, **FAST)
    assert c.device.startswith("cuda (")
    assert 1.4 < c.ratio.mean < 2.8, str(c)  # two products against one


# --- the A/A control -------------------------------------------------------------------------


def test_controlled_rounds_time_the_peer_twice_in_mirrored_orders(fake_clock):
    c = compare("order", _Cost(1.0), _Cost(2.0), **{**FAST, "repeats": 6})
    triples = [tuple(fake_clock[i : i + 3]) for i in range(0, len(fake_clock), 3)]
    assert len(triples) == 6 and all(sorted(t) == [1.0, 2.0, 2.0] for t in triples)
    # every side takes every position twice over six rounds: ours (cost 1) at 0, 1 and 2
    assert sorted(t.index(1.0) for t in triples) == [0, 0, 1, 1, 2, 2]
    assert c.again is not None and len(c.again.times_s) == 6
    assert c.control.kind == "ratio" and c.control.n == 6
    assert "A/A control" in str(c) and "within this run" in str(c)


def _comparison(ratios, aa_ratios, peer=(1.0, 1.02, 0.98, 1.01, 0.99, 1.0)):
    """A comparison built from per-round ratios: ours_i = r_i * peer_i, twin_i = a_i * peer_i."""
    ours = tuple(r * p for r, p in zip(ratios, peer))
    again = tuple(a * p for a, p in zip(aa_ratios, peer))
    return Comparison("synthetic", Timing("ours", ours), Timing("peer", peer), "cpu", 1,
                      again=Timing("peer (again)", again))


# the twin's rounds: the same code timed twice differs by up to about 8% per round here
NOISY_AA = (1.08, 0.93, 1.06, 0.95, 1.07, 0.94)
QUIET_AA = (1.002, 0.999, 1.001, 0.998, 1.0, 1.001)
SMALL = (0.95, 0.951, 0.949, 0.95, 0.952, 0.948)  # 5% faster, tight within the run
LARGE = (0.50, 0.51, 0.49, 0.505, 0.495, 0.50)  # twice as fast


def test_aa_noise_swamps_a_small_effect():
    c = _comparison(SMALL, NOISY_AA)
    assert c.ratio.high < 1  # the rounds alone would call it faster ...
    claim = speed_claim(c)
    assert claim.interval_verdict == HOLDS
    assert claim.verdict == CANNOT_DECIDE  # ... but the peer against itself moves more than 5%
    check = control_check(c)
    assert not check.passed and "cannot decide on this machine now" in check.detail
    assert c.control_reach > 0.05
    assert "A/A-controlled" in claim.size and "this run only" in claim.size


def test_a_large_effect_clears_the_same_noise():
    c = _comparison(LARGE, NOISY_AA)
    assert speed_claim(c).verdict == HOLDS
    assert speed_claim(c, threshold=0.3).verdict == FAILS  # not 3x faster, noise or not
    assert control_check(c).passed


def test_a_small_effect_is_decided_on_a_quiet_machine():
    c = _comparison(SMALL, QUIET_AA)
    assert c.control_reach < 0.01
    assert speed_claim(c).verdict == HOLDS and control_check(c).passed


def test_an_unresolved_interval_stays_not_resolved():
    straddle = (0.97, 1.03, 0.99, 1.02, 0.98, 1.01)
    c = _comparison(straddle, NOISY_AA)
    assert speed_claim(c).verdict == UNRESOLVED and control_check(c).passed


def test_an_unresolved_interval_is_not_labelled_as_beating_the_control():
    # a 7% gap whose interval straddles 1, under an A/A reach larger than the gap: the check must
    # not claim the effect exceeds the control; it says there is no reading to guard
    straddle = (1.0 / 1.07 * f for f in (0.88, 1.12, 0.95, 1.08, 0.90, 1.10))
    c = _comparison(tuple(straddle), NOISY_AA)
    assert c.ratio.low < 1 < c.ratio.high
    check = control_check(c)
    assert check.passed
    assert "larger than the A/A control" not in check.name
    assert check.name.startswith("no reading for the A/A control")
    assert "decides nothing" in check.name and "does not clear 1 anyway" in check.detail


def test_a_decided_interval_keeps_the_effect_label_passed_or_failed():
    for ours, passed in ((LARGE, True), (SMALL, False)):
        check = control_check(_comparison(ours, NOISY_AA))
        assert check.passed is passed
        assert check.name.startswith("the effect is larger than the A/A control")


def test_the_widened_interval_contains_the_plain_one():
    c = _comparison(SMALL, NOISY_AA)
    r, w = c.ratio, c.ratio_beyond_control()
    assert w.low < r.low and w.high > r.high and w.mean == r.mean
    f = 1 + c.control_reach
    assert w.low == pytest.approx(r.low / f) and w.high == pytest.approx(r.high * f)


def test_without_a_control_there_is_no_check_and_no_reach():
    c = Comparison("x", Timing("a", (1.0, 1.1, 0.9)), Timing("b", (2.0, 2.0, 2.0)), "cpu", 1)
    assert c.control is None and c.control_reach == float("inf")
    assert speed_claim(c).checks == () and speed_claim(c).verdict == HOLDS
    assert not control_check(c).passed  # nothing says how noisy the machine is
    assert not c.ratio_beyond_control().resolved


def test_real_clock_control_decides_a_large_effect():
    # sleeps of 10 and 30 ms: a 3x effect that scheduler jitter on a loaded machine cannot mimic
    c = compare("sleeps", _sleep(0.010), _sleep(0.030), repeats=6, warmup=1, min_run_time=0.05)
    assert c.control.low <= 1.2 and c.control.high >= 0.8, str(c)
    assert speed_claim(c).verdict == HOLDS, str(speed_claim(c))


def test_control_check_bad_input():
    c = _comparison(SMALL, NOISY_AA)
    with pytest.raises(TypeError, match=r"comparison must be a Comparison from compare\(\), got str"):
        control_check("c")
    with pytest.raises(ValueError, match=r"threshold must be positive, got 0"):
        control_check(c, threshold=0)
    with pytest.raises(TypeError, match=r"control must be True or False, got 1"):
        compare("x", _sleep(0), _sleep(0), control=1)
