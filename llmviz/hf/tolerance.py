"""How close an llmviz model must come to its ``transformers`` original, by dtype and device.

Two correct implementations of one network agree only up to rounding: they add the same terms
in a different order, and fused GPU kernels, TF32 matrix products or half-precision weights
round more coarsely than float32 on a CPU. :func:`match_tolerance` states the bound the book
accepts, relative to the size of the reference output::

    max |ours - theirs| <= match_tolerance(theirs)

The relative bounds (:data:`RELATIVE`) are a few units of each dtype's machine epsilon, taken
over a whole forward pass: float64 ``1e-10``; float32 ``1e-5`` on a CPU and ``1e-4`` on a GPU
(other summation orders and fused attention kernels); float32 with TF32 matrix products allowed
``5e-3`` (TF32 keeps 10 mantissa bits); float16 ``1e-2``; bfloat16 ``5e-2``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["RELATIVE", "match_tolerance", "relative_tolerance"]

#: Largest accepted |difference| relative to max(1, largest |reference value|), by dtype and
#: by where it ran ("cpu" or "accelerator"); "tf32" is float32 while TF32 products are allowed.
RELATIVE: dict[tuple[torch.dtype | str, str], float] = {
    (torch.float64, "cpu"): 1e-10,
    (torch.float64, "accelerator"): 1e-10,
    (torch.float32, "cpu"): 1e-5,
    (torch.float32, "accelerator"): 1e-4,
    ("tf32", "accelerator"): 5e-3,
    (torch.float16, "cpu"): 1e-2,
    (torch.float16, "accelerator"): 1e-2,
    (torch.bfloat16, "cpu"): 5e-2,
    (torch.bfloat16, "accelerator"): 5e-2,
}


def _tf32_allowed() -> bool:
    return bool(torch.backends.cuda.matmul.allow_tf32) or (
        torch.get_float32_matmul_precision() != "highest"
    )


def relative_tolerance(dtype: torch.dtype, device: Any = "cpu") -> float:
    """The relative bound of :data:`RELATIVE` for ``dtype`` computed on ``device``.

    float32 on a GPU while TF32 products are allowed gets the TF32 bound.

    Raises:
        ValueError: ``dtype`` has no stated tolerance (e.g. float8 or an integer dtype).
    """
    where = "cpu" if torch.device(device).type == "cpu" else "accelerator"
    key: torch.dtype | str = dtype
    if key == torch.float32 and where == "accelerator" and _tf32_allowed():
        key = "tf32"
    if (key, where) not in RELATIVE:
        known = sorted({str(k[0]) for k in RELATIVE})
        raise ValueError(
            f"no stated tolerance for dtype {dtype}; compare in one of {known} "
            "(e.g. reference.float())"
        )
    return RELATIVE[key, where]


def match_tolerance(reference: Any) -> float:
    """The largest |difference| from ``reference`` (a floating tensor, the ``transformers``
    output) that still counts as the same computation on its dtype and device.

    It is ``relative_tolerance(dtype, device) * max(1, reference.abs().max())``.

    Raises:
        TypeError: ``reference`` is not a floating-point tensor.
        ValueError: its dtype has no stated tolerance (e.g. float8).
    """
    if not isinstance(reference, torch.Tensor):
        raise TypeError(
            f"reference must be a torch.Tensor (the transformers output), got "
            f"{type(reference).__name__}"
        )
    if not reference.is_floating_point():
        raise TypeError(f"reference must be floating point, got dtype {reference.dtype}")
    rel = relative_tolerance(reference.dtype, reference.device)
    scale = max(1.0, float(reference.detach().abs().max())) if reference.numel() else 1.0
    return rel * scale
