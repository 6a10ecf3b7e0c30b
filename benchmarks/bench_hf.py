"""A small Llama through llmviz against Hugging Face ``LlamaForCausalLM`` holding the same weights.

(a) forward + backward of the loss at B=8, T=512 (target ratio <= 1.0);
(b) greedy decoding of 128 new tokens with the KV cache: :func:`llmviz.generate` against HF
    ``generate(do_sample=False)`` (target ratio <= 1.0).

The HF model (``attn_implementation="sdpa"``, float32) is built from a seeded config and its
weights are loaded into llmviz with :func:`llmviz.hf.from_hf`; before timing, both sides must
give the same logits and the same greedy tokens, or the script stops. Ratios are llmviz / HF
(< 1 means llmviz is faster), the median of interleaved rounds with a 95% interval, at one
thread and at torch's default thread count.

Run: ``python -m benchmarks.bench_hf [--threads 1 0] [--repeats 5] [--quick]`` (``0`` = torch's default).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `llmviz` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from benchmarks._harness import bench_parser, compare, header
from llmviz.hf import from_hf
from llmviz.model.generation import generate


def small_llama(vocab: int = 1000) -> LlamaForCausalLM:
    """d=256, 4 layers, 8 query heads sharing 2 kv heads (GQA), SwiGLU d_ff=688, float32."""
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024,
        rms_norm_eps=1e-5, tie_word_embeddings=False, attn_implementation="sdpa",
    )
    return LlamaForCausalLM(cfg).eval()


def _loss_backward(logits: torch.Tensor, ids: torch.Tensor) -> None:
    # next-token loss computed the same way on both sides, so only the models differ
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    loss.backward()


def main(argv: list[str] | None = None) -> list:
    parser = bench_parser(__doc__, threads=[1, 0], sizes=dict(
        batch=(8, 1), seq=(512, 16), prompt=(16, 4), new=(128, 4)))
    parser.add_argument("--skip", nargs="*", default=[], choices=["train", "generate"])
    args = parser.parse_args(argv)

    hf = small_llama()
    ours = from_hf(hf)
    ours.train(False)
    torch.manual_seed(1)
    ids = torch.randint(0, hf.config.vocab_size, (args.batch, args.seq))
    prompt = ids[:, : args.prompt]

    # same computation first: logits and greedy tokens
    with torch.no_grad():
        diff = (ours(ids).logits - hf(ids).logits).abs().max().item()
        a = generate(ours, prompt, max_new_tokens=args.new, temperature=0.0)
        b = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=args.new,
                        min_new_tokens=args.new, do_sample=False, pad_token_id=0)
    if diff > 1e-4 or not torch.equal(a, b):
        raise SystemExit(f"llmviz and HF disagree: max logit difference {diff:.2e}, "
                         f"tokens equal: {torch.equal(a, b)}")
    print(header(f"small Llama (C=256, 4 layers, H=8, G=2, V={hf.config.vocab_size}) "
                 f"vs HF LlamaForCausalLM (sdpa), float32; max logit difference {diff:.1e}, "
                 f"greedy tokens equal"))

    def ours_train() -> None:
        ours.zero_grad(set_to_none=True)
        _loss_backward(ours(ids).logits, ids)

    def hf_train() -> None:
        hf.zero_grad(set_to_none=True)
        _loss_backward(hf(ids).logits, ids)

    def ours_gen() -> torch.Tensor:
        return generate(ours, prompt, max_new_tokens=args.new, temperature=0.0)

    def hf_gen() -> torch.Tensor:
        return hf.generate(prompt, attention_mask=torch.ones_like(prompt),
                           max_new_tokens=args.new, min_new_tokens=args.new, do_sample=False,
                           pad_token_id=0)

    rows = []
    for threads in args.threads:
        n = None if threads == 0 else threads
        if "train" not in args.skip:
            rows.append(compare(f"forward + backward, B={args.batch}, T={args.seq}",
                                ours_train, hf_train, ours_name="llmviz", peer_name="HF",
                                repeats=args.repeats, warmup=2, threads=n, inference=False))
            print(rows[-1], flush=True)
        if "generate" not in args.skip:
            rows.append(compare(f"greedy generate, B={args.batch}, prompt {args.prompt}, "
                                f"{args.new} new tokens, KV cache", ours_gen, hf_gen,
                                ours_name="llmviz", peer_name="HF", repeats=args.repeats,
                                warmup=1, threads=n))
            print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    main()
