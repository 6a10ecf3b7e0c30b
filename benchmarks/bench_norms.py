"""LayerNorm vs RMSNorm: our modules against torch's, and the readable formula against the fused
kernel, forward pass, float32.

Run: ``python benchmarks/bench_norms.py [--shape 8 1024 1024] [--device cpu|cuda]``.
Ratios > 1 mean ours (or the eager formula) is slower.
"""

from __future__ import annotations

import argparse

import torch

from llmviz.norm import LayerNorm, RMSNorm
from llmviz.training.bench import compare, header


def main(argv: list[str] | None = None) -> list:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shape", type=int, nargs=3, default=[8, 1024, 1024], metavar=("B", "T", "C"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads while timing")
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
