"""Chapter 11's longer stability-trick runs: a run, its prefix, bad input, the record."""

from __future__ import annotations

import pytest

from llmviz.evidence import EXPERIMENTS_ENV, RECORDS_DIR_ENV
from llmviz.experiments import ch11_tricks

TINY = dict(d_model=16, n_layers=2, steps=4, lr=0.1, batch=2, curve_every=2, val_windows=4)


def test_a_run_records_the_curve_the_loss_and_the_bounded_quantities():
    full = ch11_tricks.trick_run("z-loss (w=1e-3)", 0, **TINY)
    assert len(full["curve"]) == 3 and full["loss"] == full["curve"][-1]
    assert {"log_z", "min_attention_entropy", "max_abs_logit", "diverged"} <= set(full)
    part = ch11_tricks.trick_run("z-loss (w=1e-3)", 0, prefix=2, **TINY)
    assert set(part) == {"curve", "loss", "diverged"} and part["curve"] == pytest.approx(full["curve"][:2])


def test_variants_share_the_initial_weights_of_their_seed():
    a = ch11_tricks.trick_run("baseline", 1, prefix=2, **TINY)
    b = ch11_tricks.trick_run("z-loss (w=1e-3)", 1, prefix=2, **TINY)
    assert a["curve"][0] == pytest.approx(b["curve"][0])


def test_bad_input_names_the_fix():
    with pytest.raises(ValueError, match="pick one of"):
        ch11_tricks.trick_run("layer-scale", 0, **TINY)
    with pytest.raises(ValueError, match="prefix must be"):
        ch11_tricks.trick_run("baseline", 0, prefix=99, **TINY)


def test_the_long_record_is_fresh_and_complete(monkeypatch):
    monkeypatch.delenv(RECORDS_DIR_ENV, raising=False)
    monkeypatch.delenv(EXPERIMENTS_ENV, raising=False)
    record = ch11_tricks.TRICKS.record("long")
    assert record.stale is None, f"{record.stale}; refresh: {record.refresh_command}"
    assert record.params == ch11_tricks.TRICKS.params("long")
    for seed in record.runs.seeds:
        for v in ch11_tricks.VARIANTS:
            run = record.runs[seed][v]
            assert run["loss"] == run["curve"][-1] and len(run["curve"]) == 4
