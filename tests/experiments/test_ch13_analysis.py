"""Chapter 13's reading of depth-vs-width runs: rate picks, checks, the positive control, claims."""

from __future__ import annotations

import pytest

from llmviz.evidence import CANNOT_DECIDE, Runs
from llmviz.experiments import ch13_analysis as ana

RATES = (0.003, 0.01, 0.03)
DEPTHS = (1, 8)
VARIANTS = [f"L{L}@{lr:g}" for L in DEPTHS for lr in RATES]


def _runs(loss, *, noise=(0.0, 0.01, -0.01), tps=None):
    """Runs of three seeds: ``loss[(depth, lr)]`` plus a per-seed offset; a flat curve at the end."""
    out = {}
    for s, eps in enumerate(noise):
        out[s] = {}
        for (L, lr), v in loss.items():
            final = v + eps + 0.001 * s * L
            out[s][f"L{L}@{lr:g}"] = {"val_loss": final, "curve": [3.0, 2.5, 2.2, final + 0.005, final],
                                      "tokens_per_s": (tps or {}).get(L, 1000.0) * (1 + 0.01 * s)}
    return Runs(out)


def _grid(deep_best, *, deep_at=0.01, wide_at=0.01):
    loss = {}
    for lr in RATES:
        loss[1, lr] = 2.0 + (0.0 if lr == wide_at else 0.3)
        loss[8, lr] = deep_best + (0.0 if lr == deep_at else 0.3)
    return loss


def test_picks_read_each_depth_at_its_best_rate_and_check_the_grid_edges():
    runs = _runs(_grid(1.9, deep_at=0.03))
    pick, edges = ana.picks(runs, VARIANTS, DEPTHS)
    assert pick == {1: "L1@0.01", 8: "L8@0.03"}
    assert edges[1].passed and not edges[8].passed
    assert ana.picks(runs, VARIANTS, DEPTHS, rate=0.01) == ({1: "L1@0.01", 8: "L8@0.01"}, {})
    with pytest.raises(ValueError, match="depths \\[4\\] have no variants"):
        ana.picks(runs, VARIANTS, (1, 4))


def test_deeper_wins_holds_with_every_check_passed():
    claim = ana.depth_claim(_runs(_grid(1.8)), VARIANTS, DEPTHS, "test", baseline=2.4, matched="total parameters")
    assert claim.verdict == "holds", claim
    assert [c.passed for c in claim.checks] == [True, True, True, True]
    assert claim.id == "ch13_depth" and claim.estimate.mean == pytest.approx(-0.2 + 0.007, abs=1e-9)


def test_a_model_above_the_bigram_or_a_rate_on_the_edge_means_cannot_decide():
    above = ana.depth_claim(_runs(_grid(1.8)), VARIANTS, DEPTHS, "test", baseline=1.9,
                            matched="total parameters")
    assert above.verdict == CANNOT_DECIDE and not above.checks[0].passed
    assert above.checks[0].name == "the requirement that both compared shapes beat the byte bigram"
    # the same runs against a stronger count model (the chapter passes the best byte n-gram)
    ngram = ana.depth_claim(_runs(_grid(1.8)), VARIANTS, DEPTHS, "test", baseline=1.75,
                            matched="total parameters", baseline_name="byte 5-gram")
    assert ngram.verdict == CANNOT_DECIDE
    assert ngram.checks[0].name == "the requirement that both compared shapes beat the byte 5-gram" and not ngram.checks[0].passed
    edge = ana.depth_claim(_runs(_grid(1.8, deep_at=0.003)), VARIANTS, DEPTHS, "test", baseline=2.4,
                           matched="training FLOPs per token", suffix="_x")
    assert edge.verdict == CANNOT_DECIDE and edge.id == "ch13_flops_x"


def test_the_positive_control_fails_when_the_rate_makes_no_resolvable_difference():
    loss = {(L, lr): 2.0 for L in DEPTHS for lr in RATES}
    runs = _runs(loss, noise=(0.0, 0.2, -0.2))
    pick, _ = ana.picks(runs, VARIANTS, DEPTHS)
    control = ana.rate_control(runs, VARIANTS, pick, DEPTHS)
    assert not control.passed and "L=1" in control.detail and "L=8" in control.detail
    good = _runs(_grid(1.8))
    assert ana.rate_control(good, VARIANTS, ana.picks(good, VARIANTS, DEPTHS)[0], DEPTHS).passed


def test_a_single_rate_run_has_only_the_baseline_check():
    claim = ana.depth_claim(_runs(_grid(1.8)), VARIANTS, DEPTHS, "live", baseline=2.4,
                            matched="total parameters", rate=0.01, suffix="_live")
    assert len(claim.checks) == 1 and claim.id == "ch13_depth_live"


def test_flat_claim_reads_the_last_quarter_and_the_speed_ratio_is_paired():
    runs = _runs(_grid(1.8), tps={1: 2000.0, 8: 1000.0})
    pick, _ = ana.picks(runs, VARIANTS, DEPTHS)
    flat = ana.flat_claim(runs, pick, "test")
    assert flat.estimate.mean == pytest.approx(0.005) and flat.verdict == "holds"
    assert ana.speed_ratio(runs, "L8@0.01", "L1@0.01").mean == pytest.approx(0.5)
