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
    params = dict(PARAMS, warmup=1, steps=6)  # after a 1-step warmup the schedule depends on steps
    prefix = ch17.mla_run("MLA", 0, prefix=4, **params)
    assert set(prefix) == {"curve"} and len(prefix["curve"]) == 3
    full = ch17.mla_run("MLA", 0, **params)
    assert set(full) == {"loss", "curve", "params"} and len(full["curve"]) == 4
    assert full["curve"][:3] == pytest.approx(prefix["curve"], abs=1e-6)
    assert full["curve"][-1] == pytest.approx(full["loss"], abs=1e-5)
    # a 4-step run has its own, shorter schedule: not the start of the 6-step run
    short = ch17.mla_run("MLA", 0, **dict(params, steps=4))
    assert abs(short["curve"][2] - full["curve"][2]) > 1e-5


@pytest.mark.parametrize("size", sorted(ch17.SIZES))
def test_records_check_compares_curve_points_after_step_0(size):
    params, prefix = ch17.SIZES[size], ch17.MLA.prefix_for(size)
    assert prefix % params["eval_every"] == 0 and 2 * params["eval_every"] <= prefix < params["steps"]


def test_mla_run_names_a_bad_variant():
    with pytest.raises(ValueError, match="variant='MQA' is not one of"):
        ch17.mla_run("MQA", 0, prefix=1, **PARAMS)
    with pytest.raises(ValueError, match="prefix must be a positive int"):
        ch17.mla_run("MLA", 0, prefix=0, **PARAMS)
