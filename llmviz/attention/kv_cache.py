"""Key/value cache for incremental decoding.

Shape letters: B batch, G kv heads, S cached length, T new tokens, D head dim.

At every decoding step a causal decoder only needs the keys and values of earlier tokens, and
those never change; caching them turns the per-step work from recomputing all ``S`` positions
into computing one. The cache holds, per layer, ``k`` and ``v`` of shape ``(B, G, S, D)``;
its size is ``2 * n_layers * G * D * S * B * bytes_per_element`` (only the kv heads ``G``
count, which is why GQA/MQA shrink it).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .._checks import check_choice, check_tensor
from ._checks import check_cache_layer

__all__ = ["KVCache", "SinkCache", "rope_key_shift"]


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
        self._states: dict[int, Any] = {}  # linear-attention layers' fixed-size states

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
        if check_cache_layer(layer_idx, len(self.keys)):
            self.keys.append(k)
            self.values.append(v)
            return k, v
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

    def linear_state(self, layer_idx: int):
        """The fixed-size state a linear-attention layer left here (None before its first call)."""
        return self._states.get(layer_idx)

    def set_linear_state(self, layer_idx: int, state, new_tokens: int) -> None:
        """Keep a linear-attention layer's state; it holds no keys or values.

        Its slot among the layers holds an empty ``(B, 0, S, 0)`` tensor: no memory, but
        :meth:`length` still counts the ``S`` tokens seen, so positions continue as with keys.
        """
        B = state.recurrent.shape[0]
        seen = self.length(layer_idx) + new_tokens
        empty = state.recurrent.new_empty(B, 0, seen, 0)
        if check_cache_layer(layer_idx, len(self.keys)):
            self.keys.append(empty)
            self.values.append(empty)
        else:
            self.keys[layer_idx] = self.values[layer_idx] = empty
        self._states[layer_idx] = state

    def length(self, layer_idx: int = 0) -> int:
        """Cached sequence length of a layer (0 if the layer has not been filled yet)."""
        if layer_idx >= len(self.keys):
            return 0
        return self.keys[layer_idx].shape[2]

    def nbytes(self) -> int:
        """Bytes held by every cached key and value tensor."""
        kv = sum(t.numel() * t.element_size() for t in self.keys + self.values)
        return kv + sum(st.nbytes() for st in self._states.values())

    def reset(self) -> None:
        """Empty the cache."""
        self.keys.clear()
        self.values.clear()
        self._states.clear()

    def __repr__(self) -> str:
        return f"KVCache(layers={len(self)}, length={self.length()}, nbytes={self.nbytes()})"


class SinkCache(KVCache):
    """A fixed-size cache: the first ``sink_tokens`` tokens and a rolling window (StreamingLLM).

    Xiao et al. (2023) found that a model decoding past its training length with only a
    window of recent keys falls apart once the first tokens leave the window, and that keeping
    those first few "sink" tokens (which many heads park their attention on) restores it.
    ``update`` returns the sinks, the last ``window`` cached tokens and the new ones, for this
    step's attention; then the cache trims itself back to ``sink_tokens + window`` tokens.

    Positions are the tokens' places *in the cache* (as in the paper): :meth:`length` is the
    number stored, so a model's next position never passes ``sink_tokens + window``. Keys that
    were rotated by RoPE before caching must then move when the window slides: pass
    ``rope_shift`` (e.g. :func:`rope_key_shift`), which turns a key written at position p into
    one at p - n when n tokens leave. Without it the kept keys keep the rotation they were
    written with (an ablation; right as it is for ALiBi and NoPE, whose keys hold no position).
    """

    def __init__(
        self,
        window: int,
        sink_tokens: int = 4,
        *,
        rope_shift: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
    ) -> None:
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive int (tokens kept besides the sinks); got {window!r}")
        if isinstance(sink_tokens, bool) or not isinstance(sink_tokens, int) or sink_tokens < 0:
            raise ValueError(f"sink_tokens must be an int >= 0; got {sink_tokens!r}")
        if rope_shift is not None and not callable(rope_shift):
            raise TypeError(f"rope_shift must be callable as rope_shift(k, delta); got "
                            f"{type(rope_shift).__name__}")
        self.window, self.sink_tokens, self.rope_shift = window, sink_tokens, rope_shift
        self.evicted: list[int] = []  # tokens dropped so far, per layer

    def update(self, layer_idx: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        full_k, full_v = super().update(layer_idx, k, v)  # (B, G, S + T, D): this step's keys
        if layer_idx == len(self.evicted):
            self.evicted.append(0)
        keep = self.sink_tokens + self.window
        drop = full_k.shape[2] - keep
        if drop > 0:
            s = self.sink_tokens
            win_k, win_v = full_k[:, :, s + drop:], full_v[:, :, s + drop:]
            if self.rope_shift is not None:
                win_k = self.rope_shift(win_k, -drop)
            self.keys[layer_idx] = torch.cat([full_k[:, :, :s], win_k], dim=2)
            self.values[layer_idx] = torch.cat([full_v[:, :, :s], win_v], dim=2)
            self.evicted[layer_idx] += drop
        return full_k, full_v

    def reset(self) -> None:
        super().reset()
        self.evicted.clear()

    def __repr__(self) -> str:
        return (f"SinkCache(sink_tokens={self.sink_tokens}, window={self.window}, layers={len(self)}, "
                f"length={self.length()}, evicted={self.evicted[:1]})")


def rope_key_shift(inv_freq: torch.Tensor, *, layout: str = "half") -> Callable[[torch.Tensor, int], torch.Tensor]:
    """``shift(k, delta)``: rotate RoPE-rotated keys by ``delta`` more positions.

    Rotations add up, ``R(p) R(delta) = R(p + delta)``, so moving a cached key from position p
    to p + delta needs no recomputation. ``inv_freq``: the model's ``(R/2,)`` frequencies, e.g.
    ``RotaryEmbedding.inv_freq`` (partial rotary: the first R features rotate).
    """
    from ..position.rope import LAYOUTS, apply_rotary, rope_cos_sin  # lazy: positions stay optional

    check_choice(layout, "layout", LAYOUTS)

    check_tensor(inv_freq, "inv_freq", ndim=1, floating=True)

    def shift(k: torch.Tensor, delta: int) -> torch.Tensor:
        pos = torch.full((k.shape[2],), float(delta), device=k.device)
        cos, sin = rope_cos_sin(pos, inv_freq.to(k.device), layout=layout)
        return apply_rotary(k, cos.to(k.dtype), sin.to(k.dtype), layout=layout)

    return shift
