"""Chapter 19's experiment: multi-query recall that only a lookup solves.

The task (:func:`~llmviz.training.recall.multi_query_recall`) states ``n_pairs`` key-value
pairs, then asks ``n_queries`` keys *drawn with replacement*: a key may be asked twice and
another never, so the answer never follows from the values already asked (the elimination
shortcut that solved the chapter's earlier four-pair task scores near its frequency floor here;
:func:`~llmviz.training.recall.no_recall_baseline` computes it on the evaluation set). Drawing
with replacement opens a shorter path instead: a repeated query's answer sits a few tokens back,
in the query half. :func:`copy_eliminate` scores copying it and eliminating among the rest, the
strongest answer that never looks a key up among the stated pairs; :func:`shortcut` gives it on
the evaluation set, the line the chapter reads the models against.

:func:`recall_run` trains one mixer (``softmax``, ``linear``, ``deltanet`` or ``hybrid``) on one
seed and returns its accuracy, its accuracy per query position and its accuracy curve (at fixed
steps from step 0, so a ``prefix`` of the run reproduces the start of a recorded curve).
The linear layers' head width is chosen so each variant's parameters come closest to the softmax
model's (:func:`matched_head`). :data:`RECALL` is the experiment; its ``long`` size is recorded
(``python -m llmviz.evidence.records run ch19_recall --size long``), its ``cpu`` size runs live.
"""

from __future__ import annotations

import functools

import torch

from ..evidence import Experiment

__all__ = ["VARIANTS", "SEEDS", "SIZES", "RECALL", "recall_run", "eval_task", "baseline",
           "copy_eliminate", "shortcut", "matched_head"]

VARIANTS = ("softmax", "linear", "deltanet", "hybrid")
SEEDS = (0, 1, 2)
_COMMON = dict(n_keys=16, n_values=64, n_layers=2, n_heads=4, lr=1e-2, warmup=20,
               eval_size=512)
SIZES = {
    # the live size: the chapter reads accuracy curves from the long record, so this one is
    # scored at the start and the end only, on half the evaluation sequences
    "cpu": dict(_COMMON, n_pairs=8, n_queries=8, d_model=32, steps=150, batch=32, eval_every=150,
                eval_size=256),
    "long": dict(_COMMON, n_pairs=8, n_queries=8, d_model=64, steps=1000, batch=32,
                 eval_every=100, lr=3e-3),
}
_EVAL_SEED = 12345


def _task(n_pairs, n_queries, n_keys, n_values, batch, generator, device=None):
    from ..training.recall import multi_query_recall

    return multi_query_recall(batch_size=batch, n_pairs=n_pairs, n_queries=n_queries,
                              n_keys=n_keys, n_values=n_values, replace=True,
                              generator=generator, device=device)


def eval_task(*, n_pairs, n_queries, n_keys, n_values, eval_size, device=None, **_):
    """The fixed evaluation sequences (the same for every variant and seed)."""
    return _task(n_pairs, n_queries, n_keys, n_values, eval_size,
                 torch.Generator().manual_seed(_EVAL_SEED), device)


def baseline(**params) -> list[float]:
    """Accuracy per query position of the best answer that matches no key (on :func:`eval_task`)."""
    from ..training.recall import no_recall_baseline

    return no_recall_baseline(eval_task(**params), params["n_pairs"]).tolist()


def copy_eliminate(task, n_pairs: int, *, guess: str = "common") -> torch.Tensor:
    """Per query position, the accuracy of the best answer that never looks a key up among the
    stated pairs: ``(n_queries,)``, exact on ``task`` (in expectation over the strategy's own
    random choice).

    Queries drawn with replacement open a short path: a key asked earlier in the query half has
    its answer a few tokens back, so *copying* it is right every time. A key not asked before is
    one of the stated keys not yet asked, each equally likely, so its answer is one of the stated
    values not yet given in the query half (one copy removed per value given); the best guess
    without matching the key is the most common of those (``guess="common"``: a guess among the
    most common, which is the best possible answer under that uncertainty), or any one of them
    (``guess="uniform"``: plain elimination, never better on average). The strategy uses the
    stated values, the query half and whether the current key appeared in it; it never matches a
    query to a stated key. With no repeats and ``guess="uniform"`` it is the elimination of
    :func:`~llmviz.training.recall.no_recall_baseline`.
    """
    from ..training.data import Task

    if not isinstance(task, Task):
        raise TypeError(f"task must be a Task, got {type(task).__name__}")
    if guess not in ("common", "uniform"):
        raise ValueError(f"guess must be 'common' or 'uniform', got {guess!r}")
    inp, tgt = task.inputs.cpu(), task.targets.cpu()
    pos = task.mask[0].nonzero().flatten().tolist()
    if not bool((task.mask == task.mask[0]).all()) or not pos or pos[0] != 2 * n_pairs \
            or inp.shape[1] < 2 * n_pairs:
        raise ValueError(f"n_pairs={n_pairs} does not match the task's layout (first query at "
                         f"position {pos[0] if pos else None}, expected {2 * n_pairs}, the same "
                         "in every sequence)")
    out = torch.zeros(inp.shape[0], len(pos), dtype=torch.float64)
    for b in range(inp.shape[0]):
        pool = inp[b, 1:2 * n_pairs:2].tolist()  # the stated values not yet given
        seen = set()
        for j, p in enumerate(pos):
            key, answer = int(inp[b, p]), int(tgt[b, p])
            if key in seen:  # asked before: copy the answer given then
                out[b, j] = 1.0
                continue
            if pool:
                if guess == "uniform":
                    out[b, j] = pool.count(answer) / len(pool)
                else:
                    counts = {v: pool.count(v) for v in set(pool)}
                    top = max(counts.values())
                    modes = [v for v, c in counts.items() if c == top]
                    out[b, j] = (counts.get(answer, 0) == top) / len(modes)
            seen.add(key)
            if answer in pool:  # the first time a key is asked, its value leaves the pool
                pool.remove(answer)
    return out.mean(0)


def shortcut(**params) -> list[float]:
    """:func:`copy_eliminate` per query position on :func:`eval_task` (the set every run is
    scored on)."""
    return copy_eliminate(eval_task(**params), params["n_pairs"]).tolist()


def _build(variant, lin_head, *, n_keys, n_values, d_model, n_layers, n_heads, n_pairs,
           n_queries, **_):
    from ..training.recall import conv_attention, recall_model

    extra = {} if variant == "softmax" else {"linear_head_dim": lin_head}
    model = recall_model(variant, vocab_size=n_keys + n_values, d_model=d_model,
                         n_layers=n_layers, n_heads=n_heads, max_seq_len=2 * (n_pairs + n_queries),
                         ratio=1, **extra)
    # equal footing: the softmax layers get the same 4-tap causal convolution on q, k, v that
    # every linear layer has (ModelConfig.linear_conv_kernel), so no mixer alone has the shift
    return conv_attention(model, kernel=model.config.linear_conv_kernel)


def _count(model) -> int:
    return sum(p.numel() for p in model.parameters())


@functools.lru_cache(maxsize=None)
def _matched_head(variant, frozen) -> int:
    params = dict(frozen)
    if variant == "softmax":
        return 0
    with torch.device("meta"):
        target = _count(_build("softmax", 0, **params))
        widths = range(2, 2 * params["d_model"] + 1)
        gaps = {w: abs(_count(_build(variant, w, **params)) - target) for w in widths}
    return min(gaps, key=gaps.get)


def matched_head(variant: str, **params) -> int:
    """The linear layers' head width whose parameter count is closest to the softmax model's
    (0 for ``softmax``, which has no linear layer)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}")
    return _matched_head(variant, tuple(sorted(params.items())))


class _Prefix(Exception):
    """Raised by the scoring callback to end a run at its prefix (the schedule stays the full run's)."""


def recall_run(variant: str, seed: int, *, prefix: int | None = None, **params) -> dict:
    """Train ``variant`` on ``seed`` with ``params`` (one of :data:`SIZES`) and score it.

    Returns ``{"acc", "by_position" (per query position), "curve" (accuracy at step 0,
    eval_every, ...), "params"}``; with ``prefix`` it stops after that many steps.
    """
    from ..runtime import device as best_device
    from ..training import TrainConfig, train
    from ..training.recall import recall_accuracy, recall_by_position

    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}")
    steps = params["steps"]
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or not 1 <= prefix <= steps):
        raise ValueError(f"prefix must be an int number of training steps in [1, {steps}], "
                         f"got {prefix!r}")
    dev = best_device()
    lin_head = matched_head(variant, **params)
    torch.manual_seed(seed)
    model = _build(variant, lin_head, **params).to(dev)
    ev = eval_task(**params, device=dev)
    curve = [float(recall_accuracy(model, ev))]

    def score(step, m):
        acc = float(recall_accuracy(m, ev))
        if prefix is not None and step >= prefix and step % params["eval_every"] == 0:
            curve.append(acc)  # the prefix stops here, with the full run's schedule
            raise _Prefix
        return {"acc": acc}

    def batches(gen):
        return _task(params["n_pairs"], params["n_queries"], params["n_keys"],
                     params["n_values"], params["batch"], gen)

    try:
        hist = train(model, batches, config=TrainConfig(
            steps=steps, lr=params["lr"], warmup=params["warmup"], seed=seed,
            eval_every=params["eval_every"], device=dev), progress=False,
            callbacks={"acc": score})
    except _Prefix:  # a prefix: the curve so far, measured at fixed steps only
        return {"curve": curve}
    curve += [float(a) for s, a in zip(hist.metric_steps, hist.metrics["acc.acc"])
              if s % params["eval_every"] == 0]
    return {"acc": float(recall_accuracy(model, ev)),
            "by_position": [float(a) for a in recall_by_position(model, ev)],
            "curve": curve, "params": float(_count(model))}


RECALL = Experiment(
    "ch19_recall", recall_run, variants=VARIANTS, seeds=SEEDS, sizes=SIZES, prefix=100,
    description="multi-query recall with queries drawn with replacement: softmax, linear, "
                "Gated DeltaNet, hybrid at matched parameters")
