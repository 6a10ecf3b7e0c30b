"""Read a Hugging Face ``rope_parameters`` dict (transformers 5.x) into llmviz's RoPE fields.

transformers 5 keeps every RoPE setting in ``config.rope_parameters``: the base
(``rope_theta``), the type (``rope_type``: ``"default"``, ``"linear"``, ``"dynamic"``, ``"yarn"``,
``"llama3"``, ``"proportional"``, ``"longrope"``), its options, and ``partial_rotary_factor``.
Models whose layer types use different RoPE (Gemma 3) nest one such dict per layer type.
Older configs carry ``rope_theta`` and ``rope_scaling`` as attributes; both forms are read.

Strict: a key this module does not know for the given type raises ``ValueError`` naming it,
and a type llmviz cannot compute raises ``NotImplementedError``, so a model is never built
with silently different positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..position.rope_scaling import RopeScaling

__all__ = ["RopeSpec", "rope_parameters_of", "rope_spec"]

_COMMON = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
_KEYS = {
    "default": set(),
    "linear": {"factor"},
    "dynamic": {"factor"},
    "yarn": {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast",
             "beta_slow", "mscale", "mscale_all_dim", "truncate"},
    "llama3": {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"},
    "proportional": {"factor"},
}
_REFUSED = {
    "longrope": "LongRoPE (Phi-3 128k) switches between two per-frequency factor lists by length; "
                "llmviz.position has no such scaling yet",
}


@dataclass(frozen=True)
class RopeSpec:
    """One RoPE: ``base`` (theta), optional ``scaling``, ``rotary_dim`` (None = whole head)."""

    base: float
    scaling: RopeScaling | None
    rotary_dim: int | None
    kind: str  # the Hugging Face rope_type ("default" when unscaled)


def rope_parameters_of(hf_config: Any) -> dict[str, Any]:
    """The config's RoPE dict, flat or nested by layer type (legacy attributes folded in)."""
    params = getattr(hf_config, "rope_parameters", None)
    if params:
        return dict(params)
    legacy = dict(getattr(hf_config, "rope_scaling", None) or {})  # transformers 4 configs
    legacy.setdefault("rope_theta", getattr(hf_config, "rope_theta", 10000.0))
    return legacy


def rope_spec(params: dict[str, Any], *, head_dim: int, max_position_embeddings: int,
              allow_partial: bool = False, where: str = "rope_parameters") -> RopeSpec:
    """The :class:`RopeSpec` of one flat ``rope_parameters`` dict.

    Args:
        params: e.g. ``{"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0, ...}``.
        head_dim: D of the model.
        max_position_embeddings: the config's field (the trained length of ``dynamic``, and
            the fallback of ``yarn``'s factor and original length, as in transformers).
        allow_partial: the family rotates only ``partial_rotary_factor * D`` features (Phi-3).
        where: the name used in error messages.
    """
    if not isinstance(params, dict):
        raise TypeError(f"{where} must be a dict, got {type(params).__name__} ({params!r})")
    kind = params.get("rope_type", params.get("type", "default"))
    if kind in _REFUSED:
        raise NotImplementedError(f"{where}: rope_type={kind!r} is not supported: {_REFUSED[kind]}")
    if kind not in _KEYS:
        raise ValueError(
            f"{where}: unknown rope_type {kind!r}; llmviz reads {tuple(_KEYS)} "
            f"(and refuses {tuple(_REFUSED)})"
        )
    unknown = sorted(set(params) - _COMMON - _KEYS[kind])
    if unknown:
        raise ValueError(
            f"{where}: keys {unknown} are not understood for rope_type={kind!r}; llmviz would "
            f"ignore them and compute different positions (known: {sorted(_COMMON | _KEYS[kind])})"
        )
    base = float(params.get("rope_theta", 10000.0))
    if kind == "proportional":  # its partial_rotary_factor stops the slow pairs over the whole head
        fraction = params.get("partial_rotary_factor")
        scaling = RopeScaling("proportional", factor=float(params.get("factor") or 1.0),
                              rotated_fraction=1.0 if fraction is None else float(fraction))
        return RopeSpec(base, scaling, None, kind)
    rotary_dim = _rotary_dim(params.get("partial_rotary_factor"), head_dim, allow_partial, where)
    return RopeSpec(base, _scaling(kind, params, max_position_embeddings), rotary_dim, kind)


def _rotary_dim(factor: Any, head_dim: int, allow_partial: bool, where: str) -> int | None:
    if factor is None or float(factor) == 1.0:
        return None
    if not allow_partial:
        raise NotImplementedError(
            f"{where}: partial_rotary_factor={factor} is not used this way by this family's "
            "Hugging Face code; refusing rather than guessing which features rotate"
        )
    dim = int(head_dim * float(factor))
    if dim <= 0 or dim % 2:
        raise ValueError(
            f"{where}: partial_rotary_factor={factor} gives {dim} rotating features of "
            f"head_dim={head_dim}; it must be a positive even number"
        )
    return None if dim == head_dim else dim


def _scaling(kind: str, p: dict[str, Any], max_pos: int) -> RopeScaling | None:
    if kind == "default":
        return None
    if kind == "linear":
        return RopeScaling("linear", factor=float(p["factor"]))
    if kind == "dynamic":  # transformers sizes the NTK change from max_position_embeddings
        return RopeScaling("dynamic", factor=float(p["factor"]), original_max_position_embeddings=max_pos)
    original = int(p.get("original_max_position_embeddings") or max_pos)
    if kind == "llama3":
        return RopeScaling(
            "llama3", factor=float(p["factor"]), original_max_position_embeddings=original,
            low_freq_factor=float(p.get("low_freq_factor", 1.0)),
            high_freq_factor=float(p.get("high_freq_factor", 4.0)),
        )
    factor = p.get("factor")
    factor = max_pos / original if factor is None else float(factor)
    optional = {k: float(p[k]) for k in ("attention_factor", "mscale", "mscale_all_dim")
                if p.get(k) is not None}
    return RopeScaling(
        "yarn", factor=factor, original_max_position_embeddings=original,
        beta_fast=float(p.get("beta_fast") or 32), beta_slow=float(p.get("beta_slow") or 1),
        truncate=bool(p.get("truncate", True)), **optional,
    )
