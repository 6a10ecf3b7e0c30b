"""Chapter 16's gate check: ch16's balancing-loss MoE with its routed output scaled."""

from __future__ import annotations

import pytest

from llmviz.experiments import ch16, ch16_gate


def test_sizes_and_seeds_are_those_of_the_moe_record():
    assert ch16_gate.GATE.sizes == ch16.MOE.sizes
    assert set(ch16_gate.GATE.seeds) <= set(ch16.MOE.seeds)


def test_a_run_is_the_moe_run_with_the_gate_scaled_and_restores_the_variants():
    params = dict(ch16.SIZES["cpu"], val_windows=8, eval_every=2, warmup=1, steps=4)
    plain = ch16.variants
    scaled = ch16_gate.gate_run(ch16_gate.GATE_VARIANTS[0], 0, **params)
    assert ch16.variants is plain  # the module is left as it was
    unscaled = ch16.moe_run("MoE + balancing loss", 0, **params)
    # the same model, data and batches except the scaling, which already moves the loss at step 0
    assert scaled["curve"][0] != pytest.approx(unscaled["curve"][0], abs=1e-6)
    assert scaled["params"] == unscaled["params"]
    assert set(scaled) == set(unscaled)


def test_bad_variant_is_refused_and_the_variants_stay():
    with pytest.raises(ValueError, match="is not one of"):
        ch16_gate.gate_run("MoE + balancing loss", 0, **ch16.SIZES["cpu"])
    assert "MoE + balancing loss, gate scaled" not in ch16.variants(**ch16.SIZES["cpu"])
