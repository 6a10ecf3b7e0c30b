"""llmviz: the anatomy of a large language model, implemented, checked and drawn.

Where things live (one home per concept, laid out like the book):

* :mod:`llmviz.attention`: functional attention (and learned sinks), masks, KV caches (and the
  StreamingLLM sink cache), the module, tiling, cost, per-head metrics, latent attention (MLA),
  linear attention and Gated DeltaNet.
* :mod:`llmviz.moe`: mixture of experts: router, sorted dispatch, capacity, balancing losses.
* :mod:`llmviz.position`: sinusoidal, learned, relative (Shaw, Transformer-XL, T5), RoPE and
  its scalings, ALiBi, and their properties.
* :mod:`llmviz.norm`: LayerNorm/RMSNorm (model norms) and Batch/Group/Instance (sequence norms).
* :mod:`llmviz.ffn`: activations, the MLP and the GLU family.
* :mod:`llmviz.model`: config, block, decoder LM, generation and sampling, presets, zoo.
* :mod:`llmviz.analysis`: parameters, FLOPs and KV-cache bytes without running a model.
* :mod:`llmviz.training`: data, synthetic tasks, batch sources, losses, the training loop,
  evaluation, and the timing helper (:mod:`llmviz.training.bench`).
* :mod:`llmviz.evidence`: runs over seeds, intervals, paired differences, computed verdicts.
* :mod:`llmviz.runtime`: device, size setting, thread policy, notebook set-up.
* :mod:`llmviz.plots`, :mod:`llmviz.explore`: drawing only (imported on first use).
* :mod:`llmviz.hf`: the Hugging Face bridge (imported on first use; needs ``transformers``).

Shape letters used throughout: B batch, T query length, S key length, H heads, G kv heads,
D head dim, C model dim. Boolean masks mean True = may attend.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: The oldest torch this package runs on: ``F.scaled_dot_product_attention(enable_gqa=...)``
#: arrived in torch 2.5.
MIN_TORCH = (2, 5)


def _check_torch() -> None:
    import torch

    have = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if have < MIN_TORCH:
        need = ".".join(map(str, MIN_TORCH))
        raise ImportError(
            f"llmviz needs torch >= {need}, found {torch.__version__}; "
            f"upgrade it (CPU: pip install 'torch>={need}')"
        )


_check_torch()

from . import analysis, attention, evidence, ffn, model, moe, norm, position, runtime, training  # noqa: E402
from .analysis import count_parameters, flops_per_token, kv_cache_bytes  # noqa: E402
from .attention import (  # noqa: E402
    KVCache,
    MultiHeadAttention,
    causal_mask,
    head_metrics,
    padding_mask,
    repeat_kv,
    scaled_dot_product_attention,
    sliding_window_mask,
)
from .evidence import Claim, Estimate, glue_number, paired, paired_ratio, run_seeds, summarize  # noqa: E402
from .ffn import MLP, GatedMLP, glu_hidden_size  # noqa: E402
from .model import DecoderLM, LMOutput, ModelConfig, generate, sample  # noqa: E402
from .norm import LayerNorm, RMSNorm, layer_norm, rms_norm  # noqa: E402
from .position import (  # noqa: E402
    RopeScaling,
    RotaryEmbedding,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    sinusoidal_encoding,
)
from .runtime import device, pick, run_size, setup_notebook, show_source, threads  # noqa: E402
from .training import ByteTokenizer, TrainConfig, load_corpus, train  # noqa: E402

_LAZY = ("plots", "explore", "hf")

__all__ = [
    "__version__",
    # runtime
    "device", "run_size", "pick", "threads", "show_source", "setup_notebook",
    # attention
    "scaled_dot_product_attention", "repeat_kv", "MultiHeadAttention", "KVCache",
    "causal_mask", "padding_mask", "sliding_window_mask", "head_metrics",
    # position
    "sinusoidal_encoding", "apply_rope", "RotaryEmbedding", "RopeScaling",
    "alibi_slopes", "alibi_bias",
    # normalisation and feed-forward
    "layer_norm", "rms_norm", "LayerNorm", "RMSNorm", "MLP", "GatedMLP", "glu_hidden_size",
    # models
    "ModelConfig", "DecoderLM", "LMOutput", "generate", "sample",
    # analysis, data, training
    "count_parameters", "flops_per_token", "kv_cache_bytes",
    "ByteTokenizer", "load_corpus", "TrainConfig", "train",
    # evidence
    "run_seeds", "summarize", "paired", "paired_ratio", "Estimate", "Claim", "glue_number",
    # subpackages
    "analysis", "attention", "evidence", "ffn", "model", "moe", "norm", "position", "runtime", "training",
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'llmviz' has no attribute {name!r}")
