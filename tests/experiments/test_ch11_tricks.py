"""Chapter 11's longer stability-trick runs: a run, its prefix, bad input, the record."""

from __future__ import annotations

import pytest

from llmviz.evidence import EXPERIMENTS_ENV, RECORDS_DIR_ENV
from llmviz.experiments import ch11_tricks

TINY = dict(d_model=16, n_layers=2, steps=4, lr=0.1, control_lr=3e-2, batch=2, curve_every=2, val_windows=4)


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
            assert run["loss"] == run["curve"][-1] and len(run["curve"]) == record.params["steps"] // record.params["curve_every"] + 1


def _rescue_runs(loss: dict) -> "Runs":
    from llmviz.evidence.seeds import Runs
    n = len(next(iter(loss.values())))
    return Runs({s: {v: {"loss": x[s]} for v, x in loss.items()} for s in range(n)})


def test_rescue_claims_on_known_data():
    from llmviz.evidence import CANNOT_DECIDE
    from llmviz.experiments import ch11_analysis as ana
    plateau = 3.34
    loss = {"baseline": [3.23, 3.35, 3.22, 3.19, 3.27, 3.19],
            "QK-norm (RMS)": [2.52, 2.52, 2.54, 2.55, 2.60, 2.52],     # trains: ~0.7 below
            "z-loss (w=1e-3)": [3.20, 3.31, 3.31, 3.22, 3.14, 3.14],   # on the plateau with the baseline
            ch11_tricks.CONTROL: [2.40, 2.42, 2.39, 2.41, 2.45, 2.40]}
    kw = dict(lr=0.1, control_lr=3e-2, steps=600, tricks={"QK-norm (RMS)": "qknorm", "z-loss (w=1e-3)": "zloss"})
    c = ana.rescue_claims(_rescue_runs(loss), "test", plateau, **kw)
    assert c["qknorm"].verdict == "holds" and c["zloss"].verdict == "does not hold"
    assert c["qknorm"].id == "ch11_qknorm_rescue" and c["qknorm"].test.endswith("< -0.25")
    assert all(ch.passed for ch in c["qknorm"].checks)
    # a difference that is resolved but smaller than the plateau margin is not "trains"
    loss["QK-norm (RMS)"] = [x - 0.1 for x in loss["baseline"]]
    assert ana.rescue_claims(_rescue_runs(loss), "test", plateau, **kw)["qknorm"].verdict == "does not hold"
    # the positive control: a recipe that does not train at the lower rate either decides nothing
    loss["QK-norm (RMS)"] = [2.52, 2.52, 2.54, 2.55, 2.60, 2.52]
    loss[ch11_tricks.CONTROL] = [2.40, 3.30, 2.39, 2.41, 2.45, 2.40]
    c = ana.rescue_claims(_rescue_runs(loss), "test", plateau, **kw)
    assert c["qknorm"].verdict == CANNOT_DECIDE and c["qknorm"].interval_verdict == "holds"
    assert [ch.passed for ch in c["qknorm"].checks] == [True, False] and "5 of 6" in c["qknorm"].checks[1].detail
    # a baseline that already trains at the rate leaves nothing to rescue
    loss[ch11_tricks.CONTROL] = [2.40, 2.42, 2.39, 2.41, 2.45, 2.40]
    loss["baseline"] = [3.23, 3.35, 3.22, 2.90, 3.27, 3.19]
    c = ana.rescue_claims(_rescue_runs(loss), "test", plateau, **kw)
    assert c["qknorm"].verdict == CANNOT_DECIDE and not c["qknorm"].checks[0].passed
    assert "1 of 6 seeds off the plateau" in c["qknorm"].checks[0].detail
    assert ana.n_off(loss["baseline"], plateau) == 1
