"""Input checks shared by the attention functions, the module and tiled attention.

Shape letters: B batch, H query heads, G kv heads, T queries, S keys, D head dim.
"""

from __future__ import annotations

import torch

from .._checks import check_tensor

__all__ = ["check_qkv", "check_same_dtype", "check_mask", "check_cache_layer"]


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int]:
    """Check q ``(B, H, T, D)``, k ``(B, G, S, D)``, v ``(B, G, S, Dv)`` with ``H % G == 0``;
    return ``(H, G)``."""
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        check_tensor(t, name, ndim=4, floating=True)
    check_same_dtype(q, k, v)
    B, H, T, D = q.shape
    if k.shape != v.shape[:-1] + (k.shape[-1],) or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree in (B, G, S); "
            "expected k (B, G, S, D) and v (B, G, S, Dv)"
        )
    if k.shape[0] != B or k.shape[-1] != D:
        raise ValueError(
            f"q {tuple(q.shape)} and k {tuple(k.shape)} must share batch B and head dim D; "
            "expected q (B, H, T, D), k (B, G, S, D)"
        )
    G = k.shape[1]
    if H % G:
        raise ValueError(
            f"query heads H ({H}) must be divisible by key/value heads G ({G}); "
            "each kv head serves H // G query heads"
        )
    return H, G


def check_same_dtype(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """q, k and v must share one dtype (outside ``torch.autocast``, where mixing is the point)."""
    if q.dtype == k.dtype == v.dtype or torch.is_autocast_enabled(q.device.type):
        return
    raise TypeError(
        f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}; cast them "
        "with .to(q.dtype), or run under torch.autocast"
    )


def check_mask(mask: torch.Tensor | None, target: tuple[int, ...], name: str = "mask") -> None:
    """Check a bool ``mask`` (``name="mask"``) or a float additive ``bias`` (``name="bias"``)
    that must broadcast to the scores' shape ``target``; None passes."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(mask).__name__}")
    if name == "mask" and mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
            "use llmviz.masks.padding_mask() for a HF 0/1 attention_mask, or pass an additive "
            "float mask as bias="
        )
    if name == "bias" and not mask.is_floating_point():
        raise TypeError(f"bias must be a floating-point tensor, got dtype {mask.dtype}")
    try:
        if torch.broadcast_shapes(mask.shape, target) != target:
            raise RuntimeError
    except RuntimeError:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"(B, H, T, S) = {target}"
        ) from None


def check_sinks(sinks: torch.Tensor, n_heads: int) -> None:
    """``sinks`` must be a float ``(H,)`` tensor of finite logits, one per query head."""
    check_tensor(sinks, "sinks", ndim=1, floating=True)
    if sinks.shape[0] != n_heads:
        raise ValueError(f"sinks must hold one logit per query head, shape ({n_heads},); got "
                         f"{tuple(sinks.shape)}")


def check_cache_layer(layer_idx: int, n_layers: int) -> bool:
    """Caches fill their layers in order: True when ``layer_idx`` opens the next layer of a
    cache holding ``n_layers``, False when it names one already held; anything else raises."""
    if layer_idx == n_layers:
        return True
    if 0 <= layer_idx < n_layers:
        return False
    raise ValueError(
        f"layer_idx {layer_idx} is out of order: the cache holds {n_layers} layers, so the next "
        f"new layer must be {n_layers}"
    )
