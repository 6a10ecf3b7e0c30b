"""llmviz: the anatomy of a large language model, implemented, checked and drawn.

Shape letters used throughout: B batch, T query length, S key length, H heads, G kv heads,
D head dim, C model dim. Boolean masks mean True = may attend.

The most used names are re-exported here (``lv.MultiHeadAttention``, ``lv.apply_rope``,
``lv.DecoderLM``...); everything else lives in its module (``llmviz.masks``,
``llmviz.position.rope``...). ``llmviz.plots``, ``llmviz.explore`` and ``llmviz.hf`` are
imported on first use: the maths needs only torch.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

from . import (
    analysis,
    attention,
    config,
    data,
    ffn,
    kv_cache,
    masks,
    models,
    norms,
    position,
    presets,
    sampling,
    train,
    zoo,
)
from ._utils import device, pick, scale, show_source
from .analysis import count_parameters, flops_per_token, head_metrics, kv_cache_bytes
from .attention import MultiHeadAttention, repeat_kv, scaled_dot_product_attention
from .config import ModelConfig
from .data import ByteTokenizer, load_corpus
from .ffn import MLP, GatedMLP, glu_hidden_size
from .kv_cache import KVCache
from .masks import causal_mask, padding_mask, sliding_window_mask
from .models import DecoderLM, LMOutput, generate
from .norms import LayerNorm, RMSNorm, layer_norm, rms_norm
from .notebook import setup_notebook
from .position import (
    RopeScaling,
    RotaryEmbedding,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    sinusoidal_encoding,
)
from .sampling import sample
from .train import TrainConfig, train as train_model

_LAZY = ("plots", "explore", "hf")

__all__ = [
    "__version__",
    # utilities
    "device", "scale", "pick", "show_source", "setup_notebook",
    # attention
    "scaled_dot_product_attention", "repeat_kv", "MultiHeadAttention", "KVCache",
    "causal_mask", "padding_mask", "sliding_window_mask",
    # position
    "sinusoidal_encoding", "apply_rope", "RotaryEmbedding", "RopeScaling",
    "alibi_slopes", "alibi_bias",
    # normalisation and feed-forward
    "layer_norm", "rms_norm", "LayerNorm", "RMSNorm", "MLP", "GatedMLP", "glu_hidden_size",
    # models
    "ModelConfig", "DecoderLM", "LMOutput", "generate", "sample",
    # analysis, data, training
    "count_parameters", "flops_per_token", "kv_cache_bytes", "head_metrics",
    "ByteTokenizer", "load_corpus", "TrainConfig", "train_model",
    # modules
    "analysis", "attention", "config", "data", "ffn", "kv_cache", "masks", "models", "norms",
    "position", "presets", "sampling", "train", "zoo", *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'llmviz' has no attribute {name!r}")
