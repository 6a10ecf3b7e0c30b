"""What the readers of Phi-3.5-MoE, LFM2 and Llama 4's text model refuse, by name."""

from __future__ import annotations

import pytest

from llmviz.hf import REFUSED, SUPPORTED, config_from_hf


def test_phimoe_refuses_a_head_bias_and_other_than_two_experts(make_hf):
    with pytest.raises(NotImplementedError, match="lm_head_bias=True is not supported .*head has none"):
        config_from_hf(make_hf("phimoe", lm_head_bias=True).config)
    with pytest.raises(NotImplementedError, match="num_experts_per_tok=3 is not supported .*exactly two"):
        config_from_hf(make_hf("phimoe", num_experts_per_tok=3).config)
    config = make_hf("phimoe").config
    config.router_jitter_noise = 0.0
    with pytest.raises(ValueError, match="router_jitter_noise=0.0; SparseMixer's tolerance must be positive"):
        config_from_hf(config)


def test_lfm2_reads_only_conv_and_attention_layers(make_hf):
    config = make_hf("lfm2").config
    config.layer_types = ["conv", "sliding_attention", "conv", "full_attention"]
    with pytest.raises(NotImplementedError, match=r"layer types \['sliding_attention'\] are not supported"):
        config_from_hf(config)
    config.layer_types = ["conv"]
    with pytest.raises(ValueError, match="layer_types has 1 entries for 4 layers"):
        config_from_hf(config)
    assert "lfm2" in SUPPORTED and "llmviz reads the dense LFM2" in REFUSED["lfm2_moe"]


def test_llama4_text_checks_its_layer_lists(make_hf):
    config = make_hf("llama4_text").config
    config.no_rope_layers = [1, 0]
    with pytest.raises(ValueError, match="no_rope_layers has 2 entries for 4 layers"):
        config_from_hf(config)
    config = make_hf("llama4_text").config
    config.layer_types = ["chunked_attention", "sliding_attention", "full_attention", "full_attention"]
    with pytest.raises(ValueError, match=r"llama4_text: layer_types=.*'sliding_attention'.*expected"):
        config_from_hf(config)
