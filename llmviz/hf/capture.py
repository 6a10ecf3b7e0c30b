"""Capture the attention weights of a Hugging Face model, with its grouped-query layout.

:func:`capture_attention` runs the model once with ``output_attentions=True`` on the eager
attention path (fused kernels never form the weights) and returns an :class:`AttentionMaps`:
a plain list of per-layer ``(B, H, T, S)`` tensors, the format bertviz and the llmviz plots take,
which also says which query heads share a key/value head (GQA: ``H / G`` query heads read the
same keys, so their maps differ only through their queries).

Shape letters: B batch, T query length, S key length, H query heads, G key/value heads.
"""

from __future__ import annotations

from typing import Any

import torch

from .._checks import check_positive_int

__all__ = ["AttentionMaps", "capture_attention", "kv_groups"]


def kv_groups(n_heads: int, n_kv_heads: int) -> tuple[tuple[int, ...], ...]:
    """Query heads per key/value head: ``G`` tuples of ``H / G`` consecutive head indices.

    Hugging Face (and llmviz) repeat each kv head for a contiguous block of query heads:
    ``kv_groups(8, 2) == ((0, 1, 2, 3), (4, 5, 6, 7))``.
    """
    for name, value in (("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
        check_positive_int(value, name)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv_heads})")
    r = n_heads // n_kv_heads
    return tuple(tuple(range(g * r, (g + 1) * r)) for g in range(n_kv_heads))


class AttentionMaps(list):
    """Per-layer attention weights ``(B, H, T, S)``: a ``list`` with the GQA layout attached.

    Attributes:
        n_heads: H. n_kv_heads: G.
        groups: ``G`` tuples of the query heads sharing each kv head (:func:`kv_groups`).
        kv_head_of: tuple of length H, the kv head each query head reads.
    """

    def __init__(self, maps: list[torch.Tensor], *, n_heads: int, n_kv_heads: int) -> None:
        super().__init__(maps)
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.groups = kv_groups(n_heads, n_kv_heads)
        self.kv_head_of = tuple(h // (n_heads // n_kv_heads) for h in range(n_heads))

    def __repr__(self) -> str:
        shape = tuple(self[0].shape) if len(self) else ()
        return (f"AttentionMaps({len(self)} layers of {shape}, H={self.n_heads}, "
                f"G={self.n_kv_heads}, groups={self.groups})")


def _heads(config: Any) -> tuple[int, int]:
    n_heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None)
    if not isinstance(n_heads, int):
        raise TypeError(
            f"cannot tell the number of heads of {type(config).__name__}; it has neither "
            "num_attention_heads nor n_head"
        )
    return n_heads, getattr(config, "num_key_value_heads", None) or n_heads


@torch.no_grad()
def capture_attention(hf_model: Any, input_ids: torch.Tensor, **kwargs: Any) -> AttentionMaps:
    """Per-layer attention weights ``(B, H, T, S)`` of a Hugging Face model.

    Args:
        hf_model: a transformers model (e.g. ``LlamaForCausalLM``).
        input_ids: ``(B, T)`` integer token ids.
        **kwargs: passed to the model (e.g. ``attention_mask``); ``use_cache`` defaults to False.

    Returns:
        :class:`AttentionMaps`, a list with one ``(B, H, T, S)`` tensor per layer. Sliding-window
        layers give full ``S``-wide rows with zeros outside the window.

    The model runs on the eager attention implementation for the call and gets its previous
    one back afterwards.
    """
    if type(hf_model).__module__.startswith("llmviz."):
        raise TypeError(
            f"capture_attention reads Hugging Face models, got an llmviz {type(hf_model).__name__}; "
            "for an llmviz model call it with return_weights=True: model(ids, "
            "return_weights=True).weights is the same per-layer list of (B, H, T, S) weights"
        )
    config = getattr(hf_model, "config", None)
    if config is None or not callable(hf_model):
        raise TypeError(
            f"hf_model must be a Hugging Face model (with .config), got {type(hf_model).__name__}; "
            "for an llmviz model call model(ids, return_weights=True).weights"
        )
    if (not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2
            or input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool):
        got = (f"{tuple(input_ids.shape)} {input_ids.dtype}" if isinstance(input_ids, torch.Tensor)
               else type(input_ids).__name__)
        raise TypeError(
            f"input_ids must be a (B, T) integer tensor (a LongTensor), got {got}; e.g. ids[None] "
            "for one sequence, torch.tensor([ids]) for a Python list"
        )
    if getattr(config, "model_type", None) == "falcon":  # measured under transformers 5.24
        raise NotImplementedError(
            "transformers' Falcon computes an unmasked (bidirectional) softmax when asked for "
            "attention weights, so its maps are not those of its forward; take them from the loaded "
            "model instead: llmviz.hf.from_hf(model)(ids, return_weights=True).weights")
    previous = getattr(config, "_attn_implementation", None)
    switch = previous not in (None, "eager") and hasattr(hf_model, "set_attn_implementation")
    if switch:
        hf_model.set_attn_implementation("eager")
    kwargs.setdefault("use_cache", False)
    try:
        out = hf_model(input_ids, output_attentions=True, **kwargs)
    finally:
        if switch:
            hf_model.set_attn_implementation(previous)
    attn = getattr(out, "attentions", None)
    if not attn or any(a is None for a in attn):
        raise ValueError(
            "the model returned no attention weights; load it with attn_implementation='eager'"
        )
    n_heads, n_kv_heads = _heads(config)
    return AttentionMaps([a.detach() for a in attn], n_heads=n_heads, n_kv_heads=n_kv_heads)
