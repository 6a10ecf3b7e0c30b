"""The Hugging Face bridge: load ``transformers`` 5.x checkpoints exactly, read a model's anatomy
from its config, and capture attention maps. Needs ``transformers`` (``pip install llmviz[hf]``).

>>> import transformers, torch, llmviz.hf as lh
>>> hc = transformers.Qwen3Config(vocab_size=100, hidden_size=64, intermediate_size=96,
...     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16)
>>> hf = transformers.Qwen3ForCausalLM(hc).eval()
>>> model = lh.from_hf(hf)                       # strict: every tensor used, every feature kept
>>> ids = torch.tensor([[1, 5, 7, 2]])
>>> bool((model(ids).logits - hf(ids).logits).abs().max() < 1e-5)
True
>>> maps = lh.capture_attention(hf, ids)         # per layer (B, H, T, S), GQA groups attached
>>> maps.groups
((0, 1), (2, 3))
>>> lh.anatomy(transformers.LlamaConfig()).total_params   # Llama 2 7B, from the config alone
6738415616

Supported families (:data:`SUPPORTED`): llama, mistral, qwen2, qwen3, gemma, gemma2,
gemma3_text, olmo2, phi3, gpt2, smollm3 (NoPE layers), and the 2025 ones: mixtral, qwen2_moe,
qwen3_moe (mixtures of experts, Qwen2-MoE's sigmoid-gated shared expert), deepseek_v3 (latent
attention, sigmoid routing with a choice bias and expert groups, shared experts; its
multi-token-prediction layers skipped), gpt_oss (learned sinks, alternating sliding and full
layers, YaRN, biased experts with its clamped GLU), qwen3_next (Gated DeltaNet layers, gated
attention, partial rotary, gated shared expert), qwen3_5_text and qwen3_5_moe_text (Qwen3.5's
text models, the same stack with its projections stored apart; their multimodal RoPE is plain
rotary on text) and olmo3 (OLMo 2's block with sliding and full layers, RoPE per layer type).
Refused by name (:data:`REFUSED`): deepseek_v2 (its router ranks expert groups differently), and
gemma3, qwen3_5 and qwen3_5_moe (vision-language wrappers: load their text models).
Single layers of some of them map onto llmviz modules already (:mod:`.layers`).
"""

from __future__ import annotations

from .anatomy import Anatomy, LayerAnatomy, anatomy
from .capture import AttentionMaps, capture_attention, kv_groups
from .config import REFUSED, SUPPORTED, config_from_hf
from .layers import gated_deltanet_from_hf
from .load import (
    from_hf,
)
from .tolerance import match_tolerance

__all__ = [
    "REFUSED",
    "SUPPORTED",
    "Anatomy",
    "AttentionMaps",
    "LayerAnatomy",
    "anatomy",
    "capture_attention",
    "config_from_hf",
    "gated_deltanet_from_hf",
    "from_hf",
    "kv_groups",
    "match_tolerance",
]
