"""Kimi Linear (kimi_linear) beyond the family rows of test_parity/test_anatomy: what the loaded
model holds, padding and cached decoding against transformers, anatomy, and what the reader refuses."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.kda_layer import KimiDeltaAttention
from llmviz.attention.latent import MultiHeadLatentAttention
from llmviz.attention.latent_nope import NoRotation
from llmviz.hf import REFUSED, SUPPORTED, anatomy, config_from_hf, from_hf

from ._padding import check_padding_and_cache

transformers = pytest.importorskip("transformers")


def test_kda_and_unrotated_latent_layers_are_installed(make_hf):
    hf = make_hf("kimi_linear")
    c = config_from_hf(hf.config)
    assert (c.attn_kind, c.q_lora_rank, c.kv_lora_rank, c.moe_layers, c.moe_n_groups, c.moe_scaling) == (
        "mla", 24, 16, (1, 2, 3), 2, 2.5)
    layers = from_hf(hf).layers
    assert [type(b.self_attn) for b in layers] == [KimiDeltaAttention] * 3 + [MultiHeadLatentAttention]
    assert isinstance(layers[3].self_attn.rope, NoRotation) and layers[3].latent
    kda = layers[0].self_attn
    assert (kda.n_heads, kda.head_dim, kda.conv_kernel, kda.eps, layers[0].latent) == (4, 8, 4, 1e-5, False)
    a = anatomy(hf.config)
    assert [(x.attention, x.position) for x in a.layers] == [("linear", "none")] * 3 + [("latent", "nope")]
    assert a.linear_layers == (0, 1, 2) and a.layers[3].kv_elements == 16 + 8


def test_padding_and_cached_decoding(make_hf, gen):
    hf = make_hf("kimi_linear")
    ours = from_hf(hf)
    check_padding_and_cache(hf, ours, gen)


def test_default_config_counts_as_transformers_builds_it():
    config = transformers.KimiLinearConfig()  # Kimi-Linear-48B-A3B
    with torch.device("meta"):
        hf = transformers.KimiLinearForCausalLM(config)
    a = anatomy(config)
    assert a.total_params == sum(p.numel() for p in hf.parameters())
    assert 48e9 < a.total_params < 50e9 and 3e9 < a.active_params < 4e9  # "48B total, 3B active"


@pytest.mark.parametrize("change,error,match", [
    (dict(num_key_value_heads=2), NotImplementedError, r"num_key_value_heads=2 differs from num_attention_heads=4"),
    (dict(qk_rope_head_dim=5), NotImplementedError, r"qk_rope_head_dim=5 is odd"),
    (dict(layer_types=["linear_attention", "sliding_attention", "linear_attention", "full_attention"]),
     NotImplementedError, r"layer types \['sliding_attention'\] are not supported"),
    (dict(layer_types=["full_attention"]), ValueError, "layer_types has 1 entries for 4 layers"),
    (dict(mlp_layer_types=["dense", "moe", "sparse", "sparse"]), ValueError, "mlp_layer_types=.*'moe'"),
    (dict(hidden_act="gelu"), NotImplementedError, "hidden_act='gelu'"),
])
def test_reader_refuses_what_it_cannot_represent(make_hf, change, error, match):
    config = make_hf("kimi_linear").config
    for name, value in change.items():
        setattr(config, name, value)
    with pytest.raises(error, match=match):
        config_from_hf(config)
    assert "kimi_linear" in SUPPORTED and "kimi_linear" not in REFUSED


def test_a_checkpoint_with_a_misshapen_gate_rate_is_refused(make_hf):
    hf = make_hf("kimi_linear-dense")
    sd = hf.state_dict()
    sd["model.layers.0.self_attn.forget_gate.A_log"] = sd["model.layers.0.self_attn.forget_gate.A_log"].reshape(1, 2, 1, 1)
    with pytest.raises(ValueError, match=r"A_log has shape \(1, 2, 1, 1\), expected \(1, 1, H, 1\)"):
        from_hf(sd, config=hf.config)
