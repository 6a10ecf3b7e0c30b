"""Key/value cache for incremental decoding.

Shape letters: B batch, G kv heads, S cached length, T new tokens, D head dim.

At every decoding step a causal decoder only needs the keys and values of earlier tokens, and
those never change; caching them turns the per-step work from recomputing all ``S`` positions
into computing one. The cache holds, per layer, ``k`` and ``v`` of shape ``(B, G, S, D)``;
its size is ``2 * n_layers * G * D * S * B * bytes_per_element`` (only the kv heads ``G``
count, which is why GQA/MQA shrink it).
"""

from __future__ import annotations

import torch

from .._checks import check_tensor

__all__ = ["KVCache"]


class KVCache:
    """A growing per-layer cache of keys and values.

    ``update(layer_idx, k, v)`` appends the new ``(B, G, T, D)`` keys/values along the sequence
    axis and returns everything cached for that layer, ``(B, G, S, D)`` with ``S`` = old + T.
    Layers are created on first use, in order. Keys and values keep the dtype and device of
    the first update of their layer: a later update in another dtype (or on another device)
    raises ``TypeError`` rather than being promoted by ``torch.cat``.
    """

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def __len__(self) -> int:
        """Number of layers held."""
        return len(self.keys)

    def update(
        self, layer_idx: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_tensor(k, "k", ndim=4)
        check_tensor(v, "v", ndim=4)
        if k.shape[:3] != v.shape[:3]:
            raise ValueError(
                f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree in (B, G, T)"
            )
        if k.dtype != v.dtype:
            raise TypeError(
                f"k ({k.dtype}) and v ({v.dtype}) must share a dtype; cast the model once "
                "(model.to(dtype)) instead of mixing precisions"
            )
        if layer_idx == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
            return k, v
        if not 0 <= layer_idx < len(self.keys):
            raise ValueError(
                f"layer_idx {layer_idx} is out of order: the cache holds {len(self.keys)} "
                f"layers, so the next new layer must be {len(self.keys)}"
            )
        old_k = self.keys[layer_idx]
        if old_k.shape[:2] != k.shape[:2] or old_k.shape[3] != k.shape[3]:
            raise ValueError(
                f"layer {layer_idx}: new k {tuple(k.shape)} does not match cached "
                f"{tuple(old_k.shape)} in (B, G, ., D)"
            )
        if old_k.dtype != k.dtype or old_k.device != k.device:
            raise TypeError(
                f"layer {layer_idx}: new k/v are {k.dtype} on {k.device} but the cache holds "
                f"{old_k.dtype} on {old_k.device}; a cache never converts (torch.cat would "
                "silently promote): start a new cache after model.to(...)"
            )
        self.keys[layer_idx] = torch.cat([old_k, k], dim=2)  # (B, G, S, D)
        self.values[layer_idx] = torch.cat([self.values[layer_idx], v], dim=2)  # (B, G, S, Dv)
        return self.keys[layer_idx], self.values[layer_idx]

    def length(self, layer_idx: int = 0) -> int:
        """Cached sequence length of a layer (0 if the layer has not been filled yet)."""
        if layer_idx >= len(self.keys):
            return 0
        return self.keys[layer_idx].shape[2]

    def nbytes(self) -> int:
        """Bytes held by every cached key and value tensor."""
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def reset(self) -> None:
        """Empty the cache."""
        self.keys.clear()
        self.values.clear()

    def __repr__(self) -> str:
        return f"KVCache(layers={len(self)}, length={self.length()}, nbytes={self.nbytes()})"
