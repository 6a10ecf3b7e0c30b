"""Presets: values no source states are marked as assumptions, not passed off as published."""

from dataclasses import fields

import pytest

from llmviz.model import presets
from llmviz.model.config import ModelConfig


def test_palm_eps_is_not_published():
    assert presets.published_eps("palm") is None
    assert "not published" in presets.ASSUMED["palm"]["norm_eps"]
    # the model still builds: the assumed number is there, and named in the reason
    eps = presets.palm().norm_eps
    assert eps > 0 and f"{eps:g}" in presets.ASSUMED["palm"]["norm_eps"]


@pytest.mark.parametrize("name", [n for n in presets.PRESETS if n != "palm"])
def test_released_families_report_their_config_eps(name):
    eps = presets.published_eps(name)
    assert eps is not None and eps == presets.preset(name).norm_eps
    assert eps in (1e-5, 1e-6)  # the released configs' values (GPT-2, Llama 2, ..., Gemma 2)


def test_assumed_names_real_families_and_fields():
    field_names = {f.name for f in fields(ModelConfig)}
    for family, assumed in presets.ASSUMED.items():
        assert family in presets.PRESETS
        assert assumed and set(assumed) <= field_names
        assert all(why.startswith("not published") for why in assumed.values())


def test_published_eps_rejects_unknown_family():
    with pytest.raises(ValueError, match="unknown preset 'palm2'.*choose one of"):
        presets.published_eps("palm2")


def test_trained_context_is_the_paper_value_not_the_position_table():
    # Mistral 7B: trained at 8192 (paper, Table 1); the config's position table holds 32768
    assert presets.trained_context("mistral") == 8192
    assert presets.mistral("7b").max_seq_len == 32768
    assert {presets.trained_context(n) for n in presets.PRESETS} <= {1024, 2048, 4096, 8192}
    # where the config's table is the trained context, the two agree
    assert presets.trained_context("llama2") == presets.llama2("7b").max_seq_len == 4096
    assert presets.trained_context("gpt2") == presets.gpt2("small").max_seq_len == 1024


def test_trained_context_rejects_unknown_family():
    with pytest.raises(ValueError, match="unknown preset 'mistral2'.*choose one of"):
        presets.trained_context("mistral2")
