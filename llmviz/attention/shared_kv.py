"""Attention whose keys and values can come from an earlier layer, with a weightless norm on the
values (Gemma 4).

Three departures from :class:`~llmviz.attention.module.MultiHeadAttention`, each optional:

* **value norm** (``value_norm_eps``): every value head is divided by its root mean square,
  ``v / sqrt(mean(v^2) + eps)`` over its D features, with no weight (:func:`head_rms`, computed
  in float32 or float64). Keys get the usual QK-norm; values get this one.
* **values from keys** (``values_from_keys``): no ``v_proj``; the values are the key projection
  before its norm and rotation (Gemma 4's ``attention_k_eq_v`` global layers), so
  ``v = head_rms(k_proj(x))`` while ``k = rope(k_norm(k_proj(x)))``.
* **shared keys and values** (``share`` with ``role``): a ``"store"`` layer leaves the keys and
  values it attends to (after the norms, the rotation and the cache) in a :class:`KVShare`
  under ``share_key``; a ``"reuse"`` layer has no ``k_proj``, ``v_proj`` or ``k_norm`` at all and
  attends with its own queries to what the last ``"store"`` layer of its key left there. Its
  cache holds nothing: Gemma 4's last ``num_kv_shared_layers`` layers add no KV cache.

Layers run in order within one forward, so a storing layer always writes before the layers
reading it. Shape letters: B batch, T query length, S key length, H query heads, G key/value
heads, D head dim, C model dim.
"""

from __future__ import annotations

import torch

from .._checks import check_choice, check_flags, check_hidden, check_int_in, check_positive
from ._checks import check_mask
from .functional import scaled_dot_product_attention
from .mask_kinds import Causal, Full
from .masks import combine_masks
from .module import MultiHeadAttention

__all__ = ["KVShare", "SharedKVAttention", "head_rms"]

ROLES = (None, "store", "reuse")


def head_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / sqrt(mean(x^2) + eps)`` over the last dimension, no weight, in float32 (float64
    input stays float64)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"head_rms takes a floating tensor, got {type(x).__name__}"
                        f"{'' if not isinstance(x, torch.Tensor) else ' of ' + str(x.dtype)}")
    check_positive(eps, "eps")
    f = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return (f * torch.pow(f.pow(2).mean(-1, keepdim=True) + eps, -0.5)).type_as(x)


class KVShare:
    """Keys and values a ``"store"`` layer leaves for the ``"reuse"`` layers of its key, one
    ``(k, v)`` pair of ``(B, G, S, D)`` tensors per key, replaced at every forward."""

    def __init__(self) -> None:
        self._kv: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def put(self, key: str, k: torch.Tensor, v: torch.Tensor) -> None:
        """Leave ``(k, v)`` for ``key``."""
        if not isinstance(key, str):
            raise TypeError(f"key must be a str naming the layers that share, got {type(key).__name__}")
        self._kv[key] = (k, v)

    def get(self, key: str, batch: int, queries: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``(k, v)`` of ``key``, checked against ``batch`` rows and ``queries`` new tokens."""
        if key not in self._kv:
            raise ValueError(f"no layer has stored keys and values under {key!r} in this forward; "
                             "a 'reuse' layer needs an earlier 'store' layer with the same share_key")
        k, v = self._kv[key]
        if k.shape[0] != batch or k.shape[2] < queries:
            raise ValueError(f"the keys stored under {key!r} are {tuple(k.shape)}, which does "
                             f"not cover a batch of {batch} with {queries} new tokens; the storing layer "
                             "saw another input")
        return k, v

    def clear(self) -> None:
        """Forget every stored pair."""
        self._kv.clear()


class SharedKVAttention(MultiHeadAttention):
    """:class:`~llmviz.attention.module.MultiHeadAttention` with a value norm, values taken from
    the keys, and keys/values shared between layers (module docstring).

    Args:
        d_model, n_heads: as for MultiHeadAttention; its keyword arguments too (``alibi`` and
            ``qk_norm_scope="all"`` excepted).
        value_norm_eps: epsilon of the weightless RMS norm of each value head; None: no norm.
        values_from_keys: values are the (unnormed, unrotated) key projection; no ``v_proj``.
        share: the :class:`KVShare` of the model (needed with a ``role``).
        role: None (keys and values of its own), ``"store"`` or ``"reuse"``.
        share_key: the name the storing and reusing layers of one kind share (Gemma 4: the layer
            type, ``"sliding_attention"`` or ``"full_attention"``).
    """

    def __init__(self, d_model: int, n_heads: int, *, value_norm_eps: float | None = None,
                 values_from_keys: bool = False, share: KVShare | None = None, role: str | None = None,
                 share_key: str = "", **kwargs) -> None:
        check_flags(values_from_keys=values_from_keys)
        check_choice(role, "role", ROLES)
        if value_norm_eps is not None:
            check_positive(value_norm_eps, "value_norm_eps")
        if role is not None and not isinstance(share, KVShare):
            raise TypeError(f"role={role!r} needs share=, the model's KVShare; got {type(share).__name__}")
        if not isinstance(share_key, str):
            raise TypeError(f"share_key must be a str naming the layers that share, got {type(share_key).__name__}")
        if kwargs.get("alibi") or kwargs.get("qk_norm_scope", "head") != "head":
            raise ValueError("SharedKVAttention takes no alibi and only qk_norm_scope='head'")
        super().__init__(d_model, n_heads, **kwargs)
        self.value_norm_eps = None if value_norm_eps is None else float(value_norm_eps)
        self.values_from_keys, self.role, self.share_key, self.share = values_from_keys, role, share_key, share
        if values_from_keys or role == "reuse":
            self.v_proj = None
        if role == "reuse":
            self.k_proj = self.k_norm = None

    @property
    def reuses_kv(self) -> bool:
        """Whether this layer attends to another layer's keys and values (and caches nothing)."""
        return self.role == "reuse"

    def _own_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, T, _ = x.shape
        G, D = self.n_kv_heads, self.head_dim
        k = self.k_proj(x).view(B, T, G, D)
        v = k if self.v_proj is None else self.v_proj(x).view(B, T, G, D)
        if self.k_norm is not None:
            k = self.k_norm(k)
        if self.value_norm_eps is not None:
            v = head_rms(v, self.value_norm_eps)
        return k.transpose(1, 2), v.transpose(1, 2)  # (B, G, T, D)

    def _rotate(self, q, k, positions, S):
        if self.rope is None:
            return q, k
        if hasattr(self.rope, "cos_sin"):
            return self.rope(q, k, positions, seq_len=S)
        return self.rope(q, k, positions)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None,
                score_bias: torch.Tensor | None = None, positions: torch.Tensor | None = None,
                cache=None, layer_idx: int = 0, return_weights: bool = False):
        """As :meth:`MultiHeadAttention.forward`; a ``"reuse"`` layer reads its keys and values
        from the share (and ``cache`` is left as it is)."""
        check_flags(return_weights=return_weights)
        check_int_in(layer_idx, "layer_idx", 0)
        check_hidden(x, self.d_model, self.q_proj.weight, "SharedKVAttention", ndim=3)
        B, T, _ = x.shape
        H, D = self.n_heads, self.head_dim
        q = self.q_proj(x).view(B, T, H, D)
        if self.q_norm is not None:
            q = self.q_norm(q)
        q = q.transpose(1, 2)  # (B, H, T, D)
        if self.role == "reuse":
            k, v = self.share.get(self.share_key, B, T)
            if positions is None:
                positions = torch.arange(k.shape[2] - T, k.shape[2], device=x.device)
            q, _ = self._rotate(q, q, positions, k.shape[2])
        else:
            k, v = self._own_kv(x)
            offset = cache.length(layer_idx) if cache is not None else 0
            if positions is None:
                positions = torch.arange(offset, offset + T, device=x.device)
            q, k = self._rotate(q, k, positions, offset + T)
            if cache is not None:
                k, v = cache.update(layer_idx, k, v)  # (B, G, S, D)
            if self.role == "store":
                self.share.put(self.share_key, k, v)
        S = k.shape[2]
        layout = self.layer_mask.simplify(S)
        is_causal = isinstance(layout, Causal)
        structural = None if is_causal or isinstance(layout, Full) else layout(T, S, device=x.device)
        if mask is not None:
            check_mask(mask, (B, H, T, S))
        result = scaled_dot_product_attention(
            q, k, v, mask=combine_masks(structural, mask), bias=score_bias, scale=self.scale,
            softcap=self.softcap, dropout_p=self.dropout if self.training else 0.0,
            return_weights=return_weights, is_causal=is_causal, sinks=self.sinks)
        out, weights = result if return_weights else (result, None)
        out = out.transpose(1, 2).reshape(B, T, H * D)
        if self.gate_proj is not None:
            out = out * torch.sigmoid(self.gate_proj(x))
        out = self.o_proj(out)
        return (out, weights) if return_weights else out

    def extra_repr(self) -> str:
        return (f"value_norm_eps={self.value_norm_eps}, values_from_keys={self.values_from_keys}, "
                f"role={self.role!r}, share_key={self.share_key!r}")
