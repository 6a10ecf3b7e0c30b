"""RoPE rotation: llmviz ``apply_rotary`` (cached cos/sin) against Hugging Face Llama's
``apply_rotary_pos_emb``, on the same q, k and the same cos/sin tables.

Run: ``python -m benchmarks.bench_rope`` (add ``--quick`` for one small shape and two rounds; ``--threads``,
``--repeats`` as in every benchmark). Prints one line per shape with the ratio ours / HF and
its interval (lower is better; target <= 1.0), timed on one CPU thread.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `llmviz` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks._harness import bench_parser, compare, header
from llmviz.position.rope import apply_rotary, rope_cos_sin, rope_frequencies


def _case(B: int, H: int, T: int, D: int, dtype: torch.dtype, device: torch.device, *,
          threads: int, repeats: int):
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
    return compare(name, ours, hf, peer_name="HF", threads=threads, repeats=repeats)


def main(argv: list[str] | None = None) -> None:
    args = bench_parser(__doc__, sizes={}, repeats=7).parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(header("RoPE: apply_rotary vs HF apply_rotary_pos_emb (q and k)"))
    shapes = [(1, 4, 128, 64)] if args.quick else [(4, 8, 1024, 64), (4, 8, 1024, 128)]
    dtypes = [torch.float32] + ([torch.bfloat16] if device.type == "cuda" else [])
    results = [_case(*s, dtype=dt, device=device, threads=args.threads, repeats=args.repeats)
               for s in shapes for dt in dtypes]
    for r in results:
        print(r)
    worst = max(results, key=lambda r: r.ratio.mean)
    print(f"# worst ratio {worst.ratio} ({worst.name}; target <= 1.0)")


if __name__ == "__main__":
    main()
