"""How to run a chapter's seeds: the wall time of each strategy for the same seeded runs.

Each run trains a toy Llama (``preset("llama2")``, the chapters' size) for ``--steps`` AdamW
steps on random tokens, on ``lv.device()``. Strategies timed, on the same seeds:

* ``serial``: :func:`llmviz.evidence.run_seeds` with ``strategy="serial"`` (what ``"auto"``
  does when a GPU is present);
* ``fork``: worker processes per core (what ``"auto"`` does on a CPU-only Linux machine;
  CPU only: a forked child cannot use CUDA);
* ``spawn``: fresh worker processes (their start, torch import and CUDA context included);
* ``streams`` (GPU only, for comparison; not a library strategy): one thread and one CUDA
  stream per seed, each run on its own ``torch.Generator``; the library does not offer it
  because a chapter's run seeds torch's *global* generator, which threads would share.

Every strategy must return the same losses (checked, except ``streams``, whose runs draw from
their own generators). Run: ``python -m benchmarks.bench_seeds [--seeds 3] [--steps 30]
[--repeats 2] [--device cpu|cuda] [--quick]``. Prints one line per strategy: median seconds
over the rounds and the ratio to ``serial`` (< 1: faster than serial).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `llmviz` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks._harness import bench_parser, header
from llmviz.evidence import run_seeds
from llmviz.model import DecoderLM, preset

class _Run:
    """One seeded training run; a picklable callable so that ``spawn`` can send it."""

    def __init__(self, steps: int, batch: int, seq: int, device: str) -> None:
        self.steps, self.batch, self.seq, self.device = steps, batch, seq, device

    def __call__(self, seed: int, generator: torch.Generator | None = None) -> dict:
        dev = torch.device(self.device)
        if generator is None:
            torch.manual_seed(seed)
        config = preset("llama2")
        model = DecoderLM(config).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        gen = generator or torch.Generator(device=dev).manual_seed(seed)
        for _ in range(self.steps):
            ids = torch.randint(0, config.vocab_size, (self.batch, self.seq), device=dev,
                                generator=gen)
            loss = model(ids, labels=ids).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return {"loss": loss.item()}


def _streams(run: _Run, seeds: list[int]) -> dict[int, dict]:
    out: dict[int, dict] = {}

    def one(seed: int) -> None:
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            gen = torch.Generator(device="cuda").manual_seed(seed)
            out[seed] = run(seed, generator=gen)
        stream.synchronize()

    workers = [threading.Thread(target=one, args=(s,)) for s in seeds]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return out


def _timed(fn) -> tuple[float, object]:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = bench_parser(__doc__, device=True, repeats=2,
                          sizes=dict(seeds=(3, 2), steps=(30, 2), batch=(8, 2), seq=(64, 8)))
    args = parser.parse_args(argv)
    run = _Run(args.steps, args.batch, args.seq, args.device)
    seeds = list(range(args.seeds))
    gpu = torch.device(args.device).type == "cuda"
    strategies = {"serial": lambda: run_seeds(run, seeds, strategy="serial"),
                  "spawn": lambda: run_seeds(run, seeds, processes=len(seeds), strategy="spawn")}
    if not gpu and sys.platform.startswith("linux"):
        strategies["fork"] = lambda: run_seeds(run, seeds, processes=len(seeds), strategy="fork")
    if gpu:
        strategies["streams"] = lambda: _streams(run, seeds)
    name = torch.cuda.get_device_name() if gpu else "CPU"
    print(header(f"seeds runner: {len(seeds)} seeds x {args.steps} steps, toy llama2, "
                 f"B={args.batch}, T={args.seq}, on {args.device} ({name})"))
    times: dict[str, list[float]] = {k: [] for k in strategies}
    losses: dict[str, list[float]] = {}
    for _ in range(args.repeats):  # interleaved rounds
        for key, fn in strategies.items():
            seconds, result = _timed(fn)
            times[key].append(seconds)
            res = dict(result.items()) if hasattr(result, "items") else result
            losses[key] = [round(res[s]["loss"], 5) for s in seeds]
    for key in ("spawn", "fork"):
        if key in losses and losses[key] != losses["serial"]:
            raise AssertionError(f"{key} gave losses {losses[key]}, serial {losses['serial']}")
    medians = {k: statistics.median(v) for k, v in times.items()}
    for key, sec in medians.items():
        print(f"{key:8s} {sec:8.2f} s   ratio to serial {sec / medians['serial']:.2f}")
    return medians


if __name__ == "__main__":
    main()
