"""Attention timing against the reference implementations we must not be slower than.

(a) our fused causal path (``is_causal=True``) vs torch.nn.functional.scaled_dot_product_attention
    with ``is_causal=True``, the call a PyTorch user writes (target ratio <= 1.05): the wrapper's
    checks and mask handling must cost nothing measurable. (a') the same call given an explicit
    (T, S) causal mask, as llmviz did before, against the same peer: the price of the mask.
    (a'') one decode step (T = 1 against S cached keys), which needs no mask at all.
(b) our weights-returning reference path vs Hugging Face's eager Llama attention
    (``eager_attention_forward``; target ratio <= 1.0): both materialise the (B, H, T, S)
    weights; ours scales q instead of the scores and never copies k/v for GQA.

Run: ``python -m benchmarks.bench_attention`` (or ``python benchmarks/bench_attention.py``) (CPU; on a GPU it uses the GPU). Shapes:
B=4, H=8, T=S=1024, D=64, causal, float32, one CPU thread (``threads=1``; ``None`` keeps torch's).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import eager_attention_forward

from benchmarks._harness import compare, header
from llmviz.runtime import device as best_device
from llmviz.attention import scaled_dot_product_attention
from llmviz.attention.masks import causal_mask


class _EagerModule(torch.nn.Module):
    """What HF's eager attention reads from its module: the group count and training flag."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups = groups
        self.training = False


def main(B: int = 4, H: int = 8, T: int = 1024, D: int = 64, threads: int | None = 1) -> list:
    dev = best_device()
    g = torch.Generator().manual_seed(0)
    results = []
    print(header(f"attention: B={B}, H={H}, T=S={T}, D={D}, float32, causal, threads={threads}"))
    for G in (H, H // 4):  # MHA, then GQA with 4 query heads per kv head
        q = torch.randn(B, H, T, D, generator=g).to(dev)
        k = torch.randn(B, G, T, D, generator=g).to(dev)
        v = torch.randn(B, G, T, D, generator=g).to(dev)
        mask = causal_mask(T, device=dev)  # (T, S) bool
        additive = torch.zeros(T, T, device=dev).masked_fill(~mask, torch.finfo(torch.float32).min)[None, None]
        kind = "MHA" if G == H else f"GQA G={G}"
        scale = D ** -0.5
        gqa = G != H
        results.append(compare(
            f"(a) causal {kind}: llmviz is_causal vs torch is_causal",
            lambda: scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale),
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=gqa),
            peer_name="torch SDPA is_causal", threads=threads,
        ))
        results.append(compare(
            f"(a') causal {kind}: explicit (T, S) mask (the old path) vs torch is_causal",
            lambda: scaled_dot_product_attention(q, k, v, mask=mask, scale=scale),
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=gqa),
            peer_name="torch SDPA is_causal", threads=threads,
        ))
        q1 = q[:, :, -1:]
        results.append(compare(
            f"(a'') decode step T=1, S={T} {kind}: llmviz is_causal vs torch (no mask)",
            lambda: scaled_dot_product_attention(q1, k, v, is_causal=True, scale=scale),
            lambda: F.scaled_dot_product_attention(q1, k, v, scale=scale, enable_gqa=gqa),
            peer_name="torch SDPA", threads=threads,
        ))
        print(results[-3])
        print(results[-2])
        module = _EagerModule(H // G)
        results.append(compare(
            f"(b) reference + weights {kind}",
            lambda: scaled_dot_product_attention(q, k, v, mask=mask, scale=scale, return_weights=True),
            lambda: eager_attention_forward(module, q, k, v, additive, scaling=scale),
            peer_name="HF eager", threads=threads,
        ))
        print(results[-2])
        print(results[-1])
    return results


if __name__ == "__main__":
    main()
