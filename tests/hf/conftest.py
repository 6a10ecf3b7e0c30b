"""Tiny random Hugging Face models of every supported family, built in code (offline).

Norm weights and every bias are pushed away from their initial values, so that a norm or a
bias the loader ignored changes the logits.
"""

from __future__ import annotations

import logging

import pytest
import torch

transformers = pytest.importorskip("transformers")
logging.getLogger("transformers").setLevel(logging.ERROR)  # tiny vocabularies trip token-id notes

V = 100
_TINY = dict(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
             initializer_range=0.1, bos_token_id=1, eos_token_id=2, pad_token_id=0)

_QWEN3_5 = dict(num_hidden_layers=4, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                linear_key_head_dim=8, linear_value_head_dim=8,
                layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"],
                rope_parameters={"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5,
                                 "mrope_section": [2, 1, 1], "mrope_interleaved": True})

_SIGMOID_MOE = dict(num_hidden_layers=3, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                    n_shared_experts=1, first_k_dense_replace=1, n_group=2, topk_group=1,
                    routed_scaling_factor=2.5, norm_topk_prob=True, attention_bias=True)

FAMILIES_MLA = dict(num_hidden_layers=3, num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=2,
                    moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1,
                    n_group=2, topk_group=1, q_lora_rank=24, kv_lora_rank=16,
                    qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12, routed_scaling_factor=2.5,
                    rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4,
                                     "original_max_position_embeddings": 16,
                                     "mscale": 1.0, "mscale_all_dim": 1.0})

_GEMMA4 = dict(num_hidden_layers=6, head_dim=4, global_head_dim=8, sliding_window=5,
               layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
               vocab_size_per_layer_input=V, hidden_size_per_layer_input=8, num_kv_shared_layers=2,
               final_logit_softcapping=30.0,
               rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                "full_attention": {"rope_type": "proportional", "rope_theta": 1e4,
                                                   "partial_rotary_factor": 0.25}})

#: name -> (config class, model class (None: the auto class's choice), config overrides)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(rope_parameters={"rope_type": "default", "rope_theta": 500000.0})),
    "llama-bias": ("LlamaConfig", "LlamaForCausalLM", dict(attention_bias=True, mlp_bias=True)),
    "llama-tied": ("LlamaConfig", "LlamaForCausalLM", dict(tie_word_embeddings=True)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=7)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(use_sliding_window=True, sliding_window=6, max_window_layers=1)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=16, rms_norm_eps=1e-5)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(head_dim=16)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM",
               dict(head_dim=16, sliding_window=6, query_pre_attn_scalar=20,
                    attn_logit_softcapping=5.0, final_logit_softcapping=3.0,
                    attn_implementation="eager")),  # the reference: SDPA has no soft-cap
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                    dict(head_dim=16, num_hidden_layers=6, sliding_window=5, query_pre_attn_scalar=20,
                         rope_parameters={
                             "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                             "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6}})),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(rms_norm_eps=1e-6)),
    "phi3": ("Phi3Config", "Phi3ForCausalLM",
             dict(sliding_window=7, rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                                     "partial_rotary_factor": 0.5})),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {}),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM",
                dict(num_hidden_layers=4, no_rope_layer_interval=2,
                     rope_parameters={"rope_type": "default", "rope_theta": 2e6})),
    # the 2025 families: experts, latent attention, sinks, linear-attention hybrids
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=7)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=40, norm_topk_prob=False)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       norm_topk_prob=True, mlp_only_layers=[0])),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", dict(FAMILIES_MLA)),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM",
                dict(head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=5,
                     swiglu_limit=1.0, layer_types=["sliding_attention", "full_attention"],
                     rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 1.5e5,
                                      "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                                      "original_max_position_embeddings": 16})),
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM",
                   dict(num_hidden_layers=4, head_dim=16, num_experts=4, num_experts_per_tok=2,
                        moe_intermediate_size=32, shared_expert_intermediate_size=40,
                        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                        linear_value_head_dim=8,
                        layer_types=["linear_attention", "linear_attention", "linear_attention",
                                     "full_attention"])),
    # Qwen3.5's text models: Qwen3-Next's stack, projections stored apart, multimodal RoPE keys
    "qwen3_5": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM", dict(_QWEN3_5)),
    "qwen3_5_moe": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM",
                    dict(_QWEN3_5, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                         shared_expert_intermediate_size=40, intermediate_size=None)),  # as released
    "olmo3": ("Olmo3Config", "Olmo3ForCausalLM",
              dict(num_hidden_layers=4, sliding_window=5, rms_norm_eps=1e-6,
                   rope_parameters={
                       "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                       "full_attention": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4,
                                          "original_max_position_embeddings": 16}})),
    # dense decoders that are Llama's block with a family's own choices
    "glm": ("GlmConfig", "GlmForCausalLM", dict(head_dim=16, partial_rotary_factor=0.5)),
    "glm4": ("Glm4Config", "Glm4ForCausalLM", dict(head_dim=16, partial_rotary_factor=0.5)),
    "ernie4_5": ("Ernie4_5Config", "Ernie4_5ForCausalLM", dict(head_dim=16, use_bias=True)),
    "seed_oss": ("SeedOssConfig", "SeedOssForCausalLM",
                 dict(head_dim=16, attention_bias=True, attention_out_bias=True, mlp_bias=True)),
    "helium": ("HeliumConfig", "HeliumForCausalLM", dict(head_dim=16, attention_bias=True)),
    "arcee": ("ArceeConfig", "ArceeForCausalLM", dict(attention_bias=True, mlp_bias=True)),
    "jais2": ("Jais2Config", "Jais2ForCausalLM", {}),
    "ministral": ("MinistralConfig", "MinistralForCausalLM",
                  dict(head_dim=16, sliding_window=6, layer_types=["sliding_attention", "full_attention"],
                       rope_parameters={"rope_type": "default", "rope_theta": 1e4})),
    "cwm": ("CwmConfig", "CwmForCausalLM", dict(num_hidden_layers=4, sliding_window=6)),
    "internlm3": ("InternLM3Config", None,
                  dict(head_dim=16, attention_bias=True, mlp_bias=True)),
    "iquestcoder": ("IQuestCoderConfig", None, dict(head_dim=16)),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", dict(sliding_window=7)),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM",
                 dict(use_qkv_bias=True, partial_rotary_factor=0.25)),
    "stablelm-parallel": ("StableLmConfig", "StableLmForCausalLM", dict(use_parallel_residual=True)),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", dict(num_experts=4, num_experts_per_tok=2)),
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM",
                 dict(_SIGMOID_MOE, head_dim=16, partial_rotary_factor=0.5, use_qk_norm=True)),
    "solar_open": ("SolarOpenConfig", "SolarOpenForCausalLM", dict(_SIGMOID_MOE, head_dim=16)),
    "dots1": ("Dots1Config", "Dots1ForCausalLM",
              dict(_SIGMOID_MOE, head_dim=16, sliding_window=6, max_window_layers=1)),
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM",
                dict(num_hidden_layers=4, head_dim=16, sliding_window=6, sliding_window_pattern=2)),
    "exaone4-full": ("Exaone4Config", "Exaone4ForCausalLM",  # no window: every layer rotates
                     dict(head_dim=16, sliding_window=None, layer_types=["full_attention"] * 2)),
    "flex_olmo": ("FlexOlmoConfig", "FlexOlmoForCausalLM", dict(num_experts=4, num_experts_per_tok=2)),
    # families transformers runs with another family's classes (the auto class picks them)
    "exaone": ("ExaoneConfig", None, dict(head_dim=16, attention_bias=True)),
    "sarvam_moe": ("SarvamMoEConfig", None, dict(_SIGMOID_MOE, head_dim=16, use_qk_norm=True)),
    "sarvam_mla": ("SarvamMLAConfig", None, dict(FAMILIES_MLA)),
    "glm4_moe_lite": ("Glm4MoeLiteConfig", "Glm4MoeLiteForCausalLM",
                      dict(FAMILIES_MLA, mlp_layer_types=["dense", "sparse", "dense"])),
    "youtu": ("YoutuConfig", "YoutuForCausalLM",
              {k: v for k, v in FAMILIES_MLA.items() if k in ("num_key_value_heads", "q_lora_rank",
               "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "rope_parameters")}),
    "exaone_moe": ("ExaoneMoeConfig", "ExaoneMoeForCausalLM",
                   dict(num_hidden_layers=4, head_dim=16, sliding_window=6, sliding_window_pattern=2,
                        num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                        num_shared_experts=1, n_group=2, topk_group=1, routed_scaling_factor=2.5,
                        mlp_layer_types=["dense", "sparse", "sparse", "dense"])),
    "minimax_m2": ("MiniMaxM2Config", "MiniMaxM2ForCausalLM",
                   dict(head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                        rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                         "partial_rotary_factor": 0.5})),
    "ernie4_5_moe": ("Ernie4_5_MoeConfig", "Ernie4_5_MoeForCausalLM",
                     dict(num_hidden_layers=3, head_dim=16, moe_num_experts=8, moe_k=2,
                          moe_intermediate_size=32, moe_num_shared_experts=1, moe_layer_start_index=1)),
    "hunyuan_v1_dense": ("HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM",
                         dict(head_dim=16, attention_bias=True,
                              rope_parameters={"rope_type": "dynamic", "alpha": 50.0, "rope_theta": 1e4,
                                               "factor": 1.0})),
    "hunyuan_v1_moe": ("HunYuanMoEV1Config", "HunYuanMoEV1ForCausalLM",
                       dict(head_dim=16, num_experts=4, moe_topk=2, intermediate_size=32)),
    "apertus": ("ApertusConfig", "ApertusForCausalLM", dict(head_dim=16, attention_bias=True)),
    "deepseek_v32": ("DeepseekV32Config", "DeepseekV32ForCausalLM",  # 6 of up to 24 keys per query: sparse
                     dict(FAMILIES_MLA, index_topk=6, index_head_dim=16, index_n_heads=4)),
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM",
                    dict(FAMILIES_MLA, topk_method="greedy", n_group=None, topk_group=None, num_experts_per_tok=3)),
    "deepseek_v2-grouped": ("DeepseekV2Config", "DeepseekV2ForCausalLM",  # V2 (236B): 1 of 2 groups
                            dict(FAMILIES_MLA, topk_method="group_limited_greedy")),
    "deepseek_v2-lite": ("DeepseekV2Config", "DeepseekV2ForCausalLM",  # V2-Lite: no q LoRA, greedy
                         dict(FAMILIES_MLA, q_lora_rank=None, topk_method="greedy", n_group=None,
                              topk_group=None, rope_parameters={"rope_type": "default", "rope_theta": 1e4})),
    "phimoe": ("PhimoeConfig", "PhimoeForCausalLM",  # SparseMixer's wide tolerance: more near-ties
               dict(num_local_experts=4, num_experts_per_tok=2, attention_bias=True, router_jitter_noise=0.2)),
    "lfm2": ("Lfm2Config", "Lfm2ForCausalLM",  # conv, attention, conv, attention; biased convolutions
             dict(num_hidden_layers=4, layer_types=["conv", "full_attention", "conv", "full_attention"],
                  conv_bias=True, block_multiple_of=16)),
    "llama4_text": ("Llama4TextConfig", "Llama4ForCausalLM",  # chunks of 5, NoPE every 2nd layer, 2 MoE layers
                    dict(num_hidden_layers=4, head_dim=16, intermediate_size=32, intermediate_size_mlp=96,
                         num_local_experts=4, num_experts_per_tok=1, moe_layers=[1, 3], attention_chunk_size=5,
                         no_rope_layer_interval=2, floor_scale=4, attn_scale=0.5)),
    "kimi_linear": ("KimiLinearConfig", "KimiLinearForCausalLM",  # 3 KDA layers : 1 NoPE latent layer
                    dict(num_hidden_layers=4, num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2,
                         moe_intermediate_size=32, n_shared_experts=1, n_group=2, topk_group=1,
                         routed_scaling_factor=2.5, q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8,
                         qk_rope_head_dim=8, v_head_dim=12, attention_bias=True, linear_num_heads=4,
                         linear_head_dim=8, linear_conv_kernel_dim=4,
                         layer_types=["linear_attention"] * 3 + ["full_attention"])),
    "kimi_linear-dense": ("KimiLinearConfig", "KimiLinearForCausalLM",  # plain q_proj, no experts
                          dict(num_hidden_layers=3, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=16,
                               qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, linear_num_heads=2,
                               linear_head_dim=16, linear_conv_kernel_dim=3, mlp_layer_types=["dense"] * 3,
                               layer_types=["linear_attention", "full_attention", "linear_attention"])),
    # Mistral Small 4: DeepSeek-V3 with a softmax group router and queries scaled by position: the
    # scale steps at positions 8 and 16 (beta 0.5), inside the 24-token test sequence
    "mistral4": ("Mistral4Config", "Mistral4ForCausalLM",
                 dict(FAMILIES_MLA, norm_topk_prob=True,
                      rope_parameters=dict(FAMILIES_MLA["rope_parameters"], original_max_position_embeddings=8,
                                           llama_4_scaling_beta=0.5, partial_rotary_factor=0.5))),
    "mistral4-plain": ("Mistral4Config", "Mistral4ForCausalLM",  # q_proj, rotate-half, one group, raw weights
                       dict(FAMILIES_MLA, q_lora_rank=None, rope_interleave=False, n_group=1, topk_group=1,
                            norm_topk_prob=False, num_hidden_layers=2, first_k_dense_replace=0,
                            rope_parameters=dict(FAMILIES_MLA["rope_parameters"], llama_4_scaling_beta=0.0,
                                                 partial_rotary_factor=0.5))),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM",  # serial blocks
                 dict(use_parallel_residual=False, num_key_value_heads=None,
                      rope_parameters={"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.25})),
    "gpt_neox-parallel": ("GPTNeoXConfig", "GPTNeoXForCausalLM",  # Pythia: two norms per parallel block
                          dict(use_parallel_residual=True, num_key_value_heads=None,
                               rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                                "partial_rotary_factor": 0.25})),
    "bloom": ("BloomConfig", "BloomForCausalLM", {}),
    "bloom-6heads": ("BloomConfig", "BloomForCausalLM", dict(hidden_size=48, n_head=6)),  # ALiBi's odd slopes
    "falcon": ("FalconConfig", "FalconForCausalLM", {}),  # Falcon-7B: multi-query, parallel
    "falcon-serial": ("FalconConfig", "FalconForCausalLM", dict(multi_query=False, parallel_attn=False)),
    "falcon-new": ("FalconConfig", "FalconForCausalLM",  # grouped keys/values, one norm
                   dict(new_decoder_architecture=True, num_kv_heads=2, num_ln_in_parallel_attn=1)),
    "persimmon": ("PersimmonConfig", "PersimmonForCausalLM",
                  dict(num_key_value_heads=None, rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                                                  "partial_rotary_factor": 0.5})),
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", {}),  # multi-query
    "gpt_bigcode-mha": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", dict(multi_query=False)),
    "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM", {}),  # a global layer, then a local one
    "vaultgemma": ("VaultGemmaConfig", "VaultGemmaForCausalLM",
                   dict(head_dim=16, sliding_window=6, query_pre_attn_scalar=20,
                        attn_logit_softcapping=5.0, final_logit_softcapping=3.0,
                        attn_implementation="eager")),  # as gemma2
    # Gemma 4: per-layer inputs, the last 2 layers reuse keys/values, global heads 8 wide (sliding: 4)
    "gemma4_text": ("Gemma4TextConfig", "Gemma4ForCausalLM", dict(_GEMMA4)),
    "gemma4_text-k_eq_v": ("Gemma4TextConfig", "Gemma4ForCausalLM",  # values = keys, 3 reuse (2x wide MLPs)
                           dict(_GEMMA4, attention_k_eq_v=True,
                                use_double_wide_mlp=True, num_kv_shared_layers=3)),
    "gemma4_text-moe": ("Gemma4TextConfig", "Gemma4ForCausalLM",  # dense MLP + 4 experts (top 2) per layer
                        dict(_GEMMA4, enable_moe_block=True, num_experts=4, top_k_experts=2,
                             moe_intermediate_size=16)),
}


def build(config_cls: str, model_cls: str, **overrides):
    """A seeded tiny model of that class, norms and biases randomised, in eval mode."""
    if config_cls == "BloomConfig":
        cfg = dict(vocab_size=V, hidden_size=64, n_layer=2, n_head=4, initializer_range=0.1,
                   bos_token_id=1, eos_token_id=2, pad_token_id=0)
    elif config_cls == "GPTNeoConfig":
        cfg = dict(vocab_size=V, hidden_size=64, num_layers=2, num_heads=4, max_position_embeddings=64,
                   attention_types=[[["global", "local"], 1]], window_size=7, initializer_range=0.1,
                   bos_token_id=1, eos_token_id=2, pad_token_id=0)
    elif config_cls == "FalconConfig":
        cfg = dict(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                   max_position_embeddings=64, initializer_range=0.1, bos_token_id=1, eos_token_id=2,
                   pad_token_id=0, bias=True)
    elif config_cls in ("GPT2Config", "GPTBigCodeConfig"):
        cfg = dict(vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                   initializer_range=0.1, bos_token_id=1, eos_token_id=2)
    else:
        cfg = dict(_TINY)
    cfg.update(overrides)
    torch.manual_seed(0)
    if not hasattr(transformers, config_cls):  # a family newer than the installed release
        pytest.skip(f"transformers {transformers.__version__} has no {config_cls}")
    config = getattr(transformers, config_cls)(**cfg)
    if model_cls is None:  # families that reuse another family's classes (InternLM3: Llama's)
        hf = transformers.AutoModelForCausalLM.from_config(config).eval()
    else:
        hf = getattr(transformers, model_cls)(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name or "ln_" in name or name.endswith((".bias", "sinks", "_bias", ".alpha_p", ".alpha_n")):
                p.add_(0.3 * torch.randn_like(p))
        for name, b in hf.named_buffers():
            if name.endswith(("e_score_correction_bias", "layer_scalar")):  # DeepSeek-V3's choice bias, Gemma 4's scalar
                b.add_(0.3 * torch.randn_like(b))
    return hf


@pytest.fixture
def make_hf():
    """``make_hf(family, **config_overrides)`` -> a tiny HF model (see :data:`FAMILIES`)."""

    def make(family: str, **overrides):
        config_cls, model_cls, base = FAMILIES[family]
        return build(config_cls, model_cls, **{**base, **overrides})

    return make


@pytest.fixture
def ids(gen) -> torch.Tensor:
    """(2, 24) token ids: longer than every sliding window above."""
    return torch.randint(3, V, (2, 24), generator=gen)
