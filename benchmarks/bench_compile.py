"""torch.compile against eager for every preset: full forward and one KV-cache decode step.

The forward has no host reads (``tests/model/test_compile.py`` compiles each preset with
``fullgraph=True``), so inductor sees one graph per call. Ratios are compiled / eager: < 1
means compiling pays. Compile time is paid in the warm-up and not timed.

Run: ``python benchmarks/bench_compile.py [--presets llama2 gpt2] [--batch 4] [--seq 128]
[--threads 1] [--layers 2] [--width 64] [--quick]``. Toy presets (byte vocabulary) at the given width.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `llmviz` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks._harness import bench_parser, cache_snapshot, compare, header
from llmviz.model.lm import DecoderLM
from llmviz.model.presets import PRESETS, preset


def main(argv: list[str] | None = None) -> list:
    parser = bench_parser(__doc__, sizes=dict(batch=(4, 1), seq=(128, 16), layers=(2, 1),
                                              width=(64, 32)), quick={"presets": ["gpt2"]})
    parser.add_argument("--presets", nargs="*", default=sorted(PRESETS))
    args = parser.parse_args(argv)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(header(f"torch.compile (inductor) vs eager: B={args.batch}, T={args.seq}, "
                 f"{args.layers} layers, C={args.width}, float32"))
    rows = []
    for name in args.presets:
        # Every preset runs the same DecoderLM.forward: without a reset, dynamo counts the
        # presets' graphs against one recompile limit (8) and fullgraph=True then fails.
        torch._dynamo.reset()
        torch.manual_seed(0)
        cfg = preset(name, n_layers=args.layers, d_model=args.width)
        model = DecoderLM(cfg).to(dev).eval()
        compiled = torch.compile(model, fullgraph=True)
        ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device=dev)
        step = ids[:, -1:]
        with torch.no_grad():
            prefix = model.new_cache()
            model(ids[:, :-1], cache=prefix)
        rows.append(compare(
            f"{name}: full forward", lambda: compiled(ids).logits, lambda: model(ids).logits,
            ours_name="compiled", peer_name="eager", threads=args.threads, repeats=args.repeats,
        ))
        print(rows[-1])
        rows.append(compare(
            f"{name}: decode step (S={args.seq})",
            lambda: compiled(step, cache=cache_snapshot(prefix)).logits,
            lambda: model(step, cache=cache_snapshot(prefix)).logits,
            ours_name="compiled", peer_name="eager", threads=args.threads, repeats=args.repeats,
        ))
        print(rows[-1])
    return rows


if __name__ == "__main__":
    main()
