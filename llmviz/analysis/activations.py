"""Activation memory of training: what the backward pass keeps, per layer, in 16-bit.

Korthikanti et al. (2022) count, for a GPT-style block with ``a`` heads, width ``C``, ``b``
sequences of ``s`` tokens, no recomputation and no model parallelism, ``sbC (34 + 5 a s / C)``
bytes per layer. The second term is the attention matrices: the scores, the softmax output and
its dropout mask and dropped probabilities, ``5 a s^2 b`` bytes, one ``s x s`` matrix per head for
each query against each key. Of the total, ``2 sbC`` are the dropout masks of the two sublayers
and ``3 a s^2 b`` the attention's dropout; without dropout the block keeps
``sbC (32 + 2 a s / C)``.

A layer whose queries see at most ``W`` keys (a sliding window, a chunk) needs the scores of
those keys only: its attention term is ``5 a s min(s, W) b`` (``2 a s min(s, W) b`` without
dropout), counted as if the kernel stored only the band of scores it computes. The keys a
layer keeps are read from its mask (:meth:`~llmviz.attention.mask_kinds.Mask.kept_keys`),
exactly as :func:`~llmviz.analysis.kv_cache_bytes_for` reads them for the KV cache.
"""

from __future__ import annotations

from typing import Any

from .._checks import check_flag, check_positive_int
from ..model.config import ModelConfig

__all__ = ["activation_bytes", "activation_bytes_by_layer"]


def activation_bytes_by_layer(config: ModelConfig, seq_len: int, *, batch: int = 1,
                              dropout: bool = True) -> list[int]:
    """Korthikanti et al.'s activation bytes of each layer of ``config`` for ``batch``
    sequences of ``seq_len`` tokens, each layer's attention term over the keys its mask keeps
    (``min(seq_len, window)`` for a windowed layer, ``seq_len`` for a global one)."""
    _check(config, seq_len, batch, dropout)
    per_token, per_score = (34, 5) if dropout else (32, 2)
    s, b, C, a = seq_len, batch, config.d_model, config.n_heads
    return [s * b * C * per_token + per_score * a * s * config.mask_for(i).kept_keys(s) * b
            for i in range(config.n_layers)]


def activation_bytes(config: ModelConfig, seq_len: int, *, batch: int = 1,
                     dropout: bool = True) -> int:
    """The sum of :func:`activation_bytes_by_layer` over the layers."""
    return sum(activation_bytes_by_layer(config, seq_len, batch=batch, dropout=dropout))


def _check(config: Any, seq_len: Any, batch: Any, dropout: Any) -> None:
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig (e.g. llmviz.model.presets.llama2('7b')), "
                        f"got {type(config).__name__}")
    check_positive_int(seq_len, "seq_len")
    check_positive_int(batch, "batch")
    check_flag(dropout, "dropout")
