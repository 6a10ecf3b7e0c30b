"""One decode step of multi-head latent attention at a 4k-token cache: the absorbed form against
the naive form, with the cache bytes each needs.

Three ways to take the step (the same output, checked before timing):

* **absorbed**: attention runs on the cached latents (``W_uk`` folded into the query, ``W_uv``
  applied after averaging); cache = latent + rope key per token;
* **naive**: the same latent cache, decompressed into every head's keys and values at every
  step (``kv_b_proj`` over all S cached tokens), then ordinary attention;
* **expanded cache**: keys and values decompressed once and cached per head (what a plain KV
  cache of this layer would hold), then ordinary attention: no decompression per step, but
  ``H (dn + dr + dv)`` numbers per token instead of ``r + dr``.

Every path appends the new token to its cache with ``torch.cat`` (as llmviz's ``KVCache`` and
Hugging Face's ``DynamicCache`` do), so each step also copies its whole cache: the expanded
path's time includes copying its much larger cache, which a preallocated cache would avoid.

Sizes default to DeepSeek-V2/V3's per-head dims (r=512, dn=128, dr=64, dv=128) with 16 heads and
d_model 1024. Ratios < 1 mean the first-named is faster.

Run: ``python -m benchmarks.bench_mla [--cache 4096] [--heads 16] [--threads 1] [--repeats 5]
[--device cpu|cuda] [--quick]`` (default device: CUDA when present).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `llmviz` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks._harness import bench_parser, cache_snapshot, compare, header
from llmviz.attention import LatentCache, MultiHeadLatentAttention, scaled_dot_product_attention


def _expanded_step(m: MultiHeadLatentAttention, x: torch.Tensor, k_cache: torch.Tensor,
                   v_cache: torch.Tensor) -> torch.Tensor:
    """A decode step over per-head cached keys (B, H, S, dn+dr) and values (B, H, S, dv)."""
    B, T, _ = x.shape
    S = k_cache.shape[2]
    q_nope, q_rope = m.queries(x)
    c, k_rope = m.latents(x)
    pos = torch.arange(S, S + T, device=x.device)
    q_rope, k_rope = m.rope(q_rope, k_rope, pos, seq_len=S + T)
    kv = m.kv_b_proj(c).view(B, T, m.n_heads, -1).transpose(1, 2)  # the new token only
    k_nope, v = kv.split([m.qk_nope_head_dim, m.v_head_dim], dim=-1)
    k_new = torch.cat((k_nope, k_rope.expand(B, m.n_heads, T, m.qk_rope_head_dim)), dim=-1)
    k = torch.cat((k_cache, k_new), dim=2)
    v = torch.cat((v_cache, v), dim=2)
    out = scaled_dot_product_attention(torch.cat((q_nope, q_rope), -1), k, v, scale=m.scale,
                                       is_causal=True)
    return m.o_proj(out.transpose(1, 2).reshape(B, T, -1))


def main(argv: list[str] | None = None) -> list:
    parser = bench_parser(__doc__, device=True, sizes=dict(
        batch=(1, 1), cache=(4096, 64), d_model=(1024, 128), heads=(16, 2),
        kv_lora_rank=(512, 32), q_lora_rank=(384, 32)))
    args = parser.parse_args(argv)
    dev = torch.device(args.device)
    torch.manual_seed(0)
    m = MultiHeadLatentAttention(
        args.d_model, args.heads, kv_lora_rank=args.kv_lora_rank, q_lora_rank=args.q_lora_rank,
        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128).eval().to(dev)
    B, S = args.batch, args.cache
    prompt = (torch.randn(B, S, args.d_model) * 0.5).to(dev)
    x = (torch.randn(B, 1, args.d_model) * 0.5).to(dev)
    cache = LatentCache()
    with torch.no_grad():
        m(prompt, cache=cache, absorbed=True)  # fill the latent cache with S tokens
        c, k_rope = cache.latents[0], cache.rope_keys[0]  # (B, S, r), (B, S, dr)
        kv = m.kv_b_proj(c).view(B, S, m.n_heads, -1).transpose(1, 2)
        k_nope, v_cache = kv.split([m.qk_nope_head_dim, m.v_head_dim], dim=-1)
        k_cache = torch.cat((k_nope, k_rope[:, None].expand(B, m.n_heads, S, -1)), dim=-1)
        k_cache, v_cache = k_cache.contiguous(), v_cache.contiguous()

        absorbed = lambda: m(x, cache=cache_snapshot(cache), absorbed=True)  # noqa: E731
        naive = lambda: m(x, cache=cache_snapshot(cache), absorbed=False)  # noqa: E731
        expanded = lambda: _expanded_step(m, x, k_cache, v_cache)  # noqa: E731
        ref = naive()
        diff = max((absorbed() - ref).abs().max().item(), (expanded() - ref).abs().max().item())
    if diff > 1e-4:
        raise SystemExit(f"the three forms disagree: max difference {diff:.2e}")
    latent_bytes = cache.nbytes()
    expanded_bytes = (k_cache.numel() + v_cache.numel()) * k_cache.element_size()
    per_token = m.cache_bytes_per_token()
    print(header(
        f"MLA decode step, B={B}, cache {S} tokens, d_model={args.d_model}, H={args.heads}, "
        f"r={args.kv_lora_rank}, dn=128, dr=64, dv=128, float32, {dev.type}; max difference {diff:.1e}"))
    print(f"cache bytes (one layer): latent {latent_bytes / 2**20:.2f} MiB "
          f"({per_token['latent']} B/token), expanded keys+values {expanded_bytes / 2**20:.2f} MiB "
          f"({per_token['expanded']} B/token), ratio {expanded_bytes / latent_bytes:.1f}x")
    rows = [
        compare("decode step, absorbed vs naive (same latent cache)", absorbed, naive,
                ours_name="absorbed", peer_name="naive", threads=args.threads, repeats=args.repeats),
        compare("decode step, absorbed (latent cache) vs expanded per-head cache", absorbed, expanded,
                ours_name="absorbed", peer_name="expanded", threads=args.threads,
                repeats=args.repeats),
    ]
    for row in rows:
        print(row, flush=True)
    return rows


if __name__ == "__main__":
    main()
