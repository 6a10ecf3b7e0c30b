"""RoPE rotation: llmviz ``apply_rotary`` (cached cos/sin) against Hugging Face Llama's
``apply_rotary_pos_emb``, on the same q, k and the same cos/sin tables.

Run: ``python -m benchmarks.bench_rope`` (add ``--quick`` for one small shape). Prints one line
per shape with the ratio ours / HF and its interval (lower is better; target <= 1.0), timed
on one CPU thread.
"""

from __future__ import annotations

import argparse

import torch

from llmviz.position.rope import apply_rotary, rope_cos_sin, rope_frequencies
from llmviz.training.bench import compare, header


def _case(B: int, H: int, T: int, D: int, dtype: torch.dtype, device: torch.device):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    g = torch.Generator(device="cpu").manual_seed(0)
    q = torch.randn(B, H, T, D, generator=g).to(device=device, dtype=dtype)
    k = torch.randn(B, H, T, D, generator=g).to(device=device, dtype=dtype)
    inv_freq, _ = rope_frequencies(D, device=device)
    positions = torch.arange(T, device=device)[None].expand(B, T)  # (B, T), as HF passes them
    cos, sin = rope_cos_sin(positions, inv_freq, dtype=dtype)  # (B, T, D): the cached tables

    def ours():
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)

    def hf():
        return apply_rotary_pos_emb(q, k, cos, sin)

    oq, ok = ours()
    hq, hk = hf()
    torch.testing.assert_close(oq, hq)
    torch.testing.assert_close(ok, hk)
    name = f"B={B} H={H} T={T} D={D} {str(dtype).replace('torch.', '')}"
    return compare(name, ours, hf, peer_name="HF", threads=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one small shape only")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(header("RoPE: apply_rotary vs HF apply_rotary_pos_emb (q and k)"))
    shapes = [(1, 4, 128, 64)] if args.quick else [(4, 8, 1024, 64), (4, 8, 1024, 128)]
    dtypes = [torch.float32] + ([torch.bfloat16] if device.type == "cuda" else [])
    results = [_case(*s, dtype=dt, device=device) for s in shapes for dt in dtypes]
    for r in results:
        print(r)
    worst = max(results, key=lambda r: r.ratio.mean)
    print(f"# worst ratio {worst.ratio} ({worst.name}; target <= 1.0)")


if __name__ == "__main__":
    main()
