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
    rows = [
        compare("LayerNorm: ours (fused) / torch.nn", lambda: ln(x), lambda: t_ln(x),
                peer_name="torch.nn.LayerNorm", repeats=args.repeats, threads=args.threads),
        compare("RMSNorm: ours (fused) / torch.nn", lambda: rms(x), lambda: t_rms(x),
                peer_name="torch.nn.RMSNorm", repeats=args.repeats, threads=args.threads),
        compare("LayerNorm: eager formula / fused", lambda: ln_eager(x), lambda: ln(x),
                peer_name="fused", repeats=args.repeats, threads=args.threads),
        compare("RMSNorm: eager formula / fused", lambda: rms_eager(x), lambda: rms(x),
                peer_name="fused", repeats=args.repeats, threads=args.threads),
        compare("RMSNorm / LayerNorm (both fused)", lambda: rms(x), lambda: ln(x),
                peer_name="LayerNorm", repeats=args.repeats, threads=args.threads),
        compare("RMSNorm / LayerNorm (both eager)", lambda: rms_eager(x), lambda: ln_eager(x),
                peer_name="LayerNorm", repeats=args.repeats, threads=args.threads),
    ]
    for r in rows:
        print(r)
    return rows


if __name__ == "__main__":
    main()
