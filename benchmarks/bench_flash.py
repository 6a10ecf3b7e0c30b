"""FlashAttention's training side and two decoding tricks, timed as ratios (median of
interleaved rounds; ratio < 1: the first-named is faster).

(a) forward + backward of :func:`llmviz.attention.flash.flash_attention` (tiles in Python, the
    backward pass recomputes the weights from the saved row log-sum-exp) against autograd
    through the weights-returning reference path, which saves the (T, S) weights; also the bytes
    each saves for the backward pass.
(b) one decoding step (T = 1) of MQA over a long cache, split into ``--splits`` key chunks and
    merged (:func:`split_kv_decode`), against the same code with one chunk: the price or gain
    of splitting alone.
(c) the same step with the query heads packed as rows of the single kv head and one call of
    torch's fused kernel (:func:`packed_gqa_attention`), against that kernel per head
    (``enable_gqa=True``).

Every pair is checked equal before it is timed. Run: ``python -m benchmarks.bench_flash
[--seq 2048] [--cache 8192] [--splits 8] [--threads 1] [--repeats 5] [--device cpu|cuda]
[--quick]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `llmviz` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.nn.functional as F

from benchmarks._harness import bench_parser, compare, header
from llmviz.attention import scaled_dot_product_attention
from llmviz.attention.flash import (
    flash_attention,
    packed_gqa_attention,
    saved_tensor_bytes,
    split_kv_decode,
)


def _train_step(fn, q, k, v, dout):
    """Forward and backward of ``fn`` on fresh leaves; returns the gradients."""
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    fn(*leaves).backward(dout)
    return [t.grad for t in leaves]


def main(argv: list[str] | None = None) -> list:
    parser = bench_parser(__doc__, device=True, sizes=dict(
        seq=(2048, 64), block=(256, 16), cache=(8192, 64), splits=(8, 4), heads=(32, 4)))
    args = parser.parse_args(argv)
    dev = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    B, H, D, T = 1, 8, 64, args.seq
    q, k, v, dout = (torch.randn(B, H, T, D, generator=g).to(dev) for _ in range(4))
    flash = lambda *a: flash_attention(*a, causal=True, block_q=args.block, block_k=args.block)  # noqa: E731
    naive = lambda *a: scaled_dot_product_attention(*a, is_causal=True, fused=False, return_weights=True)[0]  # noqa: E731
    diff = max((a - b).abs().max().item() for a, b in zip(_train_step(flash, q, k, v, dout),
                                                         _train_step(naive, q, k, v, dout)))
    if diff > 1e-3:
        raise SystemExit(f"flash and autograd gradients disagree: max difference {diff:.2e}")
    saved = {name: saved_tensor_bytes(lambda fn=fn: fn(*[t.detach().requires_grad_() for t in (q, k, v)]))
             for name, fn in (("flash", flash), ("naive", naive))}
    print(header(f"flash attention and decoding, B={B}, H={H}, T={T}, D={D}, block {args.block}, "
                 f"float32, {dev.type}; max gradient difference {diff:.1e}"))
    print(f"saved for backward: flash {saved['flash'] / 2**20:.2f} MiB, naive autograd "
          f"{saved['naive'] / 2**20:.2f} MiB (ratio {saved['flash'] / saved['naive']:.3f})")
    opts = dict(threads=args.threads, repeats=args.repeats)
    rows = [compare(f"(a) causal forward + backward, T={T}: flash (recompute) vs autograd",
                    lambda: _train_step(flash, q, k, v, dout), lambda: _train_step(naive, q, k, v, dout),
                    ours_name="flash", peer_name="autograd", inference=False, **opts)]
    Hd, S = args.heads, args.cache
    qd = torch.randn(1, Hd, 1, 128, generator=g).to(dev)
    kd, vd = (torch.randn(1, 1, S, 128, generator=g).to(dev) for _ in range(2))
    split = lambda: split_kv_decode(qd, kd, vd, n_splits=args.splits)  # noqa: E731
    whole = lambda: split_kv_decode(qd, kd, vd, n_splits=1)  # noqa: E731
    packed = lambda: packed_gqa_attention(qd, kd, vd)  # noqa: E731
    per_head = lambda: F.scaled_dot_product_attention(qd, kd, vd, enable_gqa=True)  # noqa: E731
    ref = per_head()
    diff = max((f() - ref).abs().max().item() for f in (split, whole, packed))
    if diff > 1e-4:
        raise SystemExit(f"decoding paths disagree: max difference {diff:.2e}")
    rows.append(compare(f"(b) MQA decode step, H={Hd}, S={S}: {args.splits} key chunks vs 1",
                        split, whole, ours_name=f"split x{args.splits}", peer_name="one chunk", **opts))
    rows.append(compare(f"(c) MQA decode step, H={Hd}, S={S}: heads packed as rows vs per head (fused)",
                        packed, per_head, ours_name="packed", peer_name="per head", **opts))
    for row in rows:
        print(row, flush=True)
    return rows


if __name__ == "__main__":
    main()
