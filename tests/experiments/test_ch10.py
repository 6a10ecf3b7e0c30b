"""Chapter 10's LayerNorm-vs-RMSNorm experiment: the norms used, prefixes, baselines, claims."""

from __future__ import annotations

import pytest
import torch

from llmviz.evidence import CANNOT_DECIDE, HOLDS, UNRESOLVED
from llmviz.evidence.seeds import Runs
from llmviz.experiments import ch10, ch10_analysis
from llmviz.norm import LayerNorm, RMSNorm

TINY = dict(ch10.SIZES["cpu"], d_model=16, n_layers=1, steps=4, curve_every=2, batch_size=4)


def test_each_variant_trains_with_its_norm_everywhere():
    run = ch10.norm_run("LayerNorm", 0, **TINY)
    assert len(run["curve"]) == 3 and run["val_loss"] == run["curve"][-1]
    part = ch10.norm_run("LayerNorm", 0, prefix=2, **TINY)
    assert part["curve"] == pytest.approx(run["curve"][:2], rel=1e-5)
    other = ch10.norm_run("RMSNorm", 0, **TINY)
    assert other["curve"][0] != run["curve"][0]  # a different model, same seed


def test_the_config_carries_the_variants_norm():
    from llmviz.model import DecoderLM
    from llmviz.model.presets import llama2
    for variant, kind in ch10.VARIANTS.items():
        m = DecoderLM(llama2(d_model=16, n_layers=1, n_heads=4, n_kv_heads=2, max_seq_len=8, norm=kind))
        norms = [mod for mod in m.modules() if isinstance(mod, (LayerNorm, RMSNorm))]
        want = LayerNorm if variant == "LayerNorm" else RMSNorm
        assert norms and all(isinstance(n, want) for n in norms), variant


def test_ngram_baselines_are_scored_on_the_models_targets():
    losses = ch10.ngram_losses(64, (1, 2))
    assert losses[1] > losses[2] > 0
    assert len(ch10.val_targets(64)) == len(ch10._windows(64)) * 63


def test_strongest_ngram_is_at_least_the_absolute_discounting_one():
    best = ch10.strongest_ngram(64)
    assert best.per_target.shape == (len(ch10.val_targets(64)),)
    assert best.loss == min(best.candidates.values())
    assert best.loss <= ch10.ngram_losses(64, (5,))[5]
    checks = ch10_analysis.norm_checks(_runs([1.0] * 3, [1.0] * 3), best.loss, best.name)
    assert best.name in checks[0].name


def test_bad_input_names_the_fix():
    with pytest.raises(ValueError, match="unknown variant 'BatchNorm'"):
        ch10.norm_run("BatchNorm", 0, **TINY)
    with pytest.raises(ValueError, match=r"prefix must be an int .* \[1, 4\]"):
        ch10.norm_run("RMSNorm", 0, prefix=9, **TINY)


def _runs(rms, layer):
    return Runs({s: {"RMSNorm": {"val_loss": a}, "LayerNorm": {"val_loss": b}}
                 for s, (a, b) in enumerate(zip(rms, layer))})


def test_equivalence_claims_on_known_data():
    same = _runs([1.200, 1.251, 1.300], [1.201, 1.250, 1.302])
    claims = ch10_analysis.norm_claims(same, "test", baseline=1.34)
    assert {c.verdict for c in claims.values()} == {"holds"}
    # differences 0.100, 0.105, 0.095: tight enough that the seeds detect the margin with 80% power
    worse = _runs([1.30, 1.355, 1.405], [1.20, 1.25, 1.31])
    assert ch10_analysis.norm_claims(worse, "test", baseline=1.5)["not_worse"].verdict == "does not hold"
    # both models lose to the 5-gram: the comparison cannot decide
    assert ch10_analysis.norm_claims(same, "test", baseline=1.1)["not_worse"].verdict == CANNOT_DECIDE
    # seeds too noisy to detect the margin: the claims read "not resolved", power is no veto
    noisy = _runs([1.0, 1.3, 1.1], [1.2, 1.0, 1.25])
    assert not ch10_analysis.norm_power(noisy).passed
    assert ch10_analysis.norm_claims(noisy, "test", baseline=1.5)["not_better"].verdict == UNRESOLVED


def test_low_power_does_not_overturn_a_one_sided_rejection():
    # differences -0.0206, +0.0002, -0.0121 (the shape of the ch10 record): the 95% interval lies
    # below +0.03, so "no worse" holds, although three seeds detect only about 0.032 with 80% power
    rms, layer = [1.2794, 1.3002, 1.2879], [1.3, 1.3, 1.3]
    runs = _runs(rms, layer)
    assert ch10_analysis.norm_diff(runs).high < ch10_analysis.MARGIN
    assert not ch10_analysis.norm_power(runs).passed
    claims = ch10_analysis.norm_claims(runs, "test", baseline=1.5)
    assert claims["not_worse"].verdict == HOLDS
    assert all("detect" not in c.name for c in claims["not_worse"].checks)


def test_longer_training_floor_reads_ch15s_record_against_its_gate():
    from llmviz.experiments import ch15

    rec = ch15.LLAMA.record("long")
    floor = ch10_analysis.longer_training_floor()
    curves = rec.runs.curves("llama", "curve")
    assert floor["lows"] == [min(c) for c in curves]
    assert floor["steps"] == rec.params["steps"]
    assert floor["gate"] == pytest.approx(ch10.strongest_ngram(rec.params["seq_len"]).loss)
    assert floor["passed"] == (min(floor["lows"]) < floor["gate"])
    # the sentence says what the numbers say, whichever way they fall
    assert ("not measured here" in floor["text"]) == (not floor["passed"])
    assert f"{floor['gate']:.3f}" in floor["text"]
    # the copied windows: the sentence reports the gate on each part, and the live model's share when given
    dup = ch10_analysis.gate_duplication(rec.params["seq_len"])
    assert 0 < dup["n_dup"] < dup["n"]
    assert dup["dup"] < dup["all"] < dup["clean"]
    share = dup["n_dup"] / dup["n"]
    assert dup["all"] == pytest.approx(share * dup["dup"] + (1 - share) * dup["clean"])
    assert floor["dup"]["n_dup"] == dup["n_dup"]
    if not floor["passed"]:
        assert f"{dup['clean']:.3f}" in floor["text"]
        assert "+0.024 nats/byte" in ch10_analysis.longer_training_floor(0.024)["text"]
        # the bound: at the break-even copied-window loss, the clean-window loss equals the n-gram's
        n, k = dup["n"], dup["n_dup"]
        for low, be in zip(floor["lows"], floor["break_even"]):
            assert (n * low - k * be) / (n - k) == pytest.approx(dup["clean"])
            assert f"{be:.3f}" in floor["text"]


def test_gate_duplication_rejects_a_gate_of_another_window():
    gate = ch10.strongest_ngram(64)
    with pytest.raises(ValueError, match="pass the seq_len"):
        ch10_analysis.gate_duplication(32, gate)


def testlast_step_split_reads_per_window_losses_and_refuses_a_mismatch():
    from types import SimpleNamespace

    from llmviz.evidence import Runs

    is_dup = torch.tensor([True, False, False, True])
    runs = Runs({0: {"llama": {"window_loss": [1.0, 2.0, 4.0, 3.0]}},
                 1: {"llama": {"window_loss": [0.5, 1.0, 1.0, 0.5]}}})
    split = ch10_analysis.last_step_split(SimpleNamespace(runs=runs, corpus_note=lambda: None), is_dup)
    assert split == {"dup": [2.0, 0.5], "clean": [3.0, 1.0]}
    # a record made before it kept per-window losses: nothing to split
    old = Runs({0: {"llama": {"val_loss": 1.0}}})
    assert ch10_analysis.last_step_split(SimpleNamespace(runs=old, corpus_note=lambda: None), is_dup) is None
    with pytest.raises(ValueError, match="must be the same"):
        ch10_analysis.last_step_split(SimpleNamespace(runs=runs, corpus_note=lambda: None), is_dup[:3])
    # trained on another Python's corpus text: its windows are other text, so no split at all
    other = SimpleNamespace(runs=runs, corpus_note=lambda: "trained on Python 3.11.7's text")
    assert ch10_analysis.last_step_split(other, is_dup[:3]) is None


def test_longer_training_floor_splits_the_records_last_step_when_it_can():
    from llmviz.experiments import ch15

    rec = ch15.LLAMA.record("long")
    floor = ch10_analysis.longer_training_floor()
    try:
        windows = rec.runs.curves("llama", "window_loss")
    except KeyError:
        assert floor["last"] is None and "keeps one loss per run" in floor["text"]
        return
    dup = floor["dup"]
    share = dup["n_dup"] / dup["n"]
    # equal-sized windows: the copied and clean parts average back to the record's last loss
    for seed_loss, d, c, w in zip(rec.runs.values("llama", "val_loss"), floor["last"]["dup"],
                                  floor["last"]["clean"], windows):
        assert len(w) == dup["n"]
        assert share * d + (1 - share) * c == pytest.approx(seed_loss, abs=1e-5)
        assert f"{c:.3f}" in floor["text"] and f"{d:.3f}" in floor["text"]
    assert "last model's loss per window" in floor["text"]
