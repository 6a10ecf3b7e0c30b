"""Analysis of a model or config without running it: parameters, FLOPs, KV-cache bytes.

* :mod:`.parameters`: parameter counts by component, FLOPs per token, KV-cache bytes,
  width matching for depth-vs-width comparisons, and the verbatim-match check used to test
  memorisation.
"""

from __future__ import annotations

from . import parameters
from .parameters import (
    count_parameters,
    flops_per_token,
    gpt2_layer_params,
    kv_cache_bytes,
    kv_cache_bytes_for,
    layer_params,
    longest_verbatim_match,
    match_width,
)

__all__ = [
    "count_parameters", "flops_per_token", "gpt2_layer_params", "kv_cache_bytes",
    "kv_cache_bytes_for", "layer_params", "longest_verbatim_match", "match_width", "parameters",
]
