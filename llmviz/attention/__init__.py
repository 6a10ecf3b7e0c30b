"""Attention: the functional core, masks, the KV cache, the module, and what it costs.

* :mod:`.functional`: ``scaled_dot_product_attention`` (reference path returning weights, and
  torch's fused kernel), ``attention_weights``, ``repeat_kv``.
* :mod:`.masks`: boolean masks (True = may attend): causal, padding, sliding window, dilated,
  strided, global-local, and the receptive field of a stack.
* :mod:`.kv_cache`: :class:`KVCache`, one growing key/value store per layer; :class:`SinkCache`,
  sinks plus a rolling window (StreamingLLM).
* :mod:`.module`: :class:`MultiHeadAttention` (MHA, GQA and MQA through ``n_kv_heads``).
* :mod:`.tiled`: online softmax and tiled (flash-style) attention, written out.
* :mod:`.flash`: FlashAttention's backward pass (recomputed tiles), split-KV decoding and
  packed GQA query heads.
* :mod:`.cost`: bytes of the score matrix, arithmetic intensity, peak memory of a call.
* :mod:`.metrics`: per-head statistics of attention weights (entropy, previous-token...).
* :mod:`.linear`: linear attention and the (gated) delta rule, recurrent and chunked forms.
* :mod:`.deltanet`: :class:`GatedDeltaNet`, the delta rule as Qwen3-Next's token mixer.
* :mod:`.latent`: :class:`MultiHeadLatentAttention` (DeepSeek MLA, naive and absorbed) and its
  :class:`LatentCache`.

Shape letters: B batch, T query length, S key length, H heads, G kv heads, D head dim.
"""

from __future__ import annotations

from . import cost, deltanet, flash, functional, kv_cache, latent, linear, masks, metrics, module, tiled
from .cost import attention_intensity, peak_memory, score_matrix_bytes
from .deltanet import DeltaState, GatedDeltaNet
from .flash import (
    flash_attention,
    merge_partials,
    pack_gqa,
    packed_gqa_attention,
    split_kv_decode,
    unpack_gqa,
)
from .functional import attention_weights, repeat_kv, scaled_dot_product_attention
from .kv_cache import KVCache, SinkCache, rope_key_shift
from .latent import LatentCache, MultiHeadLatentAttention
from .linear import gated_delta_rule, linear_attention
from .masks import (
    causal_mask,
    combine_masks,
    dilated_mask,
    global_local_mask,
    key_padding_to_mask,
    padding_mask,
    query_positions,
    receptive_field,
    sliding_window_mask,
    strided_mask,
)
from .metrics import METRICS, head_metrics, mass_by_distance, row_entropy
from .module import MultiHeadAttention, gqa_from_mha
from .tiled import online_softmax, online_softmax_trace, tile_map, tiled_attention

__all__ = [
    "scaled_dot_product_attention", "attention_weights", "repeat_kv",
    "MultiHeadAttention", "gqa_from_mha", "KVCache", "SinkCache", "rope_key_shift",
    "MultiHeadLatentAttention", "LatentCache",
    "causal_mask", "padding_mask", "key_padding_to_mask", "sliding_window_mask", "dilated_mask",
    "strided_mask", "global_local_mask", "combine_masks", "receptive_field", "query_positions",
    "online_softmax", "online_softmax_trace", "tiled_attention", "tile_map",
    "flash_attention", "split_kv_decode", "merge_partials", "pack_gqa", "unpack_gqa",
    "packed_gqa_attention",
    "score_matrix_bytes", "attention_intensity", "peak_memory",
    "head_metrics", "METRICS", "row_entropy", "mass_by_distance",
    "gated_delta_rule", "linear_attention", "GatedDeltaNet", "DeltaState",
    "functional", "masks", "kv_cache", "module", "tiled", "flash", "cost", "metrics",
    "linear", "deltanet", "latent",
]
