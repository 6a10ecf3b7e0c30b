"""Training throughput of a tiny model: plain ``train()`` against what attacks its overhead.

The model is chapter 9's (byte vocabulary, d=48, 2 layers, 4 heads, RoPE, LayerNorm, GELU MLP),
trained on the prose corpus at B=32, T=64. Every row times the SAME work on both sides
(``--models`` models x ``--steps`` steps of B x T tokens, or the same tokens in fewer, larger
batches), so the time ratio is the inverse of the tokens-per-second ratio; < 1: the alternative
is faster. The peer is always plain ``train()`` on one thread, one model after another.

* threads: the same ``train()`` calls on 2 threads;
* processes: the models split over 2 worker processes (one per core, 1 thread each), as
  ``llmviz.evidence.run_seeds`` runs seeds (CPU only);
* vmap: the models stacked into one (``torch.func.stack_module_state`` + ``functional_call``
  + ``vmap``), one AdamW over the stacked weights, gradient clipping per model;
* batch: the same tokens in batches 4x larger (a quarter of the steps);
* compile: ``train()`` on ``torch.compile(model)`` (compiling happens in the warm-up).

``--quality`` also trains ``--seeds`` seeds to the same number of tokens at B and 4B (peak
rates lr and 2 lr) and prints the held-out loss, paired by seed: what a larger batch costs per
token.

Run: ``python benchmarks/bench_train.py [--models 4] [--steps 12] [--batch 32] [--seq 64]
[--repeats 5] [--device cpu|cuda] [--no-compile] [--quality] [--quick]``.
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import sys
import warnings
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `llmviz` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch.func import functional_call, stack_module_state, vmap

from benchmarks._harness import bench_parser, compare, header
from llmviz.evidence import paired
from llmviz.model import DecoderLM
from llmviz.model.config import ModelConfig
from llmviz.runtime import threads
from llmviz.training import TrainConfig, evaluate_lengths, lr_at, train
from llmviz.training.data import ByteTokenizer, load_corpus, random_batches, train_val_split
from llmviz.training.losses import logits_of, masked_cross_entropy

ROWS = ("threads", "processes", "vmap", "batch", "compile")
_POOL_WORK: dict = {}  # what the worker processes train (set before the fork)


def model_config(width: int, layers: int, seq: int) -> ModelConfig:
    return ModelConfig(vocab_size=256, d_model=width, n_layers=layers, n_heads=4,
                       max_seq_len=8 * seq, norm="layer", ffn="mlp", position="rope")


def make_models(cfg: ModelConfig, n: int, device: torch.device) -> list[DecoderLM]:
    models = []
    for seed in range(n):
        torch.manual_seed(seed)
        models.append(DecoderLM(cfg).to(device))
    return models


def run_train(models, tokens, config: TrainConfig) -> None:
    for i, m in enumerate(models):
        train(m, tokens, config=TrainConfig(**{**vars(config), "seed": i}), progress=False)


class StackedTrainer:
    """N same-shaped models as one vmapped model: one forward, one backward, one AdamW."""

    def __init__(self, models, tokens, config: TrainConfig) -> None:
        self.params, self.buffers = stack_module_state(models)
        self.base = copy.deepcopy(models[0])
        self.tokens, self.config, self.n = tokens, config, len(models)
        self.device = next(models[0].parameters()).device
        self.gens = [torch.Generator().manual_seed(i) for i in range(self.n)]
        decay = [p for p in self.params.values() if p.ndim >= 3]  # matrices, stacked
        rest = [p for p in self.params.values() if p.ndim < 3]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                      {"params": rest, "weight_decay": 0.0}],
                                     lr=config.lr, betas=config.betas)
        self.losses: list[list[float]] = []  # per step, one loss per model
        self.forward = vmap(lambda p, b, x: logits_of(functional_call(self.base, (p, b), (x,))))

    def run(self) -> None:
        c = self.config
        for step in range(c.steps):
            for group in self.opt.param_groups:
                group["lr"] = lr_at(step, c)
            pairs = [random_batches(self.tokens, batch_size=c.batch_size, seq_len=c.seq_len,
                                    generator=g, device=self.device) for g in self.gens]
            x = torch.stack([p[0] for p in pairs])
            y = torch.stack([p[1] for p in pairs])
            with warnings.catch_warnings():  # vmap's per-op notes on its slower fallbacks
                warnings.filterwarnings("ignore", message="There is a performance drop")
                logits = self.forward(self.params, self.buffers, x)  # (N, B, T, V)
            losses = [masked_cross_entropy(logits[i], y[i]) for i in range(self.n)]
            self.opt.zero_grad(set_to_none=True)
            torch.stack(losses).sum().backward()
            grads = [p.grad for p in self.params.values()]
            norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads]).norm(dim=0)  # (N,)
            coef = (c.grad_clip / (norms + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(coef.view(-1, *[1] * (g.ndim - 1)))
            self.losses.append([float(v.detach()) for v in losses])  # train() reads each loss too
            self.opt.step()


def _pool_init() -> None:
    torch.set_num_threads(1)


def _pool_job(index: int) -> int:
    w = _POOL_WORK
    run_train(w["models"][index::2], w["tokens"], w["config"])
    return index


def held_out_loss(cfg, tokens, val, config: TrainConfig, seed: int, device) -> float:
    torch.manual_seed(seed)
    model = DecoderLM(cfg).to(device)
    train(model, tokens, config=TrainConfig(**{**vars(config), "seed": seed}), progress=False)
    return evaluate_lengths(model, val, config.seq_len, n_windows=64).loss[0]


def main(argv: list[str] | None = None) -> list:
    parser = bench_parser(__doc__, device=True, sizes=dict(
        models=(4, 2), steps=(12, 4), batch=(32, 4), seq=(64, 16), width=(48, 16),
        layers=(2, 1), quality_steps=(400, 8), seeds=(3, 2)))
    parser.add_argument("--rows", nargs="*", default=list(ROWS), choices=ROWS,
                        help="which alternatives to time (all by default)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile row")
    parser.add_argument("--quality", action="store_true",
                        help="also train to equal tokens at B and 4B and compare held-out loss")
    args = parser.parse_args(argv)
    dev = torch.device(args.device)
    cfg = model_config(args.width, args.layers, args.seq)
    tokens = ByteTokenizer().encode(load_corpus("prose"))
    train_tokens, val_tokens = train_val_split(tokens, 0.1)
    n, k, B, T = args.models, args.steps, args.batch, args.seq
    if k % 4:
        parser.error(f"--steps must be a multiple of 4 (the batch row runs k/4 steps of 4B), "
                     f"got {k}")
    base = TrainConfig(steps=k, warmup=1, batch_size=B, seq_len=T)
    big = TrainConfig(**{**vars(base), "steps": k // 4, "batch_size": 4 * B})  # same tokens
    work = n * k * B * T
    print(header(f"train(), {n} models x {k} steps x B={B} x T={T} ({work:,} tokens per call), "
                 f"d={args.width}, {args.layers} layers, float32, {dev}"))
    plain_models = make_models(cfg, n, dev)
    plain = lambda: run_train(plain_models, train_tokens, base)  # noqa: E731
    rows = []

    def row(name, ours, ours_name):
        c = compare(name, ours, plain, ours_name=ours_name, peer_name="train()", threads=1,
                    repeats=args.repeats, warmup=1, inference=False)
        rows.append(c)
        r = c.ratio
        rate = lambda s: work / s  # noqa: E731
        print(f"{c}\n  tokens/s: {ours_name} {rate(c.ours.median):,.0f}, train() "
              f"{rate(c.peer.median):,.0f}; speed-up {1 / r.mean:.2f}x "
              f"[{1 / r.high:.2f}, {1 / r.low:.2f}]")

    if dev.type == "cpu" and "threads" in args.rows:
        two = make_models(cfg, n, dev)

        def on_two_threads():
            with threads(2):
                run_train(two, train_tokens, base)

        row("threads: 2 vs 1", on_two_threads, "2 threads")
    if dev.type == "cpu" and "processes" in args.rows:
        _POOL_WORK.update(models=make_models(cfg, n, dev), tokens=train_tokens, config=base)
        with mp.get_context("fork").Pool(2, initializer=_pool_init) as pool:
            row("processes: 2 x 1 thread vs 1 x 1 thread",
                lambda: pool.map(_pool_job, [0, 1]), "2 processes")
    if "vmap" in args.rows:
        stacked = StackedTrainer(make_models(cfg, n, dev), train_tokens, base)
        if dev.type == "cuda":
            # torch's memory-efficient attention backward refuses vmap's batched layout on CUDA
            # ("LSE is not correctly aligned (strideH)", torch 2.11): the stacked models attend
            # through the math kernel, and the row's name says so.
            from torch.nn.attention import SDPBackend, sdpa_kernel

            def on_math():
                with sdpa_kernel(SDPBackend.MATH):
                    stacked.run()

            row(f"vmap: {n} models as one (math attention kernel; train() fused)", on_math, "vmap")
        else:
            row(f"vmap: {n} models as one", stacked.run, "vmap")
    if "batch" in args.rows:
        big_models = make_models(cfg, n, dev)
        row(f"batch: {4 * B} x {big.steps} steps vs {B} x {k}",
            lambda: run_train(big_models, train_tokens, big), f"B={4 * B}")
    if "compile" in args.rows and not args.no_compile:
        compiled = [torch.compile(m) for m in make_models(cfg, n, dev)]
        row("torch.compile(model) vs eager", lambda: run_train(compiled, train_tokens, base),
            "compiled")
    if args.quality:
        q = TrainConfig(steps=args.quality_steps, warmup=args.quality_steps // 10, batch_size=B,
                        seq_len=T, lr=3e-3)
        seeds = range(args.seeds)
        with threads(1):
            ref = [held_out_loss(cfg, train_tokens, val_tokens, q, s, dev) for s in seeds]
            print(f"held-out loss after {q.steps} steps at B={B}, lr {q.lr:g}: "
                  + ", ".join(f"{v:.3f}" for v in ref))
            for lr in (q.lr, 2 * q.lr):
                alt = TrainConfig(**{**vars(q), "steps": max(1, q.steps // 4),
                                     "warmup": max(1, q.warmup // 4), "batch_size": 4 * B,
                                     "lr": lr, "min_lr": lr / 10})
                got = [held_out_loss(cfg, train_tokens, val_tokens, alt, s, dev) for s in seeds]
                d = paired(got, ref)
                print(f"  same tokens at B={4 * B}, {alt.steps} steps, lr {lr:g}: "
                      + ", ".join(f"{v:.3f}" for v in got) + f"; minus B={B}: {d.format('.3f')}")
    return rows


if __name__ == "__main__":
    main()
