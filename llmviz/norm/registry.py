"""The norm registry: every norm kind, how it is built, and how many parameters it holds.

Adding a norm kind is one :meth:`~llmviz._registry.Registry.register` call here: config
validation (:data:`MODEL_NORMS`), :func:`make_norm`, the closed-form parameter counts of
:mod:`llmviz.analysis.parameters` and the property test over kinds all read :data:`NORMS`.

``build(d, **options)`` and ``params(d, **options)`` take the feature width ``d`` and the
norm's own options (``eps``, ``bias``, ``fused``, ``n_groups``, ...). A model reads its norms as
a :class:`NormSpec` (kind, eps and options from the config), built in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from torch import nn

from .._checks import check_positive_int
from .._registry import Registry
from ._common import check_eps
from .layer import LayerNorm, RMSNorm
from .sequence import BatchNormSeq, GroupNormSeq, InstanceNormSeq

__all__ = ["NORMS", "NORM_KINDS", "MODEL_NORMS", "NormSpec", "make_norm", "norm_params"]


def _affine(d: int, options: Mapping[str, Any]) -> int:
    return 2 * d if options.get("affine", True) else 0


def _group(d: int, **options: Any) -> nn.Module:
    if "n_groups" not in options:
        raise ValueError("make_norm('group', ...) needs n_groups=, e.g. n_groups=4")
    return GroupNormSeq(d, options.pop("n_groups"), **options)


#: The registry of norm kinds (``per_token``: usable in a model's blocks and as QK-norm).
NORMS = Registry("norm kind")
NORMS.register("layer", build=lambda d, **o: LayerNorm(d, **o),
               params=lambda d, **o: 2 * d if o.get("bias", True) else d,
               summary="LayerNorm: weight and bias (GPT-2)", per_token=True)
NORMS.register("layer_nobias", build=lambda d, **o: LayerNorm(d, bias=False, **o),
               params=lambda d, **o: d, summary="LayerNorm without bias (PaLM, OLMo)",
               per_token=True)
NORMS.register("rms", build=lambda d, **o: RMSNorm(d, **o), params=lambda d, **o: d,
               summary="RMSNorm (Llama)", per_token=True)
NORMS.register("rms_gemma", build=lambda d, **o: RMSNorm(d, unit_offset=True, **o),
               params=lambda d, **o: d, summary="RMSNorm scaling by 1 + weight (Gemma)",
               per_token=True)
NORMS.register("batch", build=lambda d, **o: BatchNormSeq(d, **o),
               params=lambda d, **o: _affine(d, o), summary="BatchNorm over batch and time",
               per_token=False)
NORMS.register("group", build=_group, params=lambda d, **o: _affine(d, o),
               summary="GroupNorm over time and channel groups (pass n_groups=)", per_token=False)
NORMS.register("instance", build=lambda d, **o: InstanceNormSeq(d, **o),
               params=lambda d, **o: _affine(d, o), summary="InstanceNorm over time",
               per_token=False)
NORMS.register("none", build=lambda d, **o: nn.Identity(), params=lambda d, **o: 0,
               summary="identity", per_token=False)

#: Every name :func:`make_norm` accepts (read from :data:`NORMS`).
NORM_KINDS = tuple(NORMS)
#: The kinds a model's blocks can use (per-token norms; the sequence norms mix tokens).
MODEL_NORMS = NORMS.names(per_token=True)


def _options(eps: float | None, kwargs: dict) -> dict:
    if eps is not None:
        check_eps(eps)
        kwargs["eps"] = eps
    return kwargs


def make_norm(kind: str, d: int, *, eps: float | None = None, **kwargs: Any) -> nn.Module:
    """Build a norm by name (used by blocks and for per-head QK-norm).

    Args:
        kind: one of :data:`NORM_KINDS` (the registry :data:`NORMS`; ``"group"`` needs
            ``n_groups=``, ``"none"`` is the identity).
        d: feature size C.
        eps: overrides the class default when given.
        **kwargs: passed to the class (e.g. ``fused=False``, ``n_groups=4``, ``momentum``).
    """
    return NORMS.kind(kind).build(d, **_options(eps, kwargs))


def norm_params(kind: str, d: int, **options: Any) -> int:
    """Parameters of ``make_norm(kind, d, **options)``, from the registry's closed form."""
    options.pop("eps", None)
    check_positive_int(d, "d")
    return NORMS.kind(kind).params(d, **options)


@dataclass(frozen=True)
class NormSpec:
    """A norm as a model configures it: kind, epsilon and the norm's own options.

    ``spec.build(d)`` makes the module, ``spec.params(d)`` counts it, both through
    :data:`NORMS`; a model holds one spec for its block norms and one for its QK-norm, so a
    norm's own parameters (``fused``, a future kind's init) come from the config in one place.
    """

    kind: str
    eps: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        NORMS.kind(self.kind)
        if self.eps is not None:
            check_eps(self.eps)
        if not isinstance(self.options, Mapping):
            raise TypeError(f"NormSpec options must be a mapping, got {type(self.options).__name__}")

    def build(self, d: int) -> nn.Module:
        """The norm over ``d`` features."""
        return make_norm(self.kind, d, eps=self.eps, **dict(self.options))

    def params(self, d: int) -> int:
        """Its parameter count (closed form)."""
        return norm_params(self.kind, d, **dict(self.options))
