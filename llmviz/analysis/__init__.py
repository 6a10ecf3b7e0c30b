"""Analysis of a model or config: parameters, FLOPs, KV-cache bytes, depth profiles, sweeps.

* :mod:`.parameters`: parameter counts by component, FLOPs per token, KV-cache bytes.
* :mod:`.activations`: :func:`activation_bytes`, training activation memory, window-aware.
* :mod:`.sizing`: :func:`match_width`, width matching for depth-vs-width comparisons.
* :mod:`.memorisation`: :func:`longest_verbatim_match`, the verbatim-match check.
* :mod:`.kv_frontier`: cache numbers per token and layer for every attention design (MHA, GQA,
  MQA, latent, sliding, linear hybrids).
* :mod:`.profiles`: per-layer gradient norm and residual-stream RMS (:func:`depth_profiles`).
* :mod:`.profiles`: also :func:`stability_stats` (attention entropy, log Z, logits, loss).
* :mod:`.sweeps`: a learning-rate x warm-up sweep as a grid of final losses
  (:func:`divergence_grid`), a loss curve's :func:`worst_spike`, the :func:`unigram_loss`
  plateau.
"""

from __future__ import annotations

from . import activations, kv_frontier, memorisation, parameters, profiles, sizing, sweeps
from .activations import activation_bytes, activation_bytes_by_layer
from .kv_frontier import DESIGNS, design_cache_bytes, layer_cache_elements
from .parameters import (
    count_parameters,
    flops_per_token,
    gpt2_layer_params,
    kv_cache_bytes,
    kv_cache_bytes_for,
    layer_params,
)
from .memorisation import longest_verbatim_match
from .sizing import match_width
from .profiles import depth_profiles, stability_stats
from .sweeps import divergence_grid, unigram_loss, worst_spike

__all__ = [
    "activation_bytes", "activation_bytes_by_layer", "activations",
    "DESIGNS", "design_cache_bytes", "kv_frontier", "layer_cache_elements",
    "count_parameters", "flops_per_token", "gpt2_layer_params", "kv_cache_bytes",
    "kv_cache_bytes_for", "layer_params", "longest_verbatim_match", "match_width", "parameters",
    "memorisation", "sizing",
    "depth_profiles", "divergence_grid", "profiles", "sweeps", "worst_spike", "unigram_loss",
    "stability_stats",
]
