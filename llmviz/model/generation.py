"""Generation: extend a prompt token by token, with or without the KV cache.

The prompt runs once; then each step feeds only the newest token through the cache (O(S) per
step instead of re-running the prefix). Sampling rules live in :mod:`llmviz.model.sampling`.

Shape letters: B batch, T prompt length, V vocabulary.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .._checks import check_positive_int, check_tensor
from ..attention.kv_cache import KVCache
from .sampling import sample

__all__ = ["generate"]


@torch.no_grad()
def generate(
    model: nn.Module,
    input_ids: torch.Tensor,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    sampler: Callable[[torch.Tensor], torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """Extend ``input_ids`` ``(B, T)`` by ``max_new_tokens`` tokens; returns ``(B, T + new)``.

    With ``use_cache`` the prompt is run once and then one token per step through the KV cache
    (each step costs O(S) instead of re-running the whole prefix); without it every step
    re-runs the full sequence. Both give the same tokens (tested).

    Args:
        model: a :class:`DecoderLM` (anything whose forward takes ``cache=`` and returns .logits).
        input_ids: the prompt.
        max_new_tokens: number of tokens to add (>= 0).
        temperature, top_k, top_p, min_p: see :func:`llmviz.sampling.sample`;
            ``temperature=0`` is greedy.
        sampler: optional ``logits (B, V) -> ids (B,)`` replacing the built-in sampling.
        generator: a seeded ``torch.Generator`` for reproducible draws.
        use_cache: decode with a KV cache.
    """
    check_tensor(input_ids, "input_ids", ndim=2)
    check_positive_int(max_new_tokens, "max_new_tokens", allow_zero=True)
    limit = getattr(getattr(model, "config", None), "max_seq_len", None)
    uses_table = getattr(getattr(model, "config", None), "position", None) == "learned"
    if uses_table and input_ids.shape[1] + max_new_tokens > limit:
        raise ValueError(
            f"prompt ({input_ids.shape[1]}) + max_new_tokens ({max_new_tokens}) exceeds "
            f"max_seq_len ({limit}) of the learned position table"
        )

    def pick(logits: torch.Tensor) -> torch.Tensor:
        if sampler is not None:
            return sampler(logits)
        return sample(logits, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                      generator=generator)

    was_training = model.training
    model.eval()
    try:
        out = input_ids
        cache = KVCache() if use_cache else None
        step_input = input_ids
        for _ in range(max_new_tokens):
            logits = model(step_input if use_cache else out, cache=cache).logits[:, -1]  # (B, V)
            nxt = pick(logits.float()).to(out.device)  # (B,)
            out = torch.cat([out, nxt[:, None]], dim=1)
            step_input = nxt[:, None]
    finally:
        model.train(was_training)
    return out
