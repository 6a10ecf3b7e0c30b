"""Chapter 17's position check: ch17's one-head GQA rotating only MLA's number of key features."""

from __future__ import annotations

import pytest

from llmviz.experiments import ch17, ch17_rope


def test_sizes_and_seeds_are_those_of_the_mla_record():
    assert ch17_rope.ROPE.sizes == ch17.MLA.sizes
    assert set(ch17_rope.ROPE.seeds) <= set(ch17.MLA.seeds)


def test_a_run_is_the_gqa_run_with_fewer_rotated_features_and_restores_the_variants():
    params = dict(ch17.SIZES["cpu"], val_windows=8, eval_every=2, steps=4)
    plain = ch17.variants
    matched = ch17_rope.rope_run(ch17_rope.ROPE_VARIANTS[0], 0, **params)
    assert ch17.variants is plain  # the module is left as it was
    full = ch17.mla_run("GQA, 1 kv head", 0, **params)
    assert matched["params"] == full["params"]  # RoPE has no weights: the same model otherwise
    assert matched["curve"][-1] != pytest.approx(full["curve"][-1], abs=1e-6)


def test_bad_variant_is_refused():
    with pytest.raises(ValueError, match="is not one of"):
        ch17_rope.rope_run("GQA, 1 kv head", 0, **ch17.SIZES["cpu"])
    assert ch17_rope.ROPE_VARIANTS[0] not in ch17.variants(**ch17.SIZES["cpu"])
