"""Chapter 19's no-convolution control: the recall model of ch19 with the softmax layers' short
convolution left out, everything else shared."""

from __future__ import annotations

import pytest
import torch

from llmviz.experiments import ch19, ch19_noconv


def _tiny():
    return dict(ch19.SIZES["cpu"], steps=2, eval_every=1, eval_size=16)


def test_sizes_are_those_of_the_recall_record():
    assert ch19_noconv.SIZES == ch19.SIZES and ch19_noconv.SEEDS == ch19.SEEDS


def test_the_model_is_ch19s_softmax_model_without_the_convolution():
    p = ch19.SIZES["long"]
    with torch.device("meta"):
        plain = ch19_noconv._build(**p)
        conv = ch19._build("softmax", 0, **p)
    names = {n for n, _ in plain.named_parameters()}
    extra = {n for n, _ in conv.named_parameters()} - names
    assert extra and all("conv" in n for n in extra), extra  # only the convolution differs
    assert names <= {n for n, _ in conv.named_parameters()}


def test_a_run_records_curve_positions_and_parameters():
    out = ch19_noconv.noconv_run("softmax, no convolution", 0, **_tiny())
    assert len(out["curve"]) == 3 and len(out["by_position"]) == _tiny()["n_queries"]
    assert 0.0 <= out["acc"] <= 1.0 and out["params"] > 0
    short = ch19_noconv.noconv_run("softmax, no convolution", 0, prefix=1, **_tiny())
    assert list(short) == ["curve"] and short["curve"] == out["curve"][:2]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="is not one of"):
        ch19_noconv.noconv_run("softmax", 0, **_tiny())
    with pytest.raises(ValueError, match="prefix must be an int"):
        ch19_noconv.noconv_run("softmax, no convolution", 0, prefix=5, **_tiny())
