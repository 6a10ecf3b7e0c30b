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

Supported families (:data:`SUPPORTED`, one reader each; the list below is generated from it):
{supported}. Refused by name, each with its reason (:data:`REFUSED`): every other causal-LM
``model_type`` transformers ships ({n_refused} of them).
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

__doc__ = (__doc__ or "").replace("{supported}", ", ".join(sorted(SUPPORTED))).replace(
    "{n_refused}", str(len(REFUSED)))

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
