"""Every supported family loads to the same logits (float32, max |diff| <= 1e-5, or twice the
float32 rounding of llmviz's own model where that is larger: the Qwen3.5 hybrids' chunked delta
rule rounds more) and the same greedy generation as Hugging Face; every RoPE type transformers 5 computes is read from
``rope_parameters``."""

from __future__ import annotations

import pytest
import torch

from llmviz.hf import config_from_hf, from_hf
from llmviz.model import generate

from .conftest import FAMILIES
from ._padding import check_padding_and_cache

transformers = pytest.importorskip("transformers")


def _max_diff(hf, ours, x, **kw) -> tuple[float, float]:
    with torch.no_grad():
        ref, got = hf(x, **kw).logits, ours(x, **kw).logits
    return (got - ref).abs().max().item(), ref.abs().max().item()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_logits_match(family, make_hf, ids):
    hf = make_hf(family)
    ours = from_hf(hf)
    diff, size = _max_diff(hf, ours, ids)
    assert size > 1.0  # the logits are not trivially small
    with torch.no_grad():  # float32's own rounding here: the same llmviz model in float64
        exact = from_hf(hf, dtype=torch.float64)(ids).logits
        rounding = (ours(ids).logits.double() - exact).abs().max().item()
    assert diff <= max(1e-5, 2 * rounding), (
        f"{family}: max |logit diff| {diff:.2e}; float32 rounds this model by {rounding:.2e}")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_greedy_generation_matches(family, make_hf, gen):
    hf = make_hf(family)
    ours = from_hf(hf)
    prompt = torch.randint(3, 100, (1, 5), generator=gen)
    ref = hf.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0)
    got = generate(ours, prompt, max_new_tokens=12, temperature=0)
    assert torch.equal(got, ref)


def test_features_are_represented(make_hf):
    """The translated configs carry each family's defining features."""
    c = config_from_hf(make_hf("qwen2").config)
    assert (c.attn_bias, c.o_bias, c.layer_windows) == (True, False, (None, 6))
    c = config_from_hf(make_hf("qwen3").config)
    assert (c.qk_norm, c.qk_norm_scope, c.qk_norm_eps) == ("rms", "head", 1e-5)
    c = config_from_hf(make_hf("olmo2").config)
    assert (c.placement, c.qk_norm_scope) == ("post_sublayer", "all")
    c = config_from_hf(make_hf("gemma2").config)
    assert (c.placement, c.norm, c.attn_softcap, c.final_softcap, c.query_pre_attn_scalar) == (
        "sandwich", "rms_gemma", 5.0, 3.0, 20.0)
    assert c.layer_windows == (6, None) and c.embed_scale
    c = config_from_hf(make_hf("gemma3_text").config)
    assert c.layer_windows == (5, 5, 5, 5, 5, None)  # 5 local : 1 global
    assert (c.local_rope_base, c.rope_base, c.rope_scaling.kind) == (100.0, 1e6, "linear")
    assert c.qk_norm == "rms_gemma"
    c = config_from_hf(make_hf("phi3").config)
    assert (c.rotary_dim, c.layer_windows) == (8, (7, 7))
    assert config_from_hf(make_hf("llama").config).rope_base == 500000.0
    c = config_from_hf(make_hf("smollm3").config)  # a NoPE layer every second layer here
    assert (c.nope_layers, c.rope_base) == ((1, 3), 2e6)


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "default", "rope_theta": 1e6},
        {"rope_type": "linear", "factor": 4.0, "rope_theta": 5e5},
        {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4},
        {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6},
        {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6, "original_max_position_embeddings": 8,
         "beta_fast": 16.0, "beta_slow": 2.0, "truncate": False, "attention_factor": 1.2},
        {"rope_type": "yarn", "factor": 8.0, "rope_theta": 1e4, "original_max_position_embeddings": 8,
         "mscale": 1.0, "mscale_all_dim": 0.5},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 8, "rope_theta": 5e5},
        {"rope_type": "proportional", "factor": 2.0, "partial_rotary_factor": 0.25, "rope_theta": 1e4},
    ],
    ids=["default", "linear", "dynamic", "yarn", "yarn-options", "yarn-mscale", "llama3", "proportional"],
)
def test_llama_every_rope_type(rope, make_hf, ids):
    hf = make_hf("llama", rope_parameters=dict(rope), max_position_embeddings=16)
    ours = from_hf(hf)
    assert ours.config.rope_base == rope["rope_theta"]
    diff, size = _max_diff(hf, ours, ids)  # 24 tokens: past the trained 16 (dynamic rescales)
    assert diff <= 1e-5 * max(1.0, size), f"{rope['rope_type']}: {diff:.2e}"


def test_legacy_rope_theta_and_rope_scaling_are_read(make_hf, ids):
    hf = make_hf("llama", rope_theta=5e5, rope_scaling={"rope_type": "linear", "factor": 2.0},
                 rope_parameters=None)
    ours = from_hf(hf)
    assert ours.config.rope_base == 5e5 and ours.config.rope_scaling.kind == "linear"
    diff, _ = _max_diff(hf, ours, ids)
    assert diff <= 1e-5


def test_padding_mask_and_kv_cache_match(make_hf, gen):
    hf = make_hf("gemma2")
    ours = from_hf(hf)
    check_padding_and_cache(hf, ours, gen)


def test_state_dict_and_config_load_like_the_model(make_hf, ids):
    hf = make_hf("qwen3")
    a, b = from_hf(hf), from_hf(hf.state_dict(), config=hf.config)
    with torch.no_grad():
        torch.testing.assert_close(a(ids).logits, b(ids).logits, rtol=0, atol=0)
    assert from_hf(hf, dtype=torch.float64).lm_head.weight.dtype == torch.float64


def test_2025_features_are_represented(make_hf):
    """Experts, latent attention, sinks and linear layers arrive in the translated configs."""
    c = config_from_hf(make_hf("mixtral").config)
    assert (c.n_experts, c.experts_top_k, c.moe_layers, c.moe_normalize) == (4, 2, None, True)
    c = config_from_hf(make_hf("qwen3_moe").config)  # layer 0 is in mlp_only_layers: dense
    assert (c.moe_layers, c.expert_d_ff, c.d_ff) == ((1,), 32, 96)
    c = config_from_hf(make_hf("qwen2_moe").config)
    assert (c.shared_expert_d_ff, c.shared_expert_gate, c.moe_normalize) == (40, True, False)
    c = config_from_hf(make_hf("deepseek_v3").config)
    assert (c.attn_kind, c.kv_lora_rank, c.q_lora_rank, c.rope_layout) == ("mla", 16, 24, "interleaved")
    assert (c.moe_layers, c.moe_score, c.moe_scaling, c.moe_n_groups, c.moe_topk_groups) == (
        (1, 2), "sigmoid", 2.5, 2, 1)
    assert c.moe_bias_balancing and c.n_shared_experts == 1
    c = config_from_hf(make_hf("gpt_oss").config)
    assert (c.attn_sinks, c.layer_windows, c.expert_glu, c.expert_glu_limit) == (
        True, (5, None), "clamped", 1.0)
    assert c.router_bias and c.expert_bias and c.rope_scaling.kind == "yarn"
    c = config_from_hf(make_hf("qwen3_next").config)
    assert (c.linear_layers, c.attn_output_gate, c.norm, c.qk_norm, c.rotary_dim) == (
        (0, 1, 2), True, "rms_gemma", "rms_gemma", 4)
    c = config_from_hf(make_hf("qwen3_5").config)  # mRoPE keys read as plain partial rotary
    assert (c.linear_layers, c.attn_output_gate, c.rotary_dim, c.n_experts, c.d_ff) == (
        (0, 1, 3), True, 8, None, 96)
    c = config_from_hf(make_hf("qwen3_5_moe").config)  # no dense width: every layer a mixture
    assert (c.moe_layers, c.moe_normalize, c.shared_expert_gate, c.d_ff) == ((0, 1, 2, 3), True, True, 32)
    c = config_from_hf(make_hf("olmo3").config)  # 3 sliding : 1 full, RoPE per layer type
    assert (c.layer_windows, c.local_rope_base, c.rope_base, c.rope_scaling.kind) == (
        (5, 5, 5, None), 100.0, 1e4, "yarn")
    assert (c.placement, c.qk_norm, c.qk_norm_scope) == ("post_sublayer", "rms", "all")


def test_deepseek_v3_multi_token_prediction_layers_are_skipped(make_hf, ids):
    hf = make_hf("deepseek_v3")
    sd = hf.state_dict()
    sd["model.layers.3.eh_proj.weight"] = torch.zeros(64, 128)  # an MTP module (layer n_layers)
    ours = from_hf(sd, config=hf.config)
    diff, _ = _max_diff(hf, ours, ids)
    assert diff <= 1e-5
    sd["model.layers.0.self_attn.extra.weight"] = torch.zeros(1)  # a real layer stays strict
    with pytest.raises(ValueError, match=r"left unused.*extra"):
        from_hf(sd, config=hf.config)


@pytest.mark.parametrize("family", ["qwen2_moe", "deepseek_v3", "gpt_oss", "qwen3_next"])
def test_2025_families_decode_with_the_cache_like_the_full_forward(family, make_hf, gen):
    ours = from_hf(make_hf(family))
    x = torch.randint(3, 100, (2, 10), generator=gen)
    with torch.no_grad():
        cache = ours.new_cache()
        steps = [ours(x[:, :4], cache=cache).logits]
        steps += [ours(x[:, t:t + 1], cache=cache).logits for t in range(4, 10)]
        torch.testing.assert_close(torch.cat(steps, 1), ours(x).logits, atol=1e-5, rtol=0)


def test_deepseek_v3_choice_bias_stays_float32(make_hf):
    ours = from_hf(make_hf("deepseek_v3"), dtype=torch.bfloat16)
    assert ours.layers[1].mlp.gate.e_score_correction_bias.dtype == torch.float32
    assert ours.layers[1].mlp.experts.gate_up_proj.dtype == torch.bfloat16


def test_bridge_family_features_are_represented(make_hf):
    """What each family of the bridge adds arrives in the translated config (the parity rows
    above would pass trivially if a feature were dropped on both sides)."""
    c = config_from_hf(make_hf("glm").config)
    assert (c.rope_layout, c.rotary_dim, c.attn_bias, c.o_bias) == ("interleaved", 8, True, False)
    assert config_from_hf(make_hf("glm4").config).placement == "sandwich"
    c = config_from_hf(make_hf("ernie4_5").config)
    assert (c.rope_layout, c.bias, c.attn_bias) == ("interleaved", True, True)
    c = config_from_hf(make_hf("seed_oss").config)
    assert (c.attn_bias, c.o_bias, c.bias) == (True, True, True)
    c = config_from_hf(make_hf("jais2").config)
    assert (c.norm, c.ffn, c.activation, c.bias) == ("layer", "mlp", "relu2", True)
    c = config_from_hf(make_hf("starcoder2").config)
    assert (c.norm, c.ffn, c.activation, c.layer_windows) == ("layer", "mlp", "gelu_tanh", (7, 7))
    c = config_from_hf(make_hf("stablelm").config)
    assert (c.rotary_dim, c.attn_bias, c.o_bias, c.parallel) == (4, True, False, False)
    assert config_from_hf(make_hf("stablelm-parallel").config).parallel
    c = config_from_hf(make_hf("exaone4").config)  # sliding layers rotate, full ones are NoPE
    assert (c.layer_windows, c.nope_layers, c.placement) == ((6, None, 6, None), (1, 3), "post_sublayer")
    assert config_from_hf(make_hf("exaone4-full").config).nope_layers is None
    c = config_from_hf(make_hf("vaultgemma").config)
    assert (c.placement, c.norm, c.attn_softcap) == ("pre", "rms_gemma", 5.0)
    c = config_from_hf(make_hf("olmoe").config)
    assert (c.qk_norm_scope, c.n_experts, c.moe_layers) == ("all", 4, None)
    assert config_from_hf(make_hf("flex_olmo").config).placement == "post_sublayer"
    c = config_from_hf(make_hf("glm4_moe").config)
    assert (c.moe_layers, c.moe_score, c.moe_n_groups, c.qk_norm, c.rotary_dim) == (
        (1, 2), "sigmoid", 2, "rms", 8)
    c = config_from_hf(make_hf("glm4_moe_lite").config)
    assert (c.attn_kind, c.moe_layers) == ("mla", (1,))
    c = config_from_hf(make_hf("youtu").config)
    assert (c.attn_kind, c.n_experts) == ("mla", None)
    assert config_from_hf(make_hf("dots1").config).layer_windows == (None, 6, 6)
    c = config_from_hf(make_hf("minimax_m2").config)  # its choice bias sits on the block, not the gate
    assert (c.moe_score, c.moe_bias_balancing, c.qk_norm_scope, c.rotary_dim) == ("sigmoid", True, "all", 8)
    c = config_from_hf(make_hf("exaone_moe").config)
    assert (c.placement, c.nope_layers, c.moe_layers, c.n_shared_experts) == ("pre", (1, 3), (1, 2), 1)
    c = config_from_hf(make_hf("ernie4_5_moe").config)  # softmax scores, a fixed choice bias
    assert (c.moe_layers, c.moe_score, c.moe_bias_balancing, c.n_shared_experts, c.rope_layout) == (
        (1, 2), "softmax", True, 1, "interleaved")
    c = config_from_hf(make_hf("hunyuan_v1_dense").config)  # NTK-alpha: a fixed, stretched base
    assert (c.attn_kind, c.qk_norm, c.attn_bias) == ("qk_norm_after_rope", "rms", True)
    assert c.rope_base == pytest.approx(1e4 * 50.0 ** (16 / 14)) and c.rope_scaling is None
    c = config_from_hf(make_hf("hunyuan_v1_moe").config)
    assert (c.attn_kind, c.n_experts, c.n_shared_experts, c.expert_d_ff, c.moe_layers) == (
        "qk_norm_after_rope", 4, 1, 32, None)
    c = config_from_hf(make_hf("apertus").config)  # a plain MLP with the trainable xIELU
    assert (c.ffn, c.qk_norm, c.attn_kind) == ("xielu", "rms", "standard")
    c = config_from_hf(make_hf("deepseek_v2").config)  # softmax scores, never renormalised
    assert (c.attn_kind, c.moe_score, c.moe_normalize, c.moe_scaling, c.moe_n_groups, c.moe_layers) == (
        "mla", "softmax", False, 2.5, None, (1, 2))
    from llmviz.moe.group_max import BestInGroupRouter

    hf = make_hf("deepseek_v2-grouped")  # groups ranked by their best expert, not V3's best two
    assert (config_from_hf(hf.config).moe_n_groups, config_from_hf(hf.config).moe_topk_groups) == (2, 1)
    assert [type(b.mlp.gate) for b in from_hf(hf).layers[1:]] == [BestInGroupRouter] * 2
    c = config_from_hf(make_hf("deepseek_v2-lite").config)
    assert (c.q_lora_rank, c.moe_n_groups) == (None, None)
    from llmviz.moe.sparsemixer import SparseMixerRouter

    hf = make_hf("phimoe")  # Mixtral's block with LayerNorms, q/k/v/o biases, SparseMixer routers
    c = config_from_hf(hf.config)
    assert (c.norm, c.attn_bias, c.o_bias, c.n_experts, c.experts_top_k) == ("layer", True, True, 4, 2)
    assert [(type(b.mlp.gate), b.mlp.gate.eps) for b in from_hf(hf).layers] == [(SparseMixerRouter, 0.2)] * 2
    from llmviz.attention.short_conv import ShortConv

    hf = make_hf("lfm2")  # short convolutions in the conv layers, QK-normed attention in the others
    c = config_from_hf(hf.config)
    assert (c.qk_norm, c.qk_norm_scope, c.d_ff, c.norm) == ("rms", "head", 64, "rms")  # int(2 * 96 / 3) = 64
    assert [type(b.self_attn).__name__ for b in from_hf(hf).layers] == ["ShortConv", "MultiHeadAttention"] * 2
    conv = from_hf(hf).layers[0].self_attn
    assert isinstance(conv, ShortConv) and conv.kernel_size == hf.config.conv_L_cache == 3
    from llmviz.attention.llama4_qk import QueryTemperature, RotaryThenRMS
    from llmviz.moe.input_scaled import InputScaledMoE

    hf = make_hf("llama4_text")  # chunked RoPE layers, NoPE layers with a query temperature
    c = config_from_hf(hf.config)
    assert (c.local_attention, c.layer_windows, c.nope_layers, c.moe_layers, c.rope_layout) == (
        "chunked", (5, None, 5, None), (1, 3), (1, 3), "interleaved")
    layers = from_hf(hf).layers
    assert [type(b.self_attn.rope) for b in layers] == [RotaryThenRMS, QueryTemperature] * 2
    assert [type(b.mlp) for b in layers[1::2]] == [InputScaledMoE] * 2
    c = config_from_hf(make_hf("gpt_neox").config)  # q/k/v fused per head, partial rotary
    assert (c.norm, c.ffn, c.bias, c.rotary_dim, c.parallel, c.tie_embeddings) == ("layer", "mlp", True, 4, False, False)
    from llmviz.model.parallel_norms import TwoNormParallelBlock

    hf = make_hf("gpt_neox-parallel")  # side by side, one LayerNorm per branch
    assert config_from_hf(hf.config).parallel
    assert all(isinstance(b, TwoNormParallelBlock) and b.ffn_norm is not None for b in from_hf(hf).layers)
    c = config_from_hf(make_hf("bloom").config)  # ALiBi, a norm after the embedding, tied head
    assert (c.position, c.embed_norm, c.norm, c.activation, c.tie_embeddings) == ("alibi", True, "layer", "gelu_tanh", True)
    c = config_from_hf(make_hf("falcon").config)  # one key/value head, attention and MLP side by side
    assert (c.n_kv_heads, c.parallel, c.norm, c.ffn, c.bias) == (1, True, "layer", "mlp", True)
    assert (config_from_hf(make_hf("falcon-new").config).n_kv_heads, config_from_hf(make_hf("falcon-serial").config).parallel) == (2, False)
    c = config_from_hf(make_hf("persimmon").config)  # LayerNorm QK-norm per head, squared ReLU
    assert (c.qk_norm, c.qk_norm_scope, c.activation, c.rotary_dim, c.norm) == ("layer", "head", "relu2", 8, "layer")
    c = config_from_hf(make_hf("gpt_bigcode").config)  # GPT-2's block with one key/value head
    assert (c.n_kv_heads, c.position, c.activation) == (1, "learned", "gelu_tanh")
    assert config_from_hf(make_hf("gpt_bigcode-mha").config).n_kv_heads == 4
    c = config_from_hf(make_hf("gpt_neo").config)  # unscaled scores, a local layer of 7 keys
    assert (c.layer_windows, c.query_pre_attn_scalar, c.attn_bias, c.o_bias) == ((None, 7), 1.0, False, True)


def test_gpt_oss_config_without_swiglu_fields_reads_the_hard_coded_values(make_hf):
    # transformers 5.17's GptOssConfig has no swiglu_alpha / swiglu_limit (its experts hard-code
    # 1.702 and 7.0); the reader must take those, and the config's own values whenever stated
    from llmviz.hf._readers_2025 import GPT_OSS_ALPHA_UNSTATED, GPT_OSS_LIMIT_UNSTATED

    hc = make_hf("gpt_oss").config
    hc.swiglu_alpha, hc.swiglu_limit = 2.5, 3.0
    assert (config_from_hf(hc).expert_glu_alpha, config_from_hf(hc).expert_glu_limit) == (2.5, 3.0)

    class OlderConfig:  # the same config, seen as a release without the field sees it
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            if name in ("swiglu_alpha", "swiglu_limit"):
                raise AttributeError(name)
            return getattr(self._inner, name)

    old = OlderConfig(make_hf("gpt_oss").config)
    assert not hasattr(old, "swiglu_alpha") and not hasattr(old, "swiglu_limit")
    read = config_from_hf(old)
    assert (read.expert_glu_alpha, read.expert_glu_limit) == (GPT_OSS_ALPHA_UNSTATED, GPT_OSS_LIMIT_UNSTATED)
    assert (GPT_OSS_ALPHA_UNSTATED, GPT_OSS_LIMIT_UNSTATED) == (1.702, 7.0)
