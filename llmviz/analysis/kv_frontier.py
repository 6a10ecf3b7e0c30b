"""What one token costs in the cache, per attention design: the KV-cache frontier of chapter 17.

* :func:`layer_cache_elements`: numbers one token adds to one layer's cache for a
  :class:`~llmviz.model.ModelConfig` layer: ``2 G D`` keys and values for grouped attention
  (MHA: G = H, GQA: G < H, MQA: G = 1), ``r + dr`` for multi-head latent attention (the latent
  and the one shared RoPE key), 0 for a linear-attention layer (its state does not grow).
* :func:`design_cache_bytes`: the cache of a whole stack at a context length, for one of the
  designs ``"mha"``, ``"gqa"``, ``"mqa"``, ``"mla"``, ``"sliding"`` (GQA whose layers keep only a
  window) and ``"hybrid"`` (GQA with every ``hybrid_every``-th layer softmax, the rest linear), from
  a handful of sizes; what the chapter's explorer draws.
"""

from __future__ import annotations

from typing import Any

from .._checks import check_choice, check_positive, check_positive_int
from ..model.config import ModelConfig

__all__ = ["DESIGNS", "layer_cache_elements", "design_cache_bytes", "mla_decode_macs"]

#: The designs :func:`design_cache_bytes` knows.
DESIGNS = ("mha", "gqa", "mqa", "mla", "sliding", "hybrid")


def layer_cache_elements(config: Any, layer_idx: int) -> int:
    """Numbers one token adds to the cache of layer ``layer_idx`` of ``config`` (a ModelConfig)."""
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
    if isinstance(layer_idx, bool) or not isinstance(layer_idx, int) or not 0 <= layer_idx < config.n_layers:
        raise ValueError(f"layer_idx must be an int in [0, {config.n_layers}), got {layer_idx!r}")
    if config.mixer_for(layer_idx) == "linear":
        return 0
    if config.attn_kind == "mla":
        return int(config.kv_lora_rank + config.qk_rope_head_dim)
    return int(2 * config.n_kv_heads * config.head_dim)


def design_cache_bytes(
    design: str, context: int, *, n_layers: int, n_heads: int, head_dim: int,
    n_kv_heads: int = 8, latent_dim: int = 512, rope_dim: int = 64, window: int = 4096,
    hybrid_every: int = 4, batch: int = 1, bytes_per_el: float = 2,
) -> int:
    """Bytes of the cache of ``n_layers`` layers holding ``context`` tokens, for ``design``.

    ``"mha"``: 2 H D per token and layer; ``"gqa"``: 2 G D (``n_kv_heads`` = G); ``"mqa"``: 2 D;
    ``"mla"``: ``latent_dim + rope_dim``; ``"sliding"``: GQA keeping at most ``window`` tokens;
    ``"hybrid"``: GQA in one layer of every ``hybrid_every``, linear attention (no growing cache)
    in the others.
    """
    check_choice(design, "design", DESIGNS)
    for name, v in (("context", context), ("n_layers", n_layers), ("n_heads", n_heads),
                    ("head_dim", head_dim), ("n_kv_heads", n_kv_heads), ("latent_dim", latent_dim),
                    ("rope_dim", rope_dim), ("window", window), ("hybrid_every", hybrid_every),
                    ("batch", batch)):
        check_positive_int(v, name)
    check_positive(bytes_per_el, "bytes_per_el")
    if n_kv_heads > n_heads or n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads ({n_kv_heads}) must divide n_heads ({n_heads})")
    per_token = {"mha": 2 * n_heads * head_dim, "gqa": 2 * n_kv_heads * head_dim, "mqa": 2 * head_dim,
                 "mla": latent_dim + rope_dim, "sliding": 2 * n_kv_heads * head_dim,
                 "hybrid": 2 * n_kv_heads * head_dim}[design]
    kept = min(context, window) if design == "sliding" else context
    layers = -(-n_layers // hybrid_every) if design == "hybrid" else n_layers
    return int(per_token * kept * layers * batch * bytes_per_el)


def mla_decode_macs(cached: int, *, n_heads: int, latent_rank: int, nope_dim: int, rope_dim: int,
                    v_dim: int, absorbed: bool) -> int:
    """Multiply-adds of one multi-head latent attention decoding step over ``cached`` tokens
    (the new token included), per sequence and layer, leaving out the new token's own
    projections (queries, latent, output), which both forms share.

    Naive: every step rebuilds each head's keys and values from the ``cached`` latents
    (``cached * r * H * (dn + dv)``), then scores (``cached * H * (dn + dr)``) and mixes values
    (``cached * H * dv``). Absorbed: the query is carried into latent space once
    (``H * dn * r``), scores and mixing run on the latents (``cached * H * (r + dr)`` and
    ``cached * H * r``), and each head's result leaves latent space once (``H * r * dv``).
    With ``H, r, dn, dr, dv`` = ``n_heads, latent_rank, nope_dim, rope_dim, v_dim``.

    Raises:
        TypeError / ValueError: a size that is not a positive int, or ``absorbed`` not a bool.
    """
    check_positive_int(cached, "cached")
    for name, v in (("n_heads", n_heads), ("latent_rank", latent_rank), ("nope_dim", nope_dim),
                    ("rope_dim", rope_dim), ("v_dim", v_dim)):
        check_positive_int(v, name)
    if not isinstance(absorbed, bool):
        raise TypeError(f"absorbed must be True or False, got {absorbed!r}")
    S, H, r, dn, dr, dv = cached, n_heads, latent_rank, nope_dim, rope_dim, v_dim
    if absorbed:
        return H * dn * r + S * H * (r + dr) + S * H * r + H * r * dv
    return S * r * H * (dn + dv) + S * H * (dn + dr) + S * H * dv
