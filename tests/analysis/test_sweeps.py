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
