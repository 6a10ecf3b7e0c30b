"""The bridge loads exactly or refuses, naming what it cannot represent; bad inputs name the fix."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from llmviz.hf import (
    REFUSED,
    SUPPORTED,
    config_from_hf,
    from_hf,
)

transformers = pytest.importorskip("transformers")


def test_llama_state_dict_with_one_extra_tensor_is_refused(make_hf):
    hf = make_hf("llama")
    sd = hf.state_dict()
    sd["model.layers.0.self_attn.extra_scale"] = torch.ones(4)
    with pytest.raises(ValueError, match=r"1 checkpoint tensor\(s\) would be left unused.*extra_scale"):
        from_hf(sd, config=hf.config)


def test_missing_tensor_is_named(make_hf):
    hf = make_hf("llama")
    sd = {k: v for k, v in hf.state_dict().items() if "layers.1.mlp.up_proj" not in k}
    with pytest.raises(ValueError, match=r"lacks tensors .*layers\.1\.mlp\.up_proj\.weight"):
        from_hf(sd, config=hf.config)


@pytest.mark.parametrize(
    "family, tensor",
    [("qwen2", "q_proj.bias"), ("qwen3", "q_norm.weight"), ("gemma2", "pre_feedforward_layernorm.weight")],
)
def test_features_a_wrong_config_would_drop_are_refused(family, tensor, make_hf):
    """A checkpoint read with a Llama config: its extra biases / norms are named, not dropped."""
    hf = make_hf(family)
    llama = make_hf("llama").config  # same sizes (head_dim 16), plain Llama features
    with pytest.raises(ValueError, match=f"would be left unused.*{tensor.split('.')[0]}"):
        from_hf(hf.state_dict(), config=llama)


def test_o_proj_bias_that_the_family_lacks_is_refused(make_hf):
    hf = make_hf("qwen2")
    sd = hf.state_dict()
    sd["model.layers.0.self_attn.o_proj.bias"] = torch.zeros(64)
    with pytest.raises(ValueError, match=r"left unused.*o_proj\.bias"):
        from_hf(sd, config=hf.config)


def test_tie_word_embeddings_mismatches(make_hf):
    hf = make_hf("llama-tied")
    sd = hf.state_dict()
    sd["lm_head.weight"] = sd["lm_head.weight"] + 1.0  # a separate, different head
    with pytest.raises(ValueError, match="tie_word_embeddings=True but the checkpoint's lm_head.weight differs"):
        from_hf(sd, config=hf.config)
    untied = make_hf("llama")
    sd = {k: v for k, v in untied.state_dict().items() if k != "lm_head.weight"}
    with pytest.raises(ValueError, match=r"lacks tensors .*lm_head\.weight \(tie_word_embeddings=False"):
        from_hf(sd, config=untied.config)


def test_fused_and_shape_mismatches_are_refused(make_hf):
    hf = make_hf("phi3")
    sd = hf.state_dict()
    sd["model.layers.0.self_attn.qkv_proj.weight"] = torch.zeros(80, 64)
    with pytest.raises(ValueError, match="fused tensor 'layers.0.self_attn.qkv_proj.weight' has 80 rows"):
        from_hf(sd, config=hf.config)
    sd = make_hf("llama").state_dict()
    sd["model.norm.weight"] = torch.ones(65)
    with pytest.raises(ValueError, match=r"norm\.weight: checkpoint shape \(65,\)"):
        from_hf(sd, config=make_hf("llama").config)


@pytest.mark.parametrize(
    "rope, error, match",
    [
        ({"rope_type": "longrope", "rope_theta": 1e4, "long_factor": [1.0] * 8,
          "short_factor": [1.0] * 8, "original_max_position_embeddings": 32},
         NotImplementedError, "rope_type='longrope' is not supported: LongRoPE"),
        ({"rope_type": "wobbly", "rope_theta": 1e4}, ValueError, "unknown rope_type 'wobbly'"),
        ({"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4, "wiggle": 1.0}, ValueError,
         r"keys \['wiggle'\] are not understood for rope_type='linear'"),
        ({"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5},
         NotImplementedError, "partial_rotary_factor=0.5 is not used this way"),
    ],
    ids=["longrope", "unknown", "unknown-key", "partial-on-llama"],
)
def test_rope_refusals(rope, error, match, make_hf):
    config = make_hf("llama").config
    config.rope_parameters = rope  # as a config.json could say; bypasses transformers' own checks
    with pytest.raises(error, match=match):
        config_from_hf(config)


@pytest.mark.parametrize("model_type", sorted(REFUSED))
def test_refused_families_are_named_with_their_reason(model_type):
    with pytest.raises(NotImplementedError, match=f"model_type '{model_type}' is refused: ") as err:
        config_from_hf(SimpleNamespace(model_type=model_type))
    assert REFUSED[model_type] in str(err.value)
    assert model_type not in SUPPORTED


def _causal_lm_model_types() -> set[str]:
    """Every model_type with a ``*ForCausalLM`` class: transformers' causal-LM auto mapping, the
    other auto mappings (Mistral Small 4's class is in the image-text one), and the classes its
    modeling files define without registering (Kosmos-2's text decoder)."""
    import importlib
    import os
    import re

    from transformers.models.auto import modeling_auto

    types = set(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    registered = set()
    for name in dir(modeling_auto):
        mapping = getattr(modeling_auto, name)
        if name.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            for t, classes in mapping.items():
                classes = classes if isinstance(classes, (list, tuple)) else [classes]
                registered.update(c for c in classes if isinstance(c, str))
                types.update(t for c in classes if isinstance(c, str) and c.endswith("ForCausalLM"))
    root = os.path.join(os.path.dirname(transformers.__file__), "models")
    for folder in sorted(os.listdir(root)):
        if folder == "auto" or not os.path.isdir(os.path.join(root, folder)):
            continue
        for f in sorted(os.listdir(os.path.join(root, folder))):
            if not (f.startswith("modeling_") and f.endswith(".py")):
                continue
            text = open(os.path.join(root, folder, f)).read()
            for cls in set(re.findall(r"^class (\w+ForCausalLM)\(", text, re.M)) - registered:
                module = importlib.import_module(f"transformers.models.{folder}.{f[:-3]}")
                types.add(getattr(module, cls).config_class.model_type)
    return types


def test_every_causal_lm_transformers_ships_is_loaded_or_refused_by_name():
    """Each model_type with a causal-LM class (or the model_type its config class writes: gpt-sw3
    is a GPT-2 config) is loaded or refused with a reason."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    types = _causal_lm_model_types()
    assert {"mistral4", "kosmos_2_text_model"} <= types - set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    neither = sorted(t for t in types if t not in SUPPORTED and t not in REFUSED
                     and transformers.CONFIG_MAPPING[t].model_type not in SUPPORTED)
    assert not neither, f"neither loaded nor refused by name: {neither}"
    assert len(SUPPORTED) >= 40
    stale = sorted(set(REFUSED) - types)
    assert not stale, f"REFUSED names model types transformers does not ship: {stale}"


def test_the_readme_counts_the_loaded_families():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f"strict checkpoint loading of {len(SUPPORTED)} families" in readme


def test_unknown_family_and_unsupported_features():
    with pytest.raises(NotImplementedError, match="model_type 'my_model' has no llmviz reader; supported"):
        config_from_hf(SimpleNamespace(model_type="my_model"))
    tiny = dict(vocab_size=100, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4)
    with pytest.raises(NotImplementedError, match="hidden_act='gelu'; this family uses silu"):
        config_from_hf(transformers.LlamaConfig(hidden_act="gelu", **tiny))
    with pytest.raises(NotImplementedError, match="use_bidirectional_attention=True"):
        config_from_hf(transformers.GemmaConfig(use_bidirectional_attention=True, head_dim=16, **tiny))
    with pytest.raises(NotImplementedError, match="hidden_act='quick_gelu' is not supported"):
        config_from_hf(transformers.GemmaConfig(hidden_act="quick_gelu", head_dim=16, **tiny))
    gpt2 = dict(vocab_size=100, n_embd=64, n_layer=2, n_head=4)
    with pytest.raises(NotImplementedError, match="scale_attn_by_inverse_layer_idx=True"):
        config_from_hf(transformers.GPT2Config(scale_attn_by_inverse_layer_idx=True, **gpt2))
    with pytest.raises(NotImplementedError, match="add_cross_attention=True"):
        config_from_hf(transformers.GPT2Config(add_cross_attention=True, **gpt2))


def test_bad_inputs_name_the_fix(make_hf):
    hf = make_hf("llama")
    with pytest.raises(ValueError, match=r"bare state_dict: pass its transformers config too"):
        from_hf(hf.state_dict())
    with pytest.raises(TypeError, match="expected a Hugging Face model or its state_dict"):
        from_hf(42, config=hf.config)
    with pytest.raises(TypeError, match=r"entries \[3\] are not str -> Tensor"):
        from_hf({3: torch.zeros(1)}, config=hf.config)
    with pytest.raises(TypeError, match="expected a transformers config .* got dict"):
        config_from_hf({"model_type": "llama"})
    with pytest.raises(TypeError, match="dtype must be a floating torch.dtype"):
        from_hf(hf, dtype=torch.int64)


def test_one_entry_point_for_llama_and_gpt2(make_hf, ids):
    llama, gpt2 = make_hf("llama"), make_hf("gpt2")
    assert config_from_hf(llama.config).position == "rope"
    assert config_from_hf(gpt2.config).position == "learned"
    with torch.no_grad():
        assert (from_hf(gpt2)(ids).logits - gpt2(ids).logits).abs().max() <= 1e-5
        ours = from_hf(llama.state_dict(), config=llama.config)
        assert (ours(ids).logits - llama(ids).logits).abs().max() <= 1e-5


def test_2025_family_features_llmviz_lacks_are_named():
    tiny = dict(vocab_size=100, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=4,
                moe_intermediate_size=32, shared_expert_intermediate_size=40)
    config = transformers.Qwen3NextConfig(linear_key_head_dim=8, linear_value_head_dim=16,
                                          layer_types=["linear_attention", "full_attention"], **tiny)
    with pytest.raises(NotImplementedError, match="linear_key_head_dim=8 differs from linear_value_head_dim=16"):
        config_from_hf(config)
    config = transformers.Qwen3NextConfig(layer_types=["linear_attention", "full_attention"], **tiny)
    config.layer_types = ["linear_attention", "sliding_attention"]
    with pytest.raises(NotImplementedError, match=r"qwen3_next: layer types \['sliding_attention'\]"):
        config_from_hf(config)


def test_olmo3_rope_llmviz_cannot_split_by_layer_type_is_named():
    tiny = dict(vocab_size=100, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                num_attention_heads=4, sliding_window=5)
    scaled = {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}
    config = transformers.Olmo3Config(rope_parameters={"sliding_attention": scaled,
                                                       "full_attention": dict(scaled)}, **tiny)
    with pytest.raises(NotImplementedError, match=r"olmo3: sliding_attention rope_type='linear'"):
        config_from_hf(config)
    config = transformers.Olmo3Config(**tiny)
    config.rope_parameters = {"rope_theta": 1e4, "full_attention": {"rope_theta": 1e4}}
    with pytest.raises(ValueError, match="olmo3: rope_parameters mixes per-layer-type and flat keys"):
        config_from_hf(config)


def test_qwen3_5_fields_llmviz_would_misread_are_named(make_hf):
    config = make_hf("qwen3_5").config
    config.rope_parameters = dict(config.rope_parameters, mrope_section=[2, 2])
    with pytest.raises(ValueError, match=r"qwen3_5_text: mrope_section=\[2, 2\]; expected three counts"):
        config_from_hf(config)
    config = make_hf("qwen3_5_moe").config
    config.mlp_only_layers = [0]  # a dense layer, but no width for it
    with pytest.raises(ValueError, match="qwen3_5_moe_text: no intermediate_size, but not every layer"):
        config_from_hf(config)


def test_packed_qwen3_next_tensor_of_the_wrong_size_is_refused(make_hf):
    hf = make_hf("qwen3_next")
    sd = hf.state_dict()
    sd["model.layers.0.linear_attn.in_proj_qkvz.weight"] = torch.zeros(90, 64)
    with pytest.raises(ValueError, match=r"in_proj_qkvz has shape \(90, 64\)"):
        from_hf(sd, config=hf.config)


def test_bridge_families_refuse_what_they_cannot_represent(make_hf):
    with pytest.raises(NotImplementedError, match="qk_layernorm=True is not supported .*a separate LayerNorm per head"):
        config_from_hf(make_hf("stablelm", qk_layernorm=True).config)
    config = make_hf("olmoe").config
    config.clip_qkv = 8.0  # as OLMoE's config.json may say
    with pytest.raises(NotImplementedError, match="olmoe: clip_qkv=8.0 clamps q, k and v"):
        config_from_hf(config)
    config = make_hf("glm4_moe_lite").config
    config.mlp_layer_types = ["dense", "sparse"]  # one short
    with pytest.raises(ValueError, match="mlp_layer_types=.*for each of the 3 layers"):
        config_from_hf(config)
    hf = make_hf("glm")  # a fused gate_up_proj whose rows the config does not account for
    state = dict(hf.state_dict())
    w = state["model.layers.0.mlp.gate_up_proj.weight"]
    state["model.layers.0.mlp.gate_up_proj.weight"] = torch.cat([w, w[:4]])
    with pytest.raises(ValueError, match=r"fused tensor 'layers.0.mlp.gate_up_proj.weight' has 196 rows .* 192"):
        from_hf(state, config=hf.config)
    state = dict(make_hf("glm4").state_dict())
    state["model.layers.1.post_mlp_layernorm.bias"] = torch.zeros(64)  # a norm bias GLM-4 lacks
    with pytest.raises(ValueError, match=r"left unused.*post_mlp_layernorm.bias"):
        from_hf(state, config=make_hf("glm4").config)


def test_2026_families_refuse_what_they_cannot_represent(make_hf):
    config = make_hf("hunyuan_v1_moe").config
    config.moe_topk = [2, 1]  # one top-k per layer, as HunYuan's config may say
    with pytest.raises(NotImplementedError, match=r"hunyuan_v1_moe: moe_topk=\[2, 1\] varies by layer"):
        config_from_hf(config)
    config = make_hf("ernie4_5_moe").config
    config.use_bias = True
    with pytest.raises(NotImplementedError, match="use_bias=True is not supported .*lm_head"):
        config_from_hf(config)
    config = make_hf("ernie4_5_moe").config
    config.moe_norm_min = 0.5
    with pytest.raises(NotImplementedError, match="moe_norm_min=0.5 can exceed"):
        config_from_hf(config)
    config = make_hf("deepseek_v2").config
    config.topk_method = "noaux_tc"  # DeepSeek-V3's method name: not a DeepSeek-V2 router
    with pytest.raises(NotImplementedError, match="topk_method='noaux_tc' is not supported; llmviz reads 'greedy'"):
        config_from_hf(config)
    with pytest.raises(ValueError, match="group_limited_greedy' with n_group=None, topk_group=None: the router needs both"):
        config_from_hf(transformers.DeepseekV2Config(num_hidden_layers=2, topk_method="group_limited_greedy",
                                                     num_experts_per_tok=6))
    # transformers' default DeepseekV2Config leaves num_experts_per_tok unset (None)
    with pytest.raises(ValueError, match=r"deepseek_v2: n_routed_experts=64, num_experts_per_tok=None: .*needs both"):
        config_from_hf(transformers.DeepseekV2Config(num_hidden_layers=2))
    config = make_hf("apertus").config
    config.hidden_act = "silu"
    with pytest.raises(NotImplementedError, match="hidden_act='silu' is not supported .*xIELU"):
        config_from_hf(config)
    with pytest.raises(NotImplementedError, match="apply_residual_connection_post_layernorm=True is not supported"):
        config_from_hf(make_hf("bloom", apply_residual_connection_post_layernorm=True).config)
    with pytest.raises(NotImplementedError, match="num_ln_in_parallel_attn=2 is not supported .*two LayerNorms"):
        config_from_hf(make_hf("falcon", new_decoder_architecture=True, num_kv_heads=2).config)
    with pytest.raises(NotImplementedError, match="alibi=True is not supported"):
        config_from_hf(make_hf("falcon", alibi=True).config)
    config = make_hf("gpt_neo").config
    config.attention_layers = ["global", "dilated"]
    with pytest.raises(ValueError, match=r"gpt_neo: attention_layers=\['global', 'dilated'\]; expected"):
        config_from_hf(config)
