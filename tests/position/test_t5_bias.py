"""T5's bias as a model position scheme: settings, their resolution from a config, the stack module."""

from __future__ import annotations

import pytest
import torch

from llmviz.position import T5Bias, T5BiasSettings, T5RelativeBias, resolve_t5_bias


def test_resolve_fills_defaults_and_reads_mappings():
    assert resolve_t5_bias(None, "t5") == T5BiasSettings()
    assert resolve_t5_bias(None, "rope") is None
    given = {"num_buckets": 8, "max_distance": 20, "per_layer": True}  # what asdict makes of it
    assert resolve_t5_bias(given, "t5") == T5BiasSettings(**given)
    settings = T5BiasSettings(num_buckets=16, max_distance=64)
    assert resolve_t5_bias(settings, "t5") is settings


def test_resolve_refuses_settings_for_another_scheme_and_bad_types():
    with pytest.raises(ValueError, match=r"position='alibi'; it only applies to position='t5'"):
        resolve_t5_bias(T5BiasSettings(), "alibi")
    with pytest.raises(TypeError, match="got int"):
        resolve_t5_bias(3, "t5")
    with pytest.raises(ValueError, match=r"unknown fields \['bidirectional'\]"):
        resolve_t5_bias({"bidirectional": True}, "t5")


def test_shared_table_gives_every_layer_one_tensor():
    bias = T5Bias(3, (0, 1, 2), T5BiasSettings(num_buckets=8, max_distance=20))
    out = bias(5, 12)
    assert set(out) == {0, 1, 2}
    assert out[0] is out[1] is out[2]
    assert out[0].shape == (3, 5, 12)
    assert bias.table(0) is bias.table(2)
    assert sum(p.numel() for p in bias.parameters()) == 8 * 3


def test_per_layer_tables_are_separate_and_causal():
    bias = T5Bias(2, (0, 2), T5BiasSettings(num_buckets=8, max_distance=20, per_layer=True))
    assert bias.table(0) is not bias.table(2)
    assert sum(p.numel() for p in bias.parameters()) == 2 * 8 * 2
    with torch.no_grad():
        for i in (0, 2):
            bias.table(i).relative_attention_bias.weight.normal_()
        out = bias(6, 6, dtype=torch.float64)
    assert out[0].dtype == torch.float64 and not torch.equal(out[0], out[2])
    ref = T5RelativeBias(2, num_buckets=8, max_distance=20, bidirectional=False)
    ref.relative_attention_bias.weight.data.copy_(bias.table(2).relative_attention_bias.weight)
    torch.testing.assert_close(out[2], ref(6).detach().double())
    # causal buckets: every future key shares bucket 0, i.e. the distance-0 value
    upper = torch.ones(6, 6, dtype=torch.bool).triu()
    assert torch.all(out[0][:, upper] == out[0][:, :1, :1].reshape(2, 1))
