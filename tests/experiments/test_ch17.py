"""Chapter 17's experiment: MLA and one-head GQA cache the same, MHA four times as much."""

from __future__ import annotations

import pytest

from llmviz.analysis import layer_cache_elements
from llmviz.experiments import ch17

PARAMS = dict(ch17.SIZES["cpu"], val_windows=8, eval_every=2)


def test_gqa_and_mla_cache_the_same_and_mha_four_times_as_much():
    v = ch17.variants(**PARAMS)
    cache = {n: layer_cache_elements(c, 0) for n, c in v.items()}
    assert cache["MLA"] == cache["GQA, 1 kv head"]
    assert cache["MHA"] == PARAMS["n_heads"] * cache["GQA, 1 kv head"]


def test_mla_run_prefix_is_the_start_of_the_full_curve():
    prefix = ch17.mla_run("MLA", 0, prefix=2, **PARAMS)
    assert set(prefix) == {"curve"} and len(prefix["curve"]) == 2
    full = ch17.mla_run("MLA", 0, **dict(PARAMS, steps=4))
    assert set(full) == {"loss", "curve", "params"} and len(full["curve"]) == 3
    assert full["curve"][:2] == pytest.approx(prefix["curve"], abs=1e-5)
    assert full["curve"][-1] == pytest.approx(full["loss"], abs=1e-5)


def test_mla_run_names_a_bad_variant():
    with pytest.raises(ValueError, match="variant='MQA' is not one of"):
        ch17.mla_run("MQA", 0, prefix=1, **PARAMS)
