"""Counting a model: parameters (closed form and ``numel``), FLOPs per token, KV-cache bytes.

Closed forms, for a config with width C, H query heads and G key/value heads of size D,
feed-forward width F, vocabulary V and L layers:

* attention: ``C*H*D + 2*C*G*D + H*D*C`` weights (+ ``H*D + 2*G*D + C`` biases);
* feed-forward: ``2*C*F`` (MLP) or ``3*C*F`` (GLU) weights (+ ``F + C`` or ``2F + C`` biases);
* norms: ``2C`` each for LayerNorm, ``C`` for RMSNorm and bias-free LayerNorm.

Each closed form is declared by the registry entry that builds the module (see
:mod:`llmviz._registry`); the property test in ``tests/model/test_kinds.py`` builds every kind.

A GPT-2 layer (H*D = C, F = 4C, biases, two LayerNorms) therefore has
``4C^2 + 4C + 8C^2 + 5C + 4C = 12 C^2 + 13 C`` parameters (:func:`gpt2_layer_params`).

FLOPs: a matrix-vector product with an ``m x n`` matrix costs ``2mn`` FLOPs, so a forward pass
costs about ``2N`` per token for N weights touched (Kaplan et al. 2020), plus attention's
``QK^T`` and ``weights @ V`` at ``4 * L * S * H * D`` per token for S keys. The backward pass
costs about twice the forward, hence "training ~ 6N per token".

KV cache: every layer stores K and V for every token: ``2 * L * G * D * T * B * bytes``.

Shape letters: B batch, T tokens, S keys, H heads, G kv heads, D head dim, C model dim.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .._checks import check_flag, check_positive, check_positive_int
from ..ffn import FFNS
from ..model.config import ModelConfig
from ..model.kinds import ATTENTIONS
from ..norm import norm_params
from ..position import POSITION_SCHEMES
from .kv_frontier import layer_cache_elements

__all__ = [
    "count_parameters",
    "gpt2_layer_params",
    "layer_params",
    "flops_per_token",
    "kv_cache_bytes",
    "kv_cache_bytes_for",
]


def __getattr__(name: str):
    """Names that moved to their own modules stay importable from here."""
    moved = {"match_width": "sizing", "longest_verbatim_match": "memorisation"}
    if name in moved:
        import importlib

        return getattr(importlib.import_module(f"{__package__}.{moved[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

_COMPONENTS = ("embedding", "position", "attention", "ffn", "norms", "lm_head")


def gpt2_layer_params(d: int) -> int:
    """Parameters of one GPT-2 block of width ``d``: ``12 d^2 + 13 d``."""
    return 12 * check_positive_int(d, "d") ** 2 + 13 * d


def _check_config(config: Any) -> None:
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")


def layer_params(config: ModelConfig) -> dict[str, int]:
    """Closed-form parameter count of one block of ``config``, by component.

    Every term comes from the registry that builds the module (attention kinds
    :data:`llmviz.model.kinds.ATTENTIONS`, :data:`llmviz.ffn.FFNS`, :data:`llmviz.norm.NORMS`),
    so a new kind brings its count with it.
    """
    _check_config(config)
    c = config
    attn = ATTENTIONS.kind(c.attn_kind).params(c)
    ffn = FFNS.kind(c.ffn).params(c.d_model, c.d_ff, bias=c.bias)
    n_norms = (1 if c.parallel else 2) + (2 if c.placement == "sandwich" else 0)
    norms = n_norms * norm_params(c.norm, c.d_model)
    return {"attention": attn, "ffn": ffn, "norms": norms, "total": attn + ffn + norms}


def _closed_form_covers(c: ModelConfig) -> bool:
    """Whether :func:`layer_params` describes every block of ``c``; if not, count a meta model."""
    return c.n_experts is None and not c.linear_layers


def _from_config(c: ModelConfig) -> dict[str, Any]:
    per = layer_params(c)
    by = {
        "embedding": c.vocab_size * c.d_model,
        "position": POSITION_SCHEMES.kind(c.position).params(c),
        "attention": per["attention"] * c.n_layers,
        "ffn": per["ffn"] * c.n_layers,
        "norms": per["norms"] * c.n_layers
        + norm_params(c.norm, c.d_model) * (int(c.embed_norm) + int(c.has_final_norm)),
        "lm_head": 0 if c.tie_embeddings else c.vocab_size * c.d_model,
    }
    return {"per_layer": [per["total"]] * c.n_layers, "by_component": by}


def _component_of(name: str) -> str:
    if name.startswith("embed_tokens"):
        return "embedding"
    if name.startswith(("embed_positions", "position_bias")):
        return "position"
    if name.startswith("lm_head"):
        return "lm_head"
    if ".self_attn." in name:
        return "attention"  # projections, and q_norm / k_norm
    if ".mlp." in name:
        return "ffn"
    return "norms"


def _from_model(model: nn.Module) -> dict[str, Any]:
    by = dict.fromkeys(_COMPONENTS, 0)
    seen: set[int] = set()
    for name, p in model.named_parameters():  # tied weights appear once
        if id(p) in seen:
            continue
        seen.add(id(p))
        by[_component_of(name)] += p.numel()
    layers = getattr(model, "layers", [])
    per_layer = [sum(p.numel() for p in layer.parameters()) for layer in layers]
    return {"per_layer": per_layer, "by_component": by}


def count_parameters(model_or_config: nn.Module | ModelConfig) -> dict[str, Any]:
    """Parameters of a model (by ``numel``) or of a config (closed form, nothing allocated).

    Returns:
        ``{"total", "embeddings" (token + position tables), "non_embedding", "per_layer"
        (list, one entry per block), "by_component" ({embedding, position, attention, ffn,
        norms, lm_head})}``. Tied embedding/lm_head weights count once (under ``embedding``).
    """
    if isinstance(model_or_config, ModelConfig) and _closed_form_covers(model_or_config):
        out = _from_config(model_or_config)
    elif isinstance(model_or_config, ModelConfig):  # experts, latent attention, linear layers...
        from ..model.lm import DecoderLM  # the model package is not imported at module load

        with torch.device("meta"):  # shapes only: nothing allocated
            out = _from_model(DecoderLM(model_or_config))
    elif isinstance(model_or_config, nn.Module):
        out = _from_model(model_or_config)
    else:
        raise TypeError(
            f"count_parameters takes an nn.Module or a ModelConfig, got {type(model_or_config).__name__}"
        )
    by = out["by_component"]
    total = sum(by.values())
    emb = by["embedding"] + by["position"]
    return {"total": total, "embeddings": emb, "non_embedding": total - emb, **out}


def flops_per_token(
    config: ModelConfig, *, training: bool = True, seq_len: int | None = None, causal: bool = True
) -> float:
    """Approximate FLOPs to process one token (forward, or forward + backward).

    Forward: ``2 * (non-embedding weights + lm_head matmul)`` plus attention's
    ``4 * L * S * H * D``, where S is the number of keys each token sees: ``seq_len``
    (default ``config.max_seq_len``), averaged to ``(seq_len + 1) / 2`` (times the window
    limit) for causal attention. Training multiplies by 3 (backward ~ 2x forward).
    Norms, softmax and activations are ignored (they are O(C), not O(C^2)).
    """
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
    training, causal = check_flag(training, "training"), check_flag(causal, "causal")
    T = config.max_seq_len if seq_len is None else check_positive_int(seq_len, "seq_len")
    per = layer_params(config)
    matmul_weights = config.n_layers * (per["attention"] + per["ffn"]) + config.vocab_size * config.d_model
    attn = 0.0
    for i in range(config.n_layers):
        keys = config.mask_for(i).mean_keys(T) if causal else T  # sliding, chunked: capped
        attn += 4 * keys * config.n_heads * config.head_dim
    forward = 2 * matmul_weights + attn
    return 3 * forward if training else forward


def kv_cache_bytes(
    *,
    n_layers: int,
    n_kv_heads: int,
    head_dim: int,
    seq_len: int,
    batch: int = 1,
    bytes_per_el: int = 2,
) -> int:
    """Bytes of a KV cache: ``2 (K and V) * L * G * D * T * B * bytes_per_el``.

    Multi-head attention has G = H; GQA divides the cache by H / G; MQA (G = 1) by H.
    ``bytes_per_el=2`` is fp16/bf16.
    """
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim),
                        ("seq_len", seq_len), ("batch", batch)):
        check_positive_int(value, name)
    check_positive(bytes_per_el, "bytes_per_el")  # may be fractional (0.5 for 4-bit)
    return int(2 * n_layers * n_kv_heads * head_dim * seq_len * batch * bytes_per_el)


def kv_cache_bytes_for(config: ModelConfig, seq_len: int, *, batch: int = 1, bytes_per_el: int = 2) -> int:
    """:func:`kv_cache_bytes` for a config: sliding-window layers keep at most the window, latent
    attention layers cache ``r + dr`` numbers per token, linear-attention layers nothing that grows
    (:func:`~llmviz.analysis.kv_frontier.layer_cache_elements`)."""
    _check_config(config), check_positive_int(seq_len, "seq_len")
    check_positive_int(batch, "batch"), check_positive_int(bytes_per_el, "bytes_per_el")
    total = 0
    for i in range(config.n_layers):
        kept = config.mask_for(i).kept_keys(seq_len)  # a window or chunk caps the cache
        total += layer_cache_elements(config, i) * kept * batch * bytes_per_el
    return int(total)
