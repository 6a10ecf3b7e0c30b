"""ModelConfig fields that select per-layer features."""

from __future__ import annotations

import pytest

from llmviz.model.config import ModelConfig


def test_nope_layers_drop_rotation_on_those_layers_only():
    import torch

    from llmviz.model.lm import DecoderLM

    cfg = ModelConfig(n_layers=3, nope_layers=(2, 0, 2))
    assert cfg.nope_layers == (0, 2)
    model = DecoderLM(cfg)
    assert [layer.self_attn.rope is None for layer in model.layers] == [True, False, True]
    # With every layer NoPE the model sees position only through the causal mask
    nope = DecoderLM(ModelConfig(n_layers=2, nope_layers=(0, 1)))
    assert all(layer.self_attn.rope is None for layer in nope.layers)
    assert nope(torch.randint(0, 256, (1, 5))).logits.shape == (1, 5, 256)


@pytest.mark.parametrize("kwargs,match", [
    (dict(nope_layers=(3,)), r"nope_layers must hold layer indices in \[0, 2\); got \[3\]"),
    (dict(nope_layers=(True,)), r"nope_layers must hold layer indices in \[0, 2\); got \[True\]"),
    (dict(nope_layers=(0,), position="alibi"), r"nope_layers \(\(0,\)\) only applies to position='rope'"),
])
def test_nope_layers_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**kwargs)
