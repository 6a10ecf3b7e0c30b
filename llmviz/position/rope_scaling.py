"""Context-extension schemes for RoPE: new frequencies (and, for YaRN, an attention factor)
for a model asked to read past the length it was trained on.

Formulas follow ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` of transformers 5 (checked
value for value in the tests), plus the static NTK-aware base change that Hugging Face has no type
for (its ``longrope`` type is not modelled; ``from_hf`` refuses it):

* ``linear`` (position interpolation, Chen et al. 2023): every frequency divided by ``factor``;
* ``ntk`` (bloc97 2023): base multiplied by ``factor ** (R / (R - 2))``;
* ``dynamic`` (dynamic NTK): the NTK base change sized to the current length. With a KV cache
  this is the one scheme where decoding differs from a full forward once the sequence passes
  the trained length: cached keys keep the rotation of the length at which they were computed,
  while a full forward rotates every key with the new frequencies (Hugging Face behaves the
  same; ``tests/model/test_generation_padded.py`` shows the difference);
* ``yarn`` (Peng et al. 2023): ramp between interpolated and original frequencies by wavelength,
  cos/sin scaled by ``0.1 ln(factor) + 1``;
* ``llama3`` (Meta 2024): frequencies of long-wavelength pairs divided by ``factor`` (their
  wavelengths grow ``factor`` times), short-wavelength pairs kept, smooth between;
* ``proportional`` (Gemma 4): the fastest ``rotated_fraction`` of the pairs keep their speeds
  (exponents over the whole rotary dim), the slower ones stop (frequency 0), all divided by ``factor``.

R is the rotary dim. Use through :func:`llmviz.position.rope.rope_frequencies`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from .._checks import check_choice, check_positive, check_positive_int
from ._common import base_inv_freq

__all__ = ["HF_ROPE_TYPES", "SCALING_KINDS", "RopeScaling", "scaled_frequencies"]

SCALING_KINDS = ("linear", "ntk", "dynamic", "yarn", "llama3", "proportional")
_NEEDS_ORIGINAL = ("dynamic", "yarn", "llama3")
# Hugging Face rope_type values RopeScaling.from_hf reads ("default" means no scaling)
HF_ROPE_TYPES = ("linear", "dynamic", "yarn", "llama3", "proportional")
_HF_REFUSED = {
    "longrope": "LongRoPE (Phi-3) switches between two per-frequency factor lists by length, "
                "which RopeScaling does not model",
}


@dataclass(frozen=True)
class RopeScaling:
    """How to stretch RoPE past the context it was trained on. Field names follow Hugging Face's
    ``rope_scaling`` dict.

    Attributes:
        kind: ``"linear"`` (position interpolation: every frequency divided by ``factor``),
            ``"ntk"`` (NTK-aware: the base grows to ``base * factor ** (R / (R - 2))``),
            ``"dynamic"`` (dynamic NTK: the NTK base change sized to the current length, no change
            up to ``original_max_position_embeddings``), ``"yarn"`` (NTK-by-parts ramp between
            interpolated and original frequencies, plus an attention factor), ``"llama3"``
            (Llama 3.1: low frequencies divided by ``factor``, high ones kept, smooth in between),
            ``"proportional"`` (Gemma 4: only the fastest ``rotated_fraction`` of the pairs turn,
            the rest get frequency 0; use it over the whole head, ``rotary_dim=None``).
        factor: context extension ratio (new length / trained length), > 0.
        original_max_position_embeddings: the trained context length; required by ``dynamic``,
            ``yarn`` and ``llama3``.
        beta_fast, beta_slow: YaRN ramp bounds, in rotations over the trained context.
        mscale, mscale_all_dim: optional YaRN attention-factor terms (DeepSeek style).
        attention_factor: YaRN cos/sin multiplier; ``None`` means ``0.1 ln(factor) + 1``.
        truncate: YaRN: round the ramp bounds to whole dimensions (HF default True).
        low_freq_factor, high_freq_factor: Llama 3.1 wavelength thresholds
            (``original / low_freq_factor`` and ``original / high_freq_factor``).
        rotated_fraction: ``proportional`` only: the share of the R/2 pairs that turn (Hugging
            Face's ``partial_rotary_factor`` inside a proportional ``rope_parameters``), in [0, 1].
    """

    kind: str
    factor: float = 1.0
    original_max_position_embeddings: int | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool = True
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    rotated_fraction: float = 1.0

    def __post_init__(self) -> None:
        check_choice(self.kind, "RopeScaling.kind", SCALING_KINDS)
        check_positive(self.factor, "RopeScaling.factor")
        orig = self.original_max_position_embeddings
        if self.kind in _NEEDS_ORIGINAL and orig is None:
            raise ValueError(
                f"RopeScaling(kind={self.kind!r}) needs original_max_position_embeddings "
                "(the context length the model was trained on), e.g. 4096"
            )
        if orig is not None:
            check_positive_int(orig, "original_max_position_embeddings")
        if self.kind == "yarn":
            check_positive(self.beta_fast, "RopeScaling.beta_fast")
            check_positive(self.beta_slow, "RopeScaling.beta_slow")
            if not self.beta_fast > self.beta_slow:
                raise ValueError(
                    f"YaRN needs beta_fast ({self.beta_fast}) > beta_slow ({self.beta_slow}): "
                    "beta_fast bounds the high-frequency end of the ramp (defaults 32 and 1)"
                )
        if not 0.0 <= self.rotated_fraction <= 1.0:
            raise ValueError(f"rotated_fraction must be in [0, 1], got {self.rotated_fraction}")
        if self.kind != "proportional" and self.rotated_fraction != 1.0:
            raise ValueError(
                f"rotated_fraction ({self.rotated_fraction}) only applies to kind='proportional'; "
                f"for kind={self.kind!r} rotate fewer features with rotary_dim instead"
            )
        if self.kind == "llama3" and not self.high_freq_factor > self.low_freq_factor:
            raise ValueError(
                f"llama3 scaling needs high_freq_factor ({self.high_freq_factor}) > "
                f"low_freq_factor ({self.low_freq_factor})"
            )

    @classmethod
    def from_hf(
        cls, rope_scaling: Any, *, max_position_embeddings: int | None = None
    ) -> "RopeScaling | None":
        """The scaling a Hugging Face config describes (None when it has none).

        Args:
            rope_scaling: one of
                * a transformers 5 config: its flat ``config.rope_parameters`` is read
                  (``rope_type``, ``rope_theta``, ``factor``, ...);
                * a config without ``rope_parameters`` (transformers 4): its ``rope_scaling``;
                * a plain dict in either form (``rope_type`` or the legacy ``type`` key);
                * None or an empty dict (no scaling).
            max_position_embeddings: the config's own field (read from a config when omitted).
                Hugging Face's ``dynamic`` type always uses it as the trained length; ``yarn`` and
                ``llama3`` fall back to it when ``original_max_position_embeddings`` is missing,
                and ``yarn`` without ``factor`` uses ``max_position_embeddings / original``.

        Returns:
            A :class:`RopeScaling`, or None for ``rope_type`` ``"default"``. The base is not part of
            the scaling: read it with :meth:`base_from_hf`; ``partial_rotary_factor`` is the
            caller's ``rotary_dim = int(head_dim * partial_rotary_factor)``, except for
            ``proportional``, whose ``partial_rotary_factor`` becomes ``rotated_fraction`` (rotate
            the whole head). Other keys are not read.

        Raises:
            ValueError: a ``rope_type`` llmviz does not compute (``longrope``, or unknown), nested
                per-layer-type parameters, or a missing
                ``max_position_embeddings`` that the type needs.
        """
        params, max_pos = _hf_rope_params(rope_scaling, max_position_embeddings)
        kind = params.get("rope_type", params.get("type", "default"))
        if kind == "default":
            return None
        if kind not in HF_ROPE_TYPES:
            reason = _HF_REFUSED.get(kind, "it is not a Hugging Face rope_type llmviz knows")
            raise ValueError(
                f"rope_type {kind!r} is not supported: {reason}; llmviz reads "
                f"{('default',) + HF_ROPE_TYPES}"
            )
        fields = set(cls.__dataclass_fields__) - {"kind", "rotated_fraction"}
        kw = {k: v for k, v in params.items() if k in fields and v is not None}
        if kind == "proportional":  # transformers: factor and partial_rotary_factor default to 1
            fraction = params.get("partial_rotary_factor")
            return cls(kind, factor=float(kw.get("factor", 1.0)),
                       rotated_fraction=1.0 if fraction is None else float(fraction))
        # dynamic: always the config's length; yarn, llama3: only when the dict has none
        if kind == "dynamic" or (kind in _NEEDS_ORIGINAL
                                 and "original_max_position_embeddings" not in kw):
            if max_pos is None:
                raise ValueError(
                    f"rope_type {kind!r} needs max_position_embeddings (the config's field); "
                    "pass the config itself or max_position_embeddings=..."
                )
            kw["original_max_position_embeddings"] = int(max_pos)
        if kind != "yarn" and "factor" not in kw:
            raise ValueError(f"rope_type {kind!r} needs a factor, got keys {sorted(params)}")
        if kind == "yarn":
            if "factor" not in kw:  # as transformers: the post-/pre-YaRN length ratio
                if max_pos is None:
                    raise ValueError(
                        "rope_type 'yarn' without factor needs max_position_embeddings"
                    )
                kw["factor"] = max_pos / kw["original_max_position_embeddings"]
            for key, default in (("beta_fast", 32.0), ("beta_slow", 1.0)):
                kw[key] = kw.get(key) or default  # transformers treats 0 as unset
        return cls(kind, **kw)

    @staticmethod
    def base_from_hf(rope_parameters: Any) -> float:
        """The RoPE base (``rope_theta``) of a Hugging Face config or ``rope_parameters`` dict.

        A transformers 5 config keeps it in ``config.rope_parameters["rope_theta"]``, a
        transformers 4 config in ``config.rope_theta``; a config with neither uses its class's
        ``default_theta`` (10 000), as transformers does. A plain dict must carry ``rope_theta``:
        a legacy ``rope_scaling`` dict has none, and guessing 10 000 would silently change
        Llama 3's 500 000.
        """
        params, _ = _hf_rope_params(rope_parameters, None)
        if params.get("rope_theta") is not None:
            return float(params["rope_theta"])
        if isinstance(rope_parameters, dict) or rope_parameters is None:
            raise ValueError(
                f"rope_theta is missing from {rope_parameters!r}; pass the config itself (its "
                "rope_parameters or rope_theta holds the base) or add rope_theta to the dict"
            )
        theta = getattr(rope_parameters, "rope_theta", None)
        if theta is None:
            theta = getattr(rope_parameters, "default_theta", 10000.0)
        return float(theta)

    def to_hf(self) -> dict[str, Any]:
        """The equivalent Hugging Face ``rope_scaling`` dict (``ntk`` has no HF counterpart)."""
        if self.kind == "ntk":
            raise ValueError(
                "kind='ntk' (static NTK-aware base change) has no Hugging Face rope_type; "
                "use 'dynamic' or change rope_theta instead"
            )
        out: dict[str, Any] = {"rope_type": self.kind, "factor": float(self.factor)}
        if self.kind in ("yarn", "llama3"):
            out["original_max_position_embeddings"] = self.original_max_position_embeddings
        if self.kind == "yarn":
            out.update(beta_fast=float(self.beta_fast), beta_slow=float(self.beta_slow),
                       truncate=self.truncate)
            for key in ("mscale", "mscale_all_dim", "attention_factor"):
                if getattr(self, key) is not None:
                    out[key] = float(getattr(self, key))
        if self.kind == "llama3":
            out.update(low_freq_factor=float(self.low_freq_factor),
                       high_freq_factor=float(self.high_freq_factor))
        if self.kind == "proportional":
            out["partial_rotary_factor"] = float(self.rotated_fraction)
        return out


def _hf_rope_params(source: Any, max_pos: int | None) -> tuple[dict[str, Any], int | None]:
    """``(flat rope dict, max_position_embeddings)`` of a config or dict; never mutates ``source``."""
    if source is None:
        return {}, max_pos
    if isinstance(source, dict):
        params = dict(source)
    else:
        params = getattr(source, "rope_parameters", None)
        if params is None:
            params = getattr(source, "rope_scaling", None)
        if params is not None and not isinstance(params, dict):
            raise TypeError(
                f"{type(source).__name__}.rope_parameters must be a dict, got {type(params).__name__}"
            )
        params = dict(params or {})
        if max_pos is None:
            max_pos = getattr(source, "max_position_embeddings", None)
    nested = sorted(k for k, v in params.items() if isinstance(v, dict))
    if nested:
        raise ValueError(
            f"rope_parameters is nested by layer type ({nested}); pass one of them, e.g. "
            f"config.rope_parameters[{nested[0]!r}], with max_position_embeddings=..."
        )
    return params, max_pos


def _ntk_exponent(dim: int, kind: str) -> float:
    if dim <= 2:
        raise ValueError(f"{kind} scaling needs rotary_dim >= 4, got {dim}")
    return dim / (dim - 2)


def scaled_frequencies(
    base: float, dim: int, scaling: RopeScaling, *, seq_len: int | None, device: Any
) -> tuple[torch.Tensor, float]:
    """``(inv_freq (dim/2,), attention_factor)`` under ``scaling`` for rotary dim ``dim``."""
    if not isinstance(scaling, RopeScaling):
        raise TypeError(f"scaling must be a RopeScaling, got {type(scaling).__name__}")
    factor, kind = scaling.factor, scaling.kind
    orig = scaling.original_max_position_embeddings
    if kind == "linear":
        return base_inv_freq(base, dim, device) / factor, 1.0
    if kind == "ntk":
        return base_inv_freq(base * factor ** _ntk_exponent(dim, kind), dim, device), 1.0
    if kind == "dynamic":
        length = orig if seq_len is None else max(int(seq_len), orig)
        stretch = factor * length / orig - (factor - 1)
        return base_inv_freq(base * stretch ** _ntk_exponent(dim, kind), dim, device), 1.0
    if kind == "yarn":
        return _yarn(base, dim, scaling, device)
    if kind == "proportional":
        # the first n pairs keep base ** (-2i / R), the other R/2 - n stand still
        n_turning = int(scaling.rotated_fraction * dim // 2)
        inv_freq = base_inv_freq(base, dim, device)
        inv_freq[n_turning:] = 0.0
        return inv_freq / factor, 1.0
    return _llama3(base, dim, scaling, device)


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn(base: float, dim: int, s: RopeScaling, device: Any) -> tuple[torch.Tensor, float]:
    factor, orig = s.factor, s.original_max_position_embeddings
    if s.attention_factor is not None:
        attention_factor = float(s.attention_factor)
    elif s.mscale and s.mscale_all_dim:
        attention_factor = _yarn_mscale(factor, s.mscale) / _yarn_mscale(factor, s.mscale_all_dim)
    else:
        attention_factor = _yarn_mscale(factor)

    def pair_index(n_rotations: float) -> float:
        # the (fractional) pair index whose wavelength fits n_rotations turns into `orig`
        return dim * math.log(orig / (n_rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_index(s.beta_fast), pair_index(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    keep = (1 - ramp).to(device)  # 1: original frequency (fast pairs), 0: interpolated
    pos_freqs = base ** (torch.arange(0, dim, 2, device=device).float() / dim)
    extrapolated, interpolated = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    return interpolated * (1 - keep) + extrapolated * keep, attention_factor


def _llama3(base: float, dim: int, s: RopeScaling, device: Any) -> tuple[torch.Tensor, float]:
    inv_freq = base_inv_freq(base, dim, device)
    orig, factor = s.original_max_position_embeddings, s.factor
    low_wavelen = orig / s.low_freq_factor  # longer than this: fully interpolated
    high_wavelen = orig / s.high_freq_factor  # shorter than this: untouched
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, blended, scaled), 1.0
