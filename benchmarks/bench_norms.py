"""LayerNorm vs RMSNorm: our modules against torch's, and the readable formula against the fused
kernel, forward pass, float32.

Run: ``python benchmarks/bench_norms.py [--shape 8 1024 1024] [--device cpu|cuda] [--quick]``.
Ratios > 1 mean ours (or the eager formula) is slower.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `llmviz` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks._harness import bench_parser, compare, header
from llmviz.norm import LayerNorm, RMSNorm


def main(argv: list[str] | None = None) -> list:
    parser = bench_parser(__doc__, sizes={}, repeats=7, device=True,
                          quick={"shape": [2, 16, 32]})
    parser.add_argument("--shape", type=int, nargs=3, default=[8, 1024, 1024], metavar=("B", "T", "C"))
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = parser.parse_args(argv)
    B, T, C = args.shape
    dev, dtype = torch.device(args.device), getattr(torch, args.dtype)
    x = torch.randn(B, T, C, device=dev, dtype=dtype)

    ln, rms = LayerNorm(C).to(dev, dtype), RMSNorm(C).to(dev, dtype)
    ln_eager, rms_eager = LayerNorm(C, fused=False).to(dev, dtype), RMSNorm(C, fused=False).to(dev, dtype)
    t_ln, t_rms = torch.nn.LayerNorm(C).to(dev, dtype), torch.nn.RMSNorm(C).to(dev, dtype)

    print(header(f"norms forward, x {tuple(x.shape)} {args.dtype} on {dev}, "
                 f"{args.threads} thread(s) while timing"))
    pairs = [  # (what, ours, peer, peer's name)
        ("LayerNorm: ours (fused) / torch.nn", ln, t_ln, "torch.nn.LayerNorm"),
        ("RMSNorm: ours (fused) / torch.nn", rms, t_rms, "torch.nn.RMSNorm"),
        ("LayerNorm: eager formula / fused", ln_eager, ln, "fused"),
        ("RMSNorm: eager formula / fused", rms_eager, rms, "fused"),
        ("RMSNorm / LayerNorm (both fused)", rms, ln, "LayerNorm"),
        ("RMSNorm / LayerNorm (both eager)", rms_eager, ln_eager, "LayerNorm"),
    ]
    rows = [compare(name, lambda m=ours: m(x), lambda m=peer: m(x), peer_name=peer_name,
                    repeats=args.repeats, threads=args.threads)
            for name, ours, peer, peer_name in pairs]
    for r in rows:
        print(r)
    return rows


if __name__ == "__main__":
    main()
