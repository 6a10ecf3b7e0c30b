"""Real models' published configurations, held once: the zoo's shapes as ``transformers`` configs.

The configuration classes of ``transformers`` are not a source for a released model: some
defaults match one (``LlamaConfig()`` is Llama 2 7B), others match none (``Gemma3TextConfig()``
is a Gemma-2-2B-shaped stack with a 4,096 window) or another size than the one a page names
(``GptOssConfig()`` is gpt-oss-120b, not 20b), and some bases differ from the checkpoints'
(``SmolLM3Config()`` and ``Qwen3NextConfig()`` use a RoPE base the released files do not).
Every real-model number the book prints comes from :data:`PUBLISHED`: the fields of each
model's released ``config.json`` that set its shape, windows, experts and RoPE bases, with the
file they come from. :func:`published_config` builds the ``transformers`` config from them
(every other field is the class's, and does not change a count the book prints).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PublishedConfig", "PUBLISHED", "published_config"]


@dataclass(frozen=True)
class PublishedConfig:
    """One released model: its ``model_type``, the fields of its ``config.json`` that matter
    here, where they come from, and the zoo row (:data:`~llmviz.model.zoo.ZOO`) it belongs to."""

    model_type: str
    fields: dict[str, Any]
    source: str
    zoo: str | None = None
    notes: tuple[str, ...] = field(default=())
    #: the released ``config.json``'s ``max_position_embeddings``: the context the model is
    #: released for (kept here, not passed to ``transformers``, so no built config changes)
    max_context: int | None = None


_GEMMA3_ROPE = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}}
_GPT_OSS = dict(hidden_size=2880, intermediate_size=2880, num_attention_heads=64,
                num_key_value_heads=8, head_dim=64, sliding_window=128, experts_per_token=4,
                vocab_size=201088, rope_theta=150_000.0)

#: name -> the released configuration's fields (``huggingface.co/<repo>/config.json``).
PUBLISHED: dict[str, PublishedConfig] = {
    "Llama 2 7B": PublishedConfig("llama", dict(
        hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, vocab_size=32000, rope_theta=10_000.0, max_position_embeddings=4096),
        "meta-llama/Llama-2-7b-hf config.json", zoo="Llama 2 (7B)", max_context=4096),
    "Mistral 7B": PublishedConfig("mistral", dict(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=32000, rope_theta=10_000.0, sliding_window=4096),
        "mistralai/Mistral-7B-v0.1 config.json", zoo="Mistral (7B)", max_context=32768),
    "Mixtral 8x7B": PublishedConfig("mixtral", dict(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=32000, num_local_experts=8, num_experts_per_tok=2,
        rope_theta=1_000_000.0, sliding_window=None),
        "mistralai/Mixtral-8x7B-v0.1 config.json", zoo="Mixtral (8x7B)"),
    "Qwen3-30B-A3B": PublishedConfig("qwen3_moe", dict(
        hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768, num_hidden_layers=48,
        num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128,
        num_experts_per_tok=8, norm_topk_prob=True, vocab_size=151936, rope_theta=1_000_000.0,
        tie_word_embeddings=False), "Qwen/Qwen3-30B-A3B config.json"),
    "DeepSeek-V3": PublishedConfig("deepseek_v3", dict(
        hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
        num_hidden_layers=61, num_attention_heads=128, num_key_value_heads=128,
        n_shared_experts=1, n_routed_experts=256, num_experts_per_tok=8, routed_scaling_factor=2.5,
        n_group=8, topk_group=4, first_k_dense_replace=3, kv_lora_rank=512, q_lora_rank=1536,
        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, vocab_size=129280),
        "deepseek-ai/DeepSeek-V3 config.json", zoo="DeepSeek-V3 (671B)", max_context=163840),
    "gpt-oss-120b": PublishedConfig("gpt_oss", dict(
        _GPT_OSS, num_hidden_layers=36, num_local_experts=128),
        "openai/gpt-oss-120b config.json", zoo="gpt-oss (120B)"),
    "gpt-oss-20b": PublishedConfig("gpt_oss", dict(
        _GPT_OSS, num_hidden_layers=24, num_local_experts=32),
        "openai/gpt-oss-20b config.json", max_context=131072),
    "Gemma 3 27B": PublishedConfig("gemma3_text", dict(
        hidden_size=5376, intermediate_size=21504, num_hidden_layers=62, num_attention_heads=32,
        num_key_value_heads=16, head_dim=128, query_pre_attn_scalar=168, sliding_window=1024,
        vocab_size=262208, rope_parameters=_GEMMA3_ROPE),
        "google/gemma-3-27b-pt config.json (text_config); window 1,024, 5 sliding : 1 global",
        zoo="Gemma 3 (27B)", max_context=131072),
    "Gemma 3 1B": PublishedConfig("gemma3_text", dict(
        hidden_size=1152, intermediate_size=6912, num_hidden_layers=26, num_attention_heads=4,
        num_key_value_heads=1, head_dim=256, query_pre_attn_scalar=256, sliding_window=512,
        vocab_size=262144, rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}}),
        "google/gemma-3-1b-pt config.json (the 1B model's window is 512)"),
    "Gemma 2 2B": PublishedConfig("gemma2", dict(
        hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, query_pre_attn_scalar=256, sliding_window=4096,
        attn_logit_softcapping=50.0, final_logit_softcapping=30.0, vocab_size=256000),
        "google/gemma-2-2b config.json"),
    "Llama 3.2 1B": PublishedConfig("llama", dict(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, vocab_size=128256, rope_theta=500_000.0,
        tie_word_embeddings=True),
        "meta-llama/Llama-3.2-1B config.json (its llama3 RoPE scaling changes no count)",
        zoo="Llama 3.2 (1B)"),
    "Gemma 3 270M": PublishedConfig("gemma3_text", dict(
        hidden_size=640, intermediate_size=2048, num_hidden_layers=18, num_attention_heads=4,
        num_key_value_heads=1, head_dim=256, query_pre_attn_scalar=256, sliding_window=512,
        vocab_size=262144, rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}}),
        "google/gemma-3-270m config.json (window 512, 5 sliding : 1 global)",
        zoo="Gemma 3 (270M)"),
    "Qwen3-0.6B": PublishedConfig("qwen3", dict(
        hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, vocab_size=151936, rope_theta=1_000_000.0,
        tie_word_embeddings=True, use_sliding_window=False),
        "Qwen/Qwen3-0.6B config.json", zoo="Qwen3 (0.6B)"),
    "SmolLM2-135M": PublishedConfig("llama", dict(
        hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, head_dim=64, vocab_size=49152, rope_theta=100_000.0,
        tie_word_embeddings=True),
        "HuggingFaceTB/SmolLM2-135M config.json", zoo="SmolLM2 (135M)"),
    "MobileLLM-125M": PublishedConfig("llama", dict(
        hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, head_dim=64, vocab_size=32000, tie_word_embeddings=True),
        "facebook/MobileLLM-125M config.json (its own model class: a Llama block with shared "
        "input and output embeddings, read here as a Llama config) and Liu et al. 2024, Table 9",
        zoo="MobileLLM (125M)"),
    "SmolLM3 3B": PublishedConfig("smollm3", dict(
        hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
        num_key_value_heads=4, vocab_size=128256, rope_theta=5_000_000.0,
        no_rope_layer_interval=4, tie_word_embeddings=True),
        "HuggingFaceTB/SmolLM3-3B config.json (RoPE base 5,000,000; no RoPE in every 4th layer)",
        zoo="SmolLM3 (3B)"),
    "Qwen3-Next 80B-A3B": PublishedConfig("qwen3_next", dict(
        hidden_size=2048, intermediate_size=5120, moe_intermediate_size=512,
        shared_expert_intermediate_size=512, num_hidden_layers=48, num_attention_heads=16,
        num_key_value_heads=2, head_dim=256, num_experts=512, num_experts_per_tok=10,
        full_attention_interval=4, linear_num_key_heads=16, linear_num_value_heads=32,
        linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
        partial_rotary_factor=0.25, rope_theta=5_000_000.0, vocab_size=151936,
        tie_word_embeddings=False),
        "Qwen/Qwen3-Next-80B-A3B-Instruct config.json (RoPE base 5,000,000)",
        zoo="Qwen3-Next (80B-A3B)", max_context=262144),
}


def published_config(name: str):
    """The ``transformers`` configuration of the released model ``name`` (a key of
    :data:`PUBLISHED`), built from its published fields, no download."""
    import transformers

    if name not in PUBLISHED:
        raise ValueError(f"no published configuration named {name!r}; known: {sorted(PUBLISHED)}")
    entry = PUBLISHED[name]
    return transformers.AutoConfig.for_model(entry.model_type, **entry.fields)
