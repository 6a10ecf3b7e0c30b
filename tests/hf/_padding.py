"""The shared padding-and-cache check of the family tests: right padding matches transformers on
the real tokens, and decoding through the cache equals one full pass."""

from __future__ import annotations

import torch


def check_padding_and_cache(hf, ours, gen: torch.Generator, *, length: int = 12, real: int = 9,
                            prompt: int = 4, atol: float = 1e-5, cache_atol: float = 1e-5):
    """Two sequences of ``length`` tokens, the second padded after ``real``; then a prompt of
    ``prompt`` tokens and one token per step through ``ours.new_cache()``. Returns (ids, cache)."""
    x = torch.randint(3, 100, (2, length), generator=gen)
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, real:] = 0  # right padding
    with torch.no_grad():
        ref, got = hf(x, attention_mask=mask).logits, ours(x, attention_mask=mask).logits
        torch.testing.assert_close(got[0], ref[0], atol=atol, rtol=0)
        torch.testing.assert_close(got[1, :real], ref[1, :real], atol=atol, rtol=0)
        cache = ours.new_cache()
        steps = [ours(x[:, :prompt], cache=cache).logits]
        steps += [ours(x[:, t:t + 1], cache=cache).logits for t in range(prompt, length)]
        full = ours(x).logits
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=cache_atol, rtol=0)
    return x, cache
