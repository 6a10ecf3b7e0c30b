"""Gated delta rule: the chunked form against the recurrent form, and against Qwen3-Next's torch
kernels in ``transformers`` on the same inputs; plus the state's bytes against a KV cache's.

Run: ``python benchmarks/bench_linear.py [--seq 2048] [--heads 4] [--dk 64] [--dv 64]
[--chunk 64] [--threads 1] [--device cpu|cuda] [--quick]``. Ratios < 1 mean the first-named is faster.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `llmviz` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks._harness import bench_parser, compare, header
from llmviz.attention.linear import gated_delta_rule, l2_normalize, state_bytes


def main(argv: list[str] | None = None) -> list:
    parser = bench_parser(__doc__, device=True, sizes=dict(
        batch=(1, 1), seq=(2048, 40), heads=(4, 2), dk=(64, 8), dv=(64, 8), chunk=(64, 16)))
    args = parser.parse_args(argv)
    B, H, T, Dk, Dv = args.batch, args.heads, args.seq, args.dk, args.dv
    dev = torch.device(args.device)
    g = torch.Generator(device="cpu").manual_seed(0)
    q = l2_normalize(torch.randn(B, H, T, Dk, generator=g)).to(dev)
    k = l2_normalize(torch.randn(B, H, T, Dk, generator=g)).to(dev)
    v = torch.randn(B, H, T, Dv, generator=g).to(dev)
    beta = torch.rand(B, H, T, generator=g).to(dev)
    decay = (-torch.rand(B, H, T, generator=g) * 0.1).to(dev)
    print(header(f"gated delta rule: B={B}, H={H}, T={T}, D_k={Dk}, D_v={Dv}, chunk={args.chunk}, "
                 f"float32"))
    chunked = lambda: gated_delta_rule(q, k, v, beta, decay, form="chunked",  # noqa: E731
                                       chunk_size=args.chunk)[0]
    recurrent = lambda: gated_delta_rule(q, k, v, beta, decay, form="recurrent")[0]  # noqa: E731
    err = (chunked() - recurrent()).abs().max().item()
    rows = [compare("chunked vs recurrent", chunked, recurrent, ours_name="chunked",
                    peer_name="recurrent", threads=args.threads, repeats=args.repeats)]
    print(f"{rows[-1]}\n  max |chunked - recurrent| = {err:.2e}")
    try:
        from transformers.models.qwen3_next.modeling_qwen3_next import torch_chunk_gated_delta_rule
    except ImportError:  # pragma: no cover - transformers is optional here
        print("transformers with Qwen3-Next not installed: no comparison with its torch kernel")
    else:
        bt = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731
        hq, hk, hv, hg, hb = bt(q), bt(k), bt(v), bt(decay), bt(beta)
        hf = lambda: torch_chunk_gated_delta_rule(hq, hk, hv, hg, hb,  # noqa: E731
                                                  chunk_size=args.chunk)[0]
        rows.append(compare("chunked: llmviz vs transformers (Qwen3-Next torch kernel)", chunked, hf,
                            ours_name="llmviz", peer_name="transformers", threads=args.threads,
                            repeats=args.repeats))
        print(rows[-1])
    state = state_bytes(H, Dk, Dv, bytes_per_value=2)
    cache = 2 * H * Dk * T * 2
    print(f"bf16 bytes per layer and sequence: state {state:,} (any T); a KV cache with {H} heads "
          f"of {Dk} at T={T}: {cache:,} ({cache / state:.1f}x)")
    return rows


if __name__ == "__main__":
    main()
