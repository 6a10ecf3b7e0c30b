"""summarize_log: a geometric mean with its interval on the log scale (perplexities)."""

from __future__ import annotations

import math

import pytest

from llmviz.evidence import paired_ratio, summarize, summarize_log


def test_geometric_mean_and_log_interval_match_summarize_on_the_logs():
    values = [12.0, 58.0, 104.0]  # three seeds whose linear interval reaches below zero
    assert summarize(values).low < 0
    est = summarize_log(values)
    logs = summarize([math.log(v) for v in values])
    assert est.mean == pytest.approx(math.exp(logs.mean))
    assert (est.low, est.high) == pytest.approx((math.exp(logs.low), math.exp(logs.high)))
    assert 0 < est.low < est.mean < est.high
    assert est.std == pytest.approx(logs.std) and est.n == 3


def test_equals_paired_ratio_against_ones():
    values = [3.0, 4.5, 4.0, 5.5]
    a, b = summarize_log(values), paired_ratio(values, [1.0] * 4)
    assert (a.mean, a.low, a.high) == pytest.approx((b.mean, b.low, b.high))


def test_rejects_non_positive_values():
    with pytest.raises(ValueError, match="positive values.*use summarize"):
        summarize_log([1.0, 0.0, 2.0])
    with pytest.raises(TypeError, match="sequence of numbers"):
        summarize_log(3.0)
