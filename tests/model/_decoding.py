"""Shared by the model tests: cached decoding checked against the full forward."""

from __future__ import annotations

import torch

from llmviz.model.lm import DecoderLM


def assert_cached_decoding_equals_full_forward(
    model: DecoderLM, ids: torch.Tensor, *, prefill: int, rtol: float = 1e-9, atol: float = 1e-9
) -> None:
    """Prefill ``ids[:, :prefill]`` into a new cache, then feed the rest one token at a time.

    The logits of the prefill and of every step, joined along T, must equal one full forward
    of ``ids`` (B, T), and the cache must end up holding all T positions.
    """
    T = ids.shape[1]
    assert 0 < prefill < T, f"prefill ({prefill}) must leave tokens to decode in T = {T}"
    with torch.no_grad():
        full = model(ids).logits
        cache = model.new_cache()
        steps = [model(ids[:, :prefill], cache=cache).logits]
        steps += [model(ids[:, t:t + 1], cache=cache).logits for t in range(prefill, T)]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=rtol, atol=atol)
    assert cache.length() == T
