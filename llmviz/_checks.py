"""Input checks shared by every module: one wording for the house's error messages.

Each check raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind, bad value)
with a message that names the argument, the value it got, and what to do instead. Private to
the package: modules import these; users never need to.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable

import torch

__all__ = [
    "check_flag",
    "check_tensor",
    "check_dtype_matches",
    "check_hidden",
    "check_choice",
    "check_real",
    "check_positive",
    "check_positive_int",
    "check_int_in",
    "check_real_in",
]


def check_tensor(
    x: Any,
    name: str,
    *,
    ndim: int | Iterable[int] | None = None,
    min_ndim: int | None = None,
    floating: bool = False,
) -> torch.Tensor:
    """Raise a clear ``TypeError``/``ValueError`` unless ``x`` is a tensor of the given rank.

    ``ndim`` lists the allowed ranks; ``min_ndim`` asks for at least that many dimensions (a
    0-d tensor has no last axis to normalise, soft-max or index).
    """
    if not isinstance(x, torch.Tensor):
        hint = "; wrap it with torch.as_tensor(...)" if isinstance(x, (list, tuple)) or hasattr(
            x, "__array__") else ""
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}{hint}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.ndim not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise ValueError(
                f"{name} must have {want} dimensions, got shape {tuple(x.shape)} ({x.ndim} dims)"
            )
    if min_ndim is not None and x.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimension(s), got shape {tuple(x.shape)} "
            f"({x.ndim} dims)"
        )
    if floating and not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor, got dtype {x.dtype}; "
            f"convert it with {name}.float()"
        )
    return x


def check_dtype_matches(
    x: torch.Tensor, weight: torch.Tensor, who: str, *, low_precision_ok: bool = False
) -> None:
    """Raise ``TypeError`` if ``x`` and a module's ``weight`` differ in dtype (outside autocast).

    Inside ``torch.autocast`` mixed dtypes are the point (the matmuls cast), so nothing is
    checked there. With ``low_precision_ok`` a bfloat16/float16 ``x`` may meet float32 weights
    (norms kept in float32 under mixed precision; the output keeps ``x``'s dtype). Reads
    dtypes only, never values.
    """
    if x.dtype == weight.dtype or torch.is_autocast_enabled(x.device.type):
        return
    if low_precision_ok and weight.dtype == torch.float32 and x.dtype in (torch.bfloat16, torch.float16):
        return
    hint = ", e.g. model.double() for float64 input" if x.dtype == torch.float64 else ""
    raise TypeError(
        f"{who} got x of dtype {x.dtype} but its weights are {weight.dtype}; cast one to "
        f"the other (x.to({weight.dtype}) or module.to(x.dtype){hint}), or run under torch.autocast"
    )


def check_hidden(
    x: Any, d_model: int, weight: torch.Tensor, who: str, *, ndim: int | None = None
) -> torch.Tensor:
    """Check the input of a layer built for width ``d_model``: a floating tensor ``(..., C)``
    (exactly ``ndim`` dimensions when given) with ``C == d_model``, in the dtype of the layer's
    ``weight`` (see :func:`check_dtype_matches`)."""
    check_tensor(x, "x", ndim=ndim, min_ndim=1, floating=True)
    if x.shape[-1] != d_model:
        layout = "(B, T, C)" if ndim == 3 else "(..., C)"
        raise ValueError(
            f"{who} was built for d_model={d_model}, but x has shape {tuple(x.shape)} (width "
            f"{x.shape[-1]}); x must be {layout} with C = {d_model}"
        )
    check_dtype_matches(x, weight, who)
    return x


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """Raise ``ValueError`` naming the allowed values unless ``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not supported; choose one of {choices}")
    return value


def check_flag(value: Any, name: str) -> bool:
    """Raise ``TypeError`` unless ``value`` is ``True`` or ``False`` (a ``numpy.bool_`` counts):
    ``None``, ``0``/``1`` or a string would otherwise be read as a truth value, silently."""
    if type(value).__name__ not in ("bool", "bool_"):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_real(value: Any, name: str, *, hint: str = "") -> Any:
    """Raise unless ``value`` is a finite real number (``bool`` is not); the range is the caller's.

    For arguments with a range of their own (``top_p`` in (0, 1]): this check first, so that a
    tensor, a string or NaN gets a clear message instead of a failed comparison. ``hint``
    (e.g. "; use ... instead") ends the message for a non-finite value.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}{hint}")
    return value


def check_positive(value: Any, name: str, *, allow_zero: bool = False) -> Any:
    """Raise unless ``value`` is a finite real number > 0 (>= 0 with ``allow_zero``).

    ``TypeError`` for a non-number (``bool`` counts as not a number), ``ValueError`` for NaN,
    infinity or a value out of range.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    bad = value < 0 if allow_zero else value <= 0
    if bad:
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be {kind}, got {value}")
    return value


def check_positive_int(value: Any, name: str, *, allow_zero: bool = False) -> int:
    """Raise unless ``value`` is an ``int`` > 0 (>= 0 with ``allow_zero``); ``True`` is not an int.

    Integer-valued numpy scalars are accepted and returned as a Python ``int``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    bad = value < 0 if allow_zero else value <= 0
    if bad:
        kind = "a non-negative" if allow_zero else "a positive"
        raise ValueError(f"{name} must be {kind} int, got {value}")
    return value


def check_int_in(value: Any, name: str, lo: int, hi: int | None = None) -> int:
    """Raise unless ``value`` is an ``int`` with ``lo <= value <= hi`` (no upper end if ``hi``
    is None); the message names the range, so a reader knows what to pass instead."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        span = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be an int {span}, got {value}")
    return value


def check_real_in(value: Any, name: str, lo: float, hi: float | None = None) -> float:
    """Raise unless ``value`` is a finite real number with ``lo <= value <= hi`` (no upper end
    if ``hi`` is None)."""
    check_real(value, name)
    if value < lo or (hi is not None and value > hi):
        span = f"in [{lo:g}, {hi:g}]" if hi is not None else f">= {lo:g}"
        raise ValueError(f"{name} must be {span}, got {value}")
    return float(value)
