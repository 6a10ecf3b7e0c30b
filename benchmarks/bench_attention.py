"""Attention timing against the reference implementations we must not be slower than.

(a) our fused path vs torch.nn.functional.scaled_dot_product_attention (target ratio <= 1.05):
    the wrapper's checks and mask handling must cost nothing measurable.
(b) our weights-returning reference path vs Hugging Face's eager Llama attention
    (``eager_attention_forward``; target ratio <= 1.0): both materialise the (B, H, T, S)
    weights; ours scales q instead of the scores and never copies k/v for GQA.

Run: ``python -m benchmarks.bench_attention`` (or ``python benchmarks/bench_attention.py``) (CPU; on a GPU it uses the GPU). Shapes:
B=4, H=8, T=S=1024, D=64, causal mask, float32.
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


def main(B: int = 4, H: int = 8, T: int = 1024, D: int = 64) -> list:
    dev = best_device()
    g = torch.Generator().manual_seed(0)
    results = []
    print(header(f"attention: B={B}, H={H}, T=S={T}, D={D}, float32, causal"))
    for G in (H, H // 4):  # MHA, then GQA with 4 query heads per kv head
        q = torch.randn(B, H, T, D, generator=g).to(dev)
        k = torch.randn(B, G, T, D, generator=g).to(dev)
        v = torch.randn(B, G, T, D, generator=g).to(dev)
        mask = causal_mask(T, device=dev)  # (T, S) bool
        additive = torch.zeros(T, T, device=dev).masked_fill(~mask, torch.finfo(torch.float32).min)[None, None]
        kind = "MHA" if G == H else f"GQA G={G}"
        scale = D ** -0.5
        results.append(compare(
            f"(a) fused {kind}",
            lambda: scaled_dot_product_attention(q, k, v, mask=mask, scale=scale),
            lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=G != H),
            peer_name="torch SDPA",
        ))
        module = _EagerModule(H // G)
        results.append(compare(
            f"(b) reference + weights {kind}",
            lambda: scaled_dot_product_attention(q, k, v, mask=mask, scale=scale, return_weights=True),
            lambda: eager_attention_forward(module, q, k, v, additive, scaling=scale),
            peer_name="HF eager",
        ))
        print(results[-2])
        print(results[-1])
    return results


if __name__ == "__main__":
    main()
