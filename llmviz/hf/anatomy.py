"""A model's anatomy from its config alone: sizes, layer by layer, parameters, cache and compute.

>>> from transformers import DeepseekV3Config                           # doctest: +SKIP
>>> a = anatomy(DeepseekV3Config())   # the class defaults are DeepSeek-V3 itself  # doctest: +SKIP
>>> round(a.total_params / 1e9), round(a.active_params / 1e9)          # doctest: +SKIP
(671, 37)
>>> a.to_frame()                      # one row per fact; a.layers_frame(): one row per layer  # doctest: +SKIP

The block diagram is :func:`llmviz.plots.anatomy.plot_anatomy` (plots depend on this module,
never the reverse).

Works offline: it reads a transformers config object, a plain dict (a parsed ``config.json``,
with its ``model_type``) or the path of a ``config.json`` (or of the folder holding one).
Parameter counts are exact (tested against the models transformers builds); the KV cache counts
keys and values (or MLA's latent) per token; FLOPs count the multiply-adds of the matmuls.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from .._checks import check_positive_int
from ._counts import LayerAnatomy, read_architecture
from .config import REFUSED, SUPPORTED

__all__ = ["Anatomy", "LayerAnatomy", "anatomy"]


@dataclass(frozen=True)
class Anatomy:
    """What a config says about a decoder-only model (see :func:`anatomy`).

    Attributes:
        model_type: the transformers family name.
        n_layers, d_model, n_heads, n_kv_heads, head_dim: L, C, H, G, D (for latent attention
            the query/key head width; values may differ).
        vocab_size, tie_embeddings: V, and whether the output matrix is the embedding.
        norm, placement, qk_norm: norm kind, where it sits, QK-norm (None, ``"per head"``,
            ``"whole projection"``; ``", after RoPE"`` added where it acts on the rotated heads).
        ffn, activation, d_ff: feed-forward kind, activation, width of a dense feed-forward
            (None when every layer is a mixture of experts: Qwen3.5-MoE).
        experts, experts_active, shared_experts, expert_d_ff: routed experts, chosen per token,
            always-on experts, width of one expert (None for dense models).
        layers: one :class:`LayerAnatomy` per layer.
        total_params, active_params: every parameter; those one token uses.
        embedding_params: token (and position) embeddings, plus an untied output matrix.
        bytes_per_element: of the KV cache (2 = bf16/fp16).
        context: keys each token attends to in :attr:`flops_per_token` (windows cap it).
        sinks: a learned sink logit per head in every attention layer (gpt-oss).
        output_gate: attention output multiplied by a sigmoid gate (Qwen3-Next).
        latent_dim: the cached latent width of multi-head latent attention (DeepSeek's
            ``kv_lora_rank``; the decoupled RoPE key adds ``rotary_dim`` more per token), None
            otherwise. With latent attention ``n_kv_heads`` is 1: one latent serves every head.
    """

    model_type: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_embeddings: bool
    norm: str
    placement: str
    qk_norm: str | None
    ffn: str
    activation: str
    d_ff: int | None
    experts: int | None
    experts_active: int | None
    shared_experts: int | None
    expert_d_ff: int | None
    layers: tuple[LayerAnatomy, ...]
    total_params: int
    active_params: int
    embedding_params: int
    bytes_per_element: int
    context: int
    sinks: bool = False
    output_gate: bool = False
    latent_dim: int | None = None

    @property
    def nope_layers(self) -> tuple[int, ...]:
        """Attention layers without any position encoding (SmolLM3's every fourth)."""
        return tuple(layer.index for layer in self.layers if layer.position == "nope")

    @property
    def linear_layers(self) -> tuple[int, ...]:
        """Linear-attention layers (Qwen3-Next's Gated DeltaNet): a state, no cache."""
        return tuple(layer.index for layer in self.layers if layer.attention == "linear")

    @property
    def kv_bytes_per_token(self) -> int:
        """Cache bytes one more token costs in every layer (sliding layers stop growing at
        their window; see :meth:`kv_cache_bytes`)."""
        return sum(layer.kv_elements for layer in self.layers) * self.bytes_per_element

    def kv_cache_bytes(self, seq_len: int, *, batch: int = 1) -> int:
        """Cache bytes for ``batch`` sequences of ``seq_len`` tokens (windows cap their layers)."""
        for name, value in (("seq_len", seq_len), ("batch", batch)):
            check_positive_int(value, name)
        kept = (min(seq_len, layer.window or seq_len) * layer.kv_elements for layer in self.layers)
        return sum(kept) * self.bytes_per_element * batch

    @property
    def flops_per_token(self) -> int:
        """Forward FLOPs of one token at :attr:`context`: ``2 x`` the active matmul weights
        (the output matrix included, the embedding lookup not; norm gains, a negligible
        share, are counted with them) plus ``2 x`` the score and
        value matmuls over the keys it sees."""
        head = self.vocab_size * self.d_model
        weights = self.active_params - self.embedding_params + head  # the head is a matmul, tied or not
        keys = sum(min(self.context, layer.window or self.context) * layer.score_dims
                   for layer in self.layers)
        return 2 * weights + 2 * keys

    def to_frame(self):
        """A ``pandas.DataFrame`` with one row per fact (``fact``, ``value``)."""
        import pandas as pd

        kinds = _runs([_layer_label(layer) for layer in self.layers])
        rows = [
            ("family", self.model_type), ("layers", self.n_layers), ("width C", self.d_model),
            ("heads H / kv heads G", f"{self.n_heads} / {self.n_kv_heads}"),
            ("head dim D", self.head_dim), ("attention per layer", kinds),
            ("attention extras", ", ".join(x for x in (
                "learned sinks" if self.sinks else "", "output gate" if self.output_gate else "",
                f"latent cache of {self.latent_dim}" if self.latent_dim else "") if x) or "none"),
            ("norm", f"{self.norm}, {self.placement}" + (f", QK-norm {self.qk_norm}" if self.qk_norm else "")),
            ("feed-forward", f"{self.ffn} ({self.activation}), "
             + (f"d_ff {self.d_ff}" if self.d_ff else "no dense layer")),
            ("experts", "none" if self.experts is None else
             f"{self.experts} routed, {self.experts_active} active, {self.shared_experts or 0} shared, "
             f"width {self.expert_d_ff}"),
            ("vocabulary", f"{self.vocab_size} ({'tied' if self.tie_embeddings else 'untied'} output)"),
            ("parameters", f"{self.total_params / 1e9:.3f} B"),
            ("active parameters", f"{self.active_params / 1e9:.3f} B"),
            ("KV cache per token", f"{self.kv_bytes_per_token / 1024:.1f} KiB ({self.bytes_per_element} B/element)"),
            (f"forward FLOPs per token at {self.context} keys", f"{self.flops_per_token / 1e9:.2f} G"),
        ]
        return pd.DataFrame(rows, columns=["fact", "value"])

    def layers_frame(self):
        """A ``pandas.DataFrame`` with one row per layer."""
        import pandas as pd

        frame = pd.DataFrame([vars(layer) for layer in self.layers]).set_index("index")
        return frame.astype({"window": "Int64", "rotary_dim": "Int64"})  # None stays missing

    def _repr_html_(self) -> str:
        return self.to_frame().to_html(index=False)


def _layer_label(layer: LayerAnatomy) -> str:
    attn = f"{layer.attention} {layer.window}" if layer.attention in ("sliding", "chunked") else layer.attention
    if layer.position == "rope":
        pos = f"rope {layer.rope_base:g}" + (f" {layer.rope_scaling}" if layer.rope_scaling else "")
        pos += f" on {layer.rotary_dim} dims" if layer.rotary_dim else ""
    else:
        pos = layer.position
    return f"{attn}, {pos}, {layer.ffn}"


def _runs(labels: list[str]) -> str:
    """``"22 x A; 4 x B (layers 5, 11, 17, 23)"``: each kind once, the rare ones located."""
    where: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        where.setdefault(label, []).append(i)
    parts = []
    for label, idx in where.items():
        at = f" (layers {', '.join(map(str, idx))})" if len(where) > 1 and len(idx) <= 8 else ""
        parts.append(f"{len(idx)} x {label}{at}")
    return "; ".join(parts)


def _as_config(config: Any) -> Any:
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        if not os.path.isfile(path):
            raise ValueError(f"no config file at {path!r}; pass a config.json path, its folder, a dict or a config")
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    if isinstance(config, dict):
        model_type = config.get("model_type")
        if not isinstance(model_type, str):
            raise ValueError(
                f"a config dict needs its 'model_type' (e.g. 'llama'), got {model_type!r}; "
                "config.json files carry it"
            )
        from transformers import AutoConfig

        _check_family(model_type)
        rest = {k: v for k, v in config.items() if k != "model_type"}
        return AutoConfig.for_model(model_type, **rest)
    if not isinstance(getattr(config, "model_type", None), str):
        raise TypeError(
            "anatomy takes a transformers config, a dict from config.json or a path to one; "
            f"got {type(config).__name__}"
        )
    if config.model_type == "gemma3":  # the vision-language wrapper: describe its text model
        return config.text_config
    return config


_READ_CACHE: dict[str, tuple] = {}


def _read(c: Any) -> tuple:
    """:func:`read_architecture`, remembered per config (DeepSeek-V3's meta model takes seconds)."""
    key = c.to_json_string(use_diff=False) if hasattr(c, "to_json_string") else None
    if key is None:
        return read_architecture(c)
    if key not in _READ_CACHE:
        if len(_READ_CACHE) >= 64:
            _READ_CACHE.clear()
        _READ_CACHE[key] = read_architecture(c)
    return _READ_CACHE[key]


def _check_family(model_type: str) -> None:
    if model_type not in SUPPORTED:
        why = f" ({REFUSED[model_type]})" if model_type in REFUSED else ""
        raise NotImplementedError(f"anatomy has no reader for model_type {model_type!r}{why}; "
                                  f"it reads the families the loader reads: {sorted(SUPPORTED)}")


def anatomy(config: Any, *, bytes_per_element: int = 2, context: int = 4096) -> Anatomy:
    """The :class:`Anatomy` of a model, from its config (offline).

    Args:
        config: a transformers config, a ``config.json`` dict, or a path to one (or its folder).
        bytes_per_element: bytes per cached key/value element (2 = bf16/fp16, 1 = fp8).
        context: keys per token used for :attr:`Anatomy.flops_per_token`.

    Raises:
        NotImplementedError: a family anatomy cannot read yet (named).
        ValueError, TypeError: an input that is not a config (the message says what is).
    """
    for name, value in (("bytes_per_element", bytes_per_element), ("context", context)):
        check_positive_int(value, name)
    c = _as_config(config)
    _check_family(c.model_type)
    cfg, arch, layers, outside = _read(c)
    C, H, G, D, L = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.n_layers
    if arch.latent_dim is not None:  # MLA: a query/key head is its nope and rope parts
        D = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        G = 1  # one latent per token serves every head (MQA over latents when absorbed)
    embedding = cfg.vocab_size * C + (cfg.max_seq_len * C if cfg.position == "learned" else 0)
    tied = cfg.tie_embeddings
    embedding += 0 if tied else cfg.vocab_size * C
    total = outside + sum(layer.params for layer in layers)
    active = outside + sum(layer.active_params for layer in layers)
    return Anatomy(
        model_type=c.model_type, n_layers=L, d_model=C, n_heads=H, n_kv_heads=G, head_dim=D,
        vocab_size=cfg.vocab_size, tie_embeddings=tied, norm=arch.norm, placement=arch.placement,
        qk_norm=arch.qk_norm, ffn=arch.ffn, activation=arch.activation, d_ff=arch.d_ff,
        experts=arch.experts, experts_active=arch.experts_active, shared_experts=arch.shared_experts,
        expert_d_ff=arch.expert_d_ff, layers=tuple(layers), total_params=total, active_params=active,
        embedding_params=embedding, bytes_per_element=bytes_per_element, context=context,
        sinks=arch.sinks, output_gate=arch.output_gate, latent_dim=arch.latent_dim,
    )
