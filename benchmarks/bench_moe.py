"""A mixture-of-experts layer through llmviz against Hugging Face sparse MoE blocks holding the
same weights: forward + backward at d=256, 8 experts, top-2, B=8, T=512 (target ratio <= 1.0).

Peers: ``MixtralSparseMoeBlock`` and ``Qwen3MoeSparseMoeBlock`` (``norm_topk_prob=False``), each
in transformers' eager experts loop (what a block built on its own runs) and in its
``grouped_mm`` experts implementation (what a model loaded with ``from_pretrained`` picks by
default when torch has ``grouped_mm``). The llmviz layer is built from the block with
:func:`llmviz.moe.moe_from_hf`; before timing, both sides must give the same output, or the
script stops. Ratios are llmviz / HF (< 1: llmviz is faster), the median of interleaved rounds
with a 95% interval.

Run: ``python -m benchmarks.bench_moe [--threads 1] [--repeats 5] [--d-expert 512] [--device cpu|cuda]
[--quick]`` (default device: CUDA when present).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `llmviz` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import transformers
from transformers.models.mixtral.modeling_mixtral import MixtralConfig, MixtralSparseMoeBlock
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeConfig, Qwen3MoeSparseMoeBlock

from benchmarks._harness import bench_parser, compare, header
from llmviz.moe import moe_from_hf


def _blocks(kind: str, d: int, f: int, experts: int, k: int) -> dict[str, torch.nn.Module]:
    """The same random weights in an eager block and a grouped_mm block."""
    if kind == "mixtral":
        cfg = MixtralConfig(hidden_size=d, intermediate_size=f, num_local_experts=experts,
                            num_experts_per_tok=k)
        make = MixtralSparseMoeBlock
    else:
        cfg = Qwen3MoeConfig(hidden_size=d, moe_intermediate_size=f, num_experts=experts,
                             num_experts_per_tok=k, norm_topk_prob=False)
        make = Qwen3MoeSparseMoeBlock
    torch.manual_seed(0)
    eager = make(cfg)
    with torch.no_grad():
        for p in eager.parameters():
            p.normal_(0.0, 0.05)
    grouped_cfg = copy.deepcopy(cfg)
    grouped_cfg._experts_implementation = "grouped_mm"
    grouped = make(grouped_cfg)
    grouped.load_state_dict(eager.state_dict())
    cfg._experts_implementation = "eager"
    return {"eager": eager.train(), "grouped_mm": grouped.train()}


def main(argv: list[str] | None = None) -> list:
    parser = bench_parser(__doc__, threads=[1], device=True, sizes=dict(
        batch=(8, 2), seq=(512, 16), d_model=(256, 32), d_expert=(512, 16), experts=(8, 4),
        top_k=(2, 2)))
    args = parser.parse_args(argv)
    transformers.logging.set_verbosity_error()
    torch.manual_seed(1)
    dev = torch.device(args.device)
    x = torch.randn(args.batch, args.seq, args.d_model).to(dev)

    def step(module: torch.nn.Module) -> None:
        # same loss on both sides, gradients into the input and every weight
        module.zero_grad(set_to_none=True)
        inp = x.detach().requires_grad_(True)
        module(inp).pow(2).mean().backward()

    rows = []
    for kind in ("mixtral", "qwen3_moe"):
        peers = {k: m.to(dev) for k, m in _blocks(kind, args.d_model, args.d_expert, args.experts,
                                                  args.top_k).items()}
        ours = moe_from_hf(peers["eager"]).train()
        with torch.no_grad():
            want = peers["eager"](x)
            diff = max((ours(x) - want).abs().max().item(),
                       (peers["grouped_mm"](x) - want).abs().max().item())
        if diff > 1e-4:
            raise SystemExit(f"llmviz and HF {kind} disagree: max difference {diff:.2e}")
        print(header(f"MoE layer d={args.d_model}, {args.experts} experts of width {args.d_expert}, "
                     f"top-{args.top_k}, B={args.batch}, T={args.seq}, float32, {dev.type}, vs HF {kind} "
                     f"block; max output difference {diff:.1e}"))
        for impl, peer in peers.items():
            for threads in args.threads:
                n = None if threads == 0 else threads
                rows.append(compare(
                    f"{kind} forward + backward, HF experts '{impl}'",
                    lambda: step(ours), lambda p=peer: step(p), ours_name="llmviz",
                    peer_name="HF", repeats=args.repeats, warmup=2, threads=n, inference=False))
                print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    main()
