"""Analysis of a model or config: parameters, FLOPs, KV-cache bytes, depth profiles, sweeps.

* :mod:`.parameters`: parameter counts by component, FLOPs per token, KV-cache bytes,
  width matching for depth-vs-width comparisons, and the verbatim-match check used to test
  memorisation.
* :mod:`.profiles`: per-layer gradient norm and residual-stream RMS (:func:`depth_profiles`).
* :mod:`.sweeps`: a learning-rate x warm-up sweep as a grid of final losses
  (:func:`divergence_grid`).
"""

from __future__ import annotations

from . import parameters, profiles, sweeps
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
from .profiles import depth_profiles
from .sweeps import divergence_grid

__all__ = [
    "count_parameters", "flops_per_token", "gpt2_layer_params", "kv_cache_bytes",
    "kv_cache_bytes_for", "layer_params", "longest_verbatim_match", "match_width", "parameters",
    "depth_profiles", "divergence_grid", "profiles", "sweeps",
]
