"""llmviz.training.bench: interleaved timing, the ratio's interval, the speed verdict.

Timed tests use sleeps and wide tolerances, so a loaded machine cannot flip them: a sleep
takes at least its duration, and the ratio of 20 ms to 10 ms sleeps stays near 2 whatever the
overhead per call.
"""

from __future__ import annotations

import time

import pytest
import torch

from llmviz.evidence import FAILS, HOLDS, UNRESOLVED, Estimate
from llmviz.training.bench import Comparison, Timing, compare, measure, speed_claim

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
    c = compare("self", f, f, **FAST)
    r = c.ratio
    assert isinstance(r, Estimate) and r.kind == "ratio" and r.n == 5
    assert r.low <= 1.0 <= r.high, str(c)
    assert r.mean == pytest.approx(1.0)
    assert f.calls >= 2 * FAST["warmup"]  # both sides warmed up before timing


def test_rounds_interleave_the_two_sides(fake_clock):
    compare("order", _Cost(1.0), _Cost(2.0), **FAST)
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
