"""anatomy(config): exact parameter counts (against the models transformers builds), published
counts of the flagship configs the config classes default to, cache and FLOPs arithmetic, the
table, and every kind of input."""

from __future__ import annotations

import json

import pytest
import torch

from llmviz.hf import Anatomy, anatomy, from_hf

from .conftest import FAMILIES

transformers = pytest.importorskip("transformers")

_TINY = dict(vocab_size=100, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=2, pad_token_id=0, bos_token_id=1,
             eos_token_id=2)
#: config class -> tiny overrides (MoE, latent and sink families included: anatomy reads them)
TINY = {
    "LlamaConfig": dict(attention_bias=True, mlp_bias=True), "MistralConfig": dict(sliding_window=8),
    "Qwen2Config": {}, "Qwen3Config": dict(head_dim=16), "GemmaConfig": dict(head_dim=16),
    "Gemma2Config": dict(head_dim=16), "Gemma3TextConfig": dict(head_dim=16), "Olmo2Config": {},
    "Olmo3Config": dict(sliding_window=8),
    "Phi3Config": {}, "SmolLM3Config": {},
    "MixtralConfig": dict(num_local_experts=4, num_experts_per_tok=2),
    "Qwen2MoeConfig": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                           shared_expert_intermediate_size=48, mlp_only_layers=[0]),
    "Qwen3MoeConfig": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                           decoder_sparse_step=2, head_dim=16),
    "GptOssConfig": dict(num_local_experts=4, num_experts_per_tok=2, head_dim=16),
    "Qwen3NextConfig": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                            shared_expert_intermediate_size=48, head_dim=16, linear_num_key_heads=2,
                            linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8),
    "Qwen3_5TextConfig": dict(head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                              linear_key_head_dim=8, linear_value_head_dim=8),
    "Qwen3_5MoeTextConfig": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                 shared_expert_intermediate_size=48, head_dim=16, linear_num_key_heads=2,
                                 linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8),
    "DeepseekV3Config": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                             first_k_dense_replace=1, q_lora_rank=24, kv_lora_rank=16,
                             qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12, n_group=2,
                             topk_group=1, head_dim=8),
}


def _hf_count(config) -> int:
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", list(TINY))
def test_parameter_count_is_exact(name):
    config = getattr(transformers, name)(**{**_TINY, **TINY[name]})
    a = anatomy(config)
    assert a.total_params == _hf_count(config)
    assert a.active_params <= a.total_params and len(a.layers) == 4


def test_qwen3_5_moe_has_no_dense_width():
    """Qwen3.5-MoE's config has no intermediate_size: every layer is a mixture of experts."""
    tiny = {k: v for k, v in _TINY.items() if k != "intermediate_size"}
    config = transformers.Qwen3_5MoeTextConfig(**tiny, **TINY["Qwen3_5MoeTextConfig"])
    assert not hasattr(config, "intermediate_size")
    a = anatomy(config)
    assert a.total_params == _hf_count(config) and a.d_ff is None and a.experts == 4
    assert "no dense layer" in a.to_frame().set_index("fact").loc["feed-forward", "value"]


@pytest.mark.parametrize("name", ["GPT2Config", "Gemma2Config", "Qwen2MoeConfig"])
def test_tied_and_untied_counts(name):
    base = dict(vocab_size=100, n_embd=32, n_layer=2, n_head=4) if name == "GPT2Config" else {
        **_TINY, **TINY.get(name, {})}
    for tie in (True, False):
        config = getattr(transformers, name)(**base, tie_word_embeddings=tie)
        assert anatomy(config).total_params == _hf_count(config)


# Flagship defaults (checked against each class's own defaults) and their published totals.
PUBLISHED = [
    ("LlamaConfig", "Llama 2 7B", 6.74e9, None),
    ("MistralConfig", "Mistral 7B", 7.24e9, None),
    ("GemmaConfig", "Gemma 7B", 8.54e9, None),
    ("Gemma2Config", "Gemma 2 2B", 2.61e9, None),
    ("Phi3Config", "Phi-3-mini", 3.82e9, None),
    ("GPT2Config", "GPT-2", 124e6, None),
    ("MixtralConfig", "Mixtral 8x7B", 46.7e9, 12.9e9),
    ("Qwen2MoeConfig", "Qwen1.5-MoE-A2.7B", 14.3e9, 2.7e9),
    ("DeepseekV3Config", "DeepSeek-V3", 671e9, None),  # 37B active, counted without MTP below
    ("GptOssConfig", "gpt-oss-120b", 116.8e9, None),
    ("Qwen3NextConfig", "Qwen3-Next-80B-A3B", 80e9, None),
]


@pytest.mark.parametrize("name, model, total, active", PUBLISHED, ids=[p[1] for p in PUBLISHED])
def test_flagship_defaults_match_published_counts(name, model, total, active):
    a = anatomy(getattr(transformers, name)())
    assert a.total_params == pytest.approx(total, rel=0.01), model
    if active is not None:
        assert a.active_params == pytest.approx(active, rel=0.01), model


def test_published_configs_from_dicts_and_files(tmp_path):
    llama3 = dict(model_type="llama", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                  num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                  rope_theta=500000.0, max_position_embeddings=8192, tie_word_embeddings=False)
    assert anatomy(llama3).total_params == pytest.approx(8.03e9, rel=0.01)  # Llama 3 8B
    assert anatomy(llama3).layers[0].rope_base == 500000.0
    (tmp_path / "config.json").write_text(json.dumps(llama3))
    assert anatomy(tmp_path).total_params == anatomy(str(tmp_path / "config.json")).total_params
    qwen3_8b = dict(model_type="qwen3", vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                    num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                    tie_word_embeddings=False)
    assert anatomy(qwen3_8b).total_params == pytest.approx(8.2e9, rel=0.01)  # Qwen3-8B
    deepseek = anatomy(transformers.DeepseekV3Config())
    assert deepseek.active_params == pytest.approx(37e9, rel=0.02)  # 37B "activated"


def test_layers_say_attention_and_position_per_layer():
    g3 = anatomy(transformers.Gemma3TextConfig())
    kinds = [(layer.attention, layer.window, layer.rope_base) for layer in g3.layers[:6]]
    assert kinds == [("sliding", 4096, 10000.0)] * 5 + [("global", None, 1e6)]
    assert g3.qk_norm == "per head" and g3.placement == "sandwich"
    smol = anatomy(transformers.SmolLM3Config())
    assert [layer.position for layer in smol.layers[:4]] == ["rope", "rope", "rope", "nope"]
    ds = anatomy(transformers.DeepseekV3Config())
    assert {layer.attention for layer in ds.layers} == {"latent"}
    assert [layer.ffn for layer in ds.layers[:4]] == ["dense", "dense", "dense", "moe"]
    assert (ds.experts, ds.experts_active, ds.shared_experts, ds.head_dim) == (256, 8, 1, 192)
    oss = anatomy(transformers.GptOssConfig())
    assert oss.layers[0].rope_scaling == "yarn x32.0" and oss.layers[0].window == 128
    nxt = anatomy(transformers.Qwen3NextConfig())  # 3 linear-attention layers, then 1 global
    assert [layer.attention for layer in nxt.layers[:4]] == ["linear"] * 3 + ["global"]
    assert nxt.layers[0].kv_elements == 0 and nxt.layers[3].rotary_dim == 64
    phi = anatomy(transformers.Phi3Config(partial_rotary_factor=0.5))
    assert phi.layers[0].rotary_dim == 48


def test_model_wide_extras_sinks_gate_latent_nope_linear():
    oss, nxt = anatomy(transformers.GptOssConfig()), anatomy(transformers.Qwen3NextConfig())
    ds, smol = anatomy(transformers.DeepseekV3Config()), anatomy(transformers.SmolLM3Config())
    llama = anatomy(transformers.LlamaConfig())
    assert (oss.sinks, oss.output_gate, oss.latent_dim) == (True, False, None)
    assert (nxt.sinks, nxt.output_gate) == (False, True) and nxt.linear_layers[:3] == (0, 1, 2)
    assert (ds.latent_dim, ds.n_kv_heads, ds.n_heads) == (512, 1, 128)  # one latent for all heads
    assert smol.nope_layers[:3] == (3, 7, 11) and llama.nope_layers == () == llama.linear_layers
    assert not (llama.sinks or llama.output_gate) and llama.latent_dim is None
    facts = dict(oss.to_frame().values)
    assert facts["attention extras"] == "learned sinks"
    assert dict(ds.to_frame().values)["attention extras"] == "latent cache of 512"
    assert dict(llama.to_frame().values)["attention extras"] == "none"


def test_kv_cache_and_flops_arithmetic():
    a = anatomy(transformers.LlamaConfig())  # 32 layers, 32 kv heads of 128 dims
    assert a.kv_bytes_per_token == 2 * 32 * 32 * 128 * 2  # K and V, L, G, D, bf16
    assert a.kv_cache_bytes(4096, batch=2) == 2 * 4096 * a.kv_bytes_per_token
    mistral = anatomy(transformers.MistralConfig())  # window 4096: the cache stops growing
    assert mistral.kv_cache_bytes(8192) == mistral.kv_cache_bytes(4096)
    ds = anatomy(transformers.DeepseekV3Config())
    assert ds.kv_bytes_per_token == 61 * (512 + 64) * 2  # MLA caches the latent and a rope key
    short, long = anatomy(transformers.LlamaConfig(), context=1), anatomy(transformers.LlamaConfig())
    assert short.flops_per_token == pytest.approx(2 * a.total_params - 2 * 32000 * 4096, rel=1e-3)
    assert long.flops_per_token - short.flops_per_token == 2 * 4095 * 32 * (32 * 256)
    assert anatomy(transformers.LlamaConfig(), bytes_per_element=1).kv_bytes_per_token == a.kv_bytes_per_token // 2


def test_table_rendering():
    a = anatomy(transformers.MixtralConfig())
    frame = a.to_frame()
    assert list(frame.columns) == ["fact", "value"]
    facts = dict(zip(frame["fact"], frame["value"]))
    assert facts["experts"].startswith("8 routed, 2 active")
    assert "<table" in a._repr_html_() and "46.703 B" in a._repr_html_()
    layers = a.layers_frame()
    assert len(layers) == 32 and layers["params"].sum() + 2 * 32000 * 4096 + 4096 == a.total_params


def test_anatomy_agrees_with_the_loaded_model(make_hf):
    hf = make_hf("gemma3_text")
    a = anatomy(hf.config)
    assert a.total_params == sum(p.numel() for p in from_hf(hf).parameters())
    assert isinstance(a, Anatomy)


def test_anatomy_errors(tmp_path):
    with pytest.raises(ValueError, match="a config dict needs its 'model_type'"):
        anatomy({"hidden_size": 64})
    with pytest.raises(NotImplementedError, match="anatomy has no reader for model_type 'bert'"):
        anatomy({"model_type": "bert"})
    with pytest.raises(NotImplementedError, match="anatomy has no reader for model_type 'mamba'"):
        anatomy(transformers.MambaConfig())
    with pytest.raises(ValueError, match="no config file at"):
        anatomy(tmp_path / "missing.json")
    with pytest.raises(TypeError, match="anatomy takes a transformers config, a dict .* got int"):
        anatomy(7)
    with pytest.raises(ValueError, match="context must be a positive int, got 0"):
        anatomy(transformers.LlamaConfig(), context=0)
    with pytest.raises(ValueError, match="seq_len must be a positive int"):
        anatomy(transformers.LlamaConfig()).kv_cache_bytes(0)


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "gpt_oss",
                                    "qwen3_next"])
def test_anatomy_counts_the_loaded_2025_models(family, make_hf):
    """anatomy() from the config alone equals the parameters of the model the bridge loads."""
    hf = make_hf(family)
    ours = from_hf(hf)
    assert anatomy(hf.config).total_params == sum(p.numel() for p in ours.parameters())


@pytest.mark.parametrize("family", sorted(f for f in FAMILIES if FAMILIES[f][0] not in TINY and f != "gpt2"))
def test_anatomy_of_every_loaded_family_counts_both_models(family, make_hf):
    """Families anatomy reads through the loader's own reader: its counts equal the parameters
    of the model transformers builds and of the model the bridge loads."""
    hf = make_hf(family)
    a = anatomy(hf.config)
    # trained parameters: ERNIE 4.5 MoE keeps its fixed choice bias as a frozen Parameter,
    # llmviz as a buffer (DeepSeek-V3's choice bias is a buffer on both sides)
    assert a.total_params == sum(p.numel() for p in hf.parameters() if p.requires_grad)
    assert a.total_params == sum(p.numel() for p in from_hf(hf).parameters())
    assert a.active_params <= a.total_params and len(a.layers) == hf.config.num_hidden_layers


def test_anatomy_names_what_the_2026_families_add(make_hf):
    assert anatomy(make_hf("hunyuan_v1_dense").config).qk_norm == "per head, after RoPE"
    assert anatomy(make_hf("qwen3").config).qk_norm == "per head"
    apertus = anatomy(make_hf("apertus").config)
    assert (apertus.ffn, apertus.activation) == ("mlp", "xielu")
    falcon = anatomy(make_hf("falcon").config)
    assert (falcon.placement, falcon.n_kv_heads) == ("parallel", 1)
