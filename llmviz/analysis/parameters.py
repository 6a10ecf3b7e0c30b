"""Counting a model: parameters (closed form and ``numel``), FLOPs per token, KV-cache bytes.

Closed forms, for a config with width C, H query heads and G key/value heads of size D,
feed-forward width F, vocabulary V and L layers:

* attention: ``C*H*D + 2*C*G*D + H*D*C`` weights (+ ``H*D + 2*G*D + C`` biases);
* feed-forward: ``2*C*F`` (MLP) or ``3*C*F`` (GLU) weights (+ ``F + C`` or ``2F + C`` biases);
* norms: ``2C`` each for LayerNorm, ``C`` for RMSNorm and bias-free LayerNorm.

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

import math
from typing import Any

import torch
from torch import nn

from .._checks import check_positive, check_positive_int
from ..model.config import ModelConfig
from .kv_frontier import layer_cache_elements

__all__ = [
    "count_parameters",
    "gpt2_layer_params",
    "layer_params",
    "flops_per_token",
    "kv_cache_bytes",
    "kv_cache_bytes_for",
    "match_width",
    "longest_verbatim_match",
]

_COMPONENTS = ("embedding", "position", "attention", "ffn", "norms", "lm_head")


def gpt2_layer_params(d: int) -> int:
    """Parameters of one GPT-2 block of width ``d``: ``12 d^2 + 13 d``."""
    return 12 * check_positive_int(d, "d") ** 2 + 13 * d


def _norm_params(kind: str, d: int) -> int:
    return 2 * d if kind == "layer" else d


def _check_config(config: Any) -> None:
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")


def layer_params(config: ModelConfig) -> dict[str, int]:
    """Closed-form parameter count of one block of ``config``, by component."""
    _check_config(config)
    c = config
    C, H, G, D, F = c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff
    attn = C * H * D + 2 * C * G * D + H * D * C
    if c.attn_bias:
        attn += H * D + 2 * G * D + C
    if c.qk_norm in ("rms", "rms_gemma", "layer_nobias"):  # one weight per feature
        attn += 2 * D
    elif c.qk_norm == "layer":
        attn += 4 * D
    if c.ffn == "mlp":
        ffn = 2 * C * F + (F + C if c.bias else 0)
    else:
        ffn = 3 * C * F + (2 * F + C if c.bias else 0)
    n_norms = (1 if c.parallel else 2) + (2 if c.placement == "sandwich" else 0)
    norms = n_norms * _norm_params(c.norm, C)
    return {"attention": attn, "ffn": ffn, "norms": norms, "total": attn + ffn + norms}


def _t5_params(c: ModelConfig) -> int:
    """T5's bias tables: buckets x heads, once for the stack or once per softmax layer."""
    if c.position != "t5":
        return 0
    tables = sum(c.mixer_for(i) == "attention" for i in range(c.n_layers)) if c.t5_bias.per_layer else 1
    return tables * c.t5_bias.num_buckets * c.n_heads


def _closed_form_covers(c: ModelConfig) -> bool:
    """Whether :func:`layer_params` describes every block of ``c``; if not, count a meta model."""
    return (c.n_experts is None and c.attn_kind == "standard" and not c.linear_layers
            and not c.attn_sinks and not c.attn_output_gate)


def _from_config(c: ModelConfig) -> dict[str, Any]:
    per = layer_params(c)
    by = {
        "embedding": c.vocab_size * c.d_model,
        "position": c.max_seq_len * c.d_model if c.position == "learned" else _t5_params(c),
        "attention": per["attention"] * c.n_layers,
        "ffn": per["ffn"] * c.n_layers,
        "norms": per["norms"] * c.n_layers
        + _norm_params(c.norm, c.d_model) * (int(c.embed_norm) + int(c.has_final_norm)),
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
    T = config.max_seq_len if seq_len is None else check_positive_int(seq_len, "seq_len")
    per = layer_params(config)
    matmul_weights = config.n_layers * (per["attention"] + per["ffn"]) + config.vocab_size * config.d_model
    attn = 0.0
    for i in range(config.n_layers):
        window = config.window_for(i)
        if causal:
            keys = sum(min(t + 1, window or t + 1) for t in range(T)) / T if window else (T + 1) / 2
        else:
            keys = T
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
        window = config.window_for(i)
        kept = seq_len if window is None else min(seq_len, window)
        total += layer_cache_elements(config, i) * kept * batch * bytes_per_el
    return int(total)


_COUNTS = ("blocks", "non_embedding", "total")


def _counted(config: ModelConfig, count: str) -> int:
    """The parameters :func:`match_width` matches: blocks only, non-embedding, or all."""
    if count == "blocks":
        return sum(layer_params(config)["total"] for _ in range(config.n_layers))
    return count_parameters(config)[count]


def match_width(
    config: ModelConfig,
    n_layers: int,
    target: int,
    *,
    step: int | None = None,
    count: str = "blocks",
    min_head_dim: int | None = None,
    fit_ffn: bool = False,
) -> ModelConfig:
    """``config`` reshaped to ``n_layers`` blocks with the width whose parameter count is
    closest to ``target``, for depth-vs-width comparisons at matched size.

    Args:
        config: the model family (norm, position, feed-forward kind, vocabulary, ...).
        n_layers: the depth L of the result.
        target: the parameter count to match.
        step: widths are searched in multiples of this. Default: ``2 * n_heads`` (every head
            even-sized, as RoPE needs), or ``head_dim * n_heads / n_kv_heads`` with ``head_dim``.
        count: what is matched: ``"blocks"`` (all blocks, without embeddings, head and final
            norm), ``"non_embedding"`` (Kaplan et al.'s N: everything but the token and position
            tables, so an untied output head counts) or ``"total"`` (every parameter).
        min_head_dim: keep every head at least this wide: each width gets as many heads as
            fit with an even head size of at least ``min_head_dim`` that divides the width
            (whole groups of ``config``'s query-per-kv grouping). Without it the head count
            stays as in ``config`` and the heads narrow with the width.
        fit_ffn: after choosing the width, set the feed-forward width ``d_ff`` to the integer
            that brings the count closest to ``target`` (widths on a coarse grid otherwise
            miss it by up to half a step); the feed-forward ratio then departs a little from
            the family's.

    Raises:
        TypeError: ``config`` not a ModelConfig.
        ValueError: a non-positive ``n_layers``, ``target``, ``step`` or ``min_head_dim``, or
            an unknown ``count``.
    """
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
    check_positive_int(n_layers, "n_layers")
    check_positive(target, "target")
    if count not in _COUNTS:
        raise ValueError(f"count={count!r} is not supported; choose one of {_COUNTS}")
    group = config.n_heads // config.n_kv_heads
    if min_head_dim is not None:
        check_positive_int(min_head_dim, "min_head_dim")
    step = check_positive_int(step, "step") if step is not None else (
        2 * config.n_heads if min_head_dim is None else 2)

    def heads_for(width: int) -> int | None:
        """Most heads (a multiple of the grouping) with an even size >= min_head_dim."""
        assert min_head_dim is not None
        for heads in range(width // min_head_dim, 0, -1):
            if heads % group == 0 and width % heads == 0 and (width // heads) % 2 == 0:
                return heads
        return None

    def shaped(width: int, d_ff: int | None = None) -> ModelConfig | None:
        changes: dict[str, Any] = {"n_layers": n_layers, "d_model": width}
        if min_head_dim is not None:
            heads = heads_for(width)
            if heads is None:
                return None
            changes.update(n_heads=heads, n_kv_heads=heads // group, head_dim=width // heads)
        if d_ff is not None:
            changes["d_ff"] = d_ff
        return config.replace(**changes)

    best, best_err = None, None
    width = step
    while True:
        cand = shaped(width)
        if cand is None:  # no head layout fits this width
            width += step
            continue
        n = _counted(cand, count)
        err = abs(n - target)
        if best_err is not None and err > best_err and n > target:
            break
        if best_err is None or err < best_err:
            best, best_err = cand, err
        width += step
    assert best is not None  # the loop stops only after a candidate was seen
    if not fit_ffn:
        return best
    # the count is affine in d_ff: solve for it, then take the better neighbour
    one, two = shaped(best.d_model, 1), shaped(best.d_model, 2)
    assert one is not None and two is not None
    slope = _counted(two, count) - _counted(one, count)
    ideal = 1 + (target - _counted(one, count)) / slope
    fits = [shaped(best.d_model, f) for f in sorted({max(1, math.floor(ideal)), max(1, math.ceil(ideal))})]
    return min((c for c in fits if c is not None), key=lambda c: abs(_counted(c, count) - target))


def longest_verbatim_match(text: str, corpus: str, *, min_len: int = 1) -> tuple[int, str]:
    """The longest substring of ``text`` that occurs verbatim in ``corpus``: ``(length, substring)``.

    A memorisation check for generated samples: compare the lengths for samples with those for
    held-out text of the same length (chance overlap of ordinary language), see Carlini et al.
    2021. Greedy scan: for each start it only tries to beat the best length so far, so the cost
    is about ``len(text)`` substring searches of ``corpus``.
    """
    if not isinstance(text, str) or not isinstance(corpus, str):
        raise TypeError("text and corpus must both be str")
    best, where = 0, 0
    for i in range(len(text)):
        j = i + best + 1
        while j <= len(text) and text[i:j] in corpus:
            best, where = j - i, i
            j += 1
    if best < min_len:
        return 0, ""
    return best, text[where : where + best]
