"""Tests for llmviz.analysis.sweeps: a sweep of runs as a grid of final losses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmviz.analysis import divergence_grid
from llmviz.training import History, TrainConfig


def _history(losses, diverged=False):
    h = History(config=TrainConfig(steps=max(1, len(losses))))
    h.loss = list(losses)
    h.diverged = diverged
    h.diverged_at = len(losses) - 1 if diverged else None
    return h


def test_grid_holds_each_runs_final_loss_at_its_lr_and_warmup():
    runs = {(lr, w): _history([10.0 * lr + w] * 10) for lr in (0.3, 0.1, 0.01) for w in (100, 0)}
    lrs, warmups, final = divergence_grid(runs)
    assert lrs == sorted(lrs) and warmups == sorted(warmups)  # ascending axes
    assert final.shape == (len(warmups), len(lrs))
    for (lr, w), h in runs.items():
        assert final[warmups.index(w), lrs.index(lr)] == pytest.approx(h.final_loss)


def test_diverged_and_missing_runs_are_nan():
    runs = {
        (1e-3, 0): _history([2.0] * 10),
        (1e-1, 0): _history([2.0, math.nan], diverged=True),
        (1e-3, 10): _history([1.0] * 10),  # (1e-1, 10) was never run
    }
    lrs, warmups, final = divergence_grid(runs)
    assert np.isnan(final[0, 1]) and np.isnan(final[1, 1])
    assert np.isfinite(final[:, 0]).all()


def test_empty_sweep_is_rejected():
    with pytest.raises(ValueError, match="histories is empty"):
        divergence_grid({})


def test_worst_spike_is_the_largest_rise_above_the_running_best():
    from llmviz.analysis import worst_spike

    assert worst_spike([5.0, 4.0, 3.0, 2.0]) == 0.0  # never goes back up
    assert worst_spike([5.0, 3.0, 4.5, 2.0, 2.5]) == pytest.approx(1.5)  # 4.5 above the best 3.0
    assert worst_spike([1.0, 3.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="at least 2 losses"):
        worst_spike([1.0])
    with pytest.raises(ValueError, match=r"losses\[2\] is nan.*History.diverged"):
        worst_spike([3.0, 2.0, float("nan")])


def test_unigram_loss_is_the_cross_entropy_of_token_frequencies():
    import torch

    from llmviz.analysis import unigram_loss

    train = torch.tensor([0, 0, 0, 1])  # frequencies 3/4, 1/4 without smoothing
    targets = torch.tensor([[0, 1]])
    expected = -(math.log(0.75) + math.log(0.25)) / 2
    assert unigram_loss(train, targets, vocab_size=2, smoothing=1e-12) == pytest.approx(expected)
    # add-one smoothing: (3 + 1) / (4 + 2) and (1 + 1) / 6
    assert unigram_loss(train, targets, vocab_size=2) == pytest.approx(
        -(math.log(4 / 6) + math.log(2 / 6)) / 2)
    # uniform stream: the loss is log(vocab)
    uniform = torch.arange(256).repeat(4)
    assert unigram_loss(uniform, uniform[:50]) == pytest.approx(math.log(256))
    with pytest.raises(ValueError, match=r"ids in \[0, 300\] but vocab_size is 256"):
        unigram_loss(torch.tensor([0, 300]), targets)
    with pytest.raises(TypeError, match="integer token ids"):
        unigram_loss(train.float(), targets, vocab_size=2)
    with pytest.raises(ValueError, match="empty"):
        unigram_loss(train, torch.tensor([], dtype=torch.long), vocab_size=2)
