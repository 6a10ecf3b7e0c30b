"""Chapter 16's experiment: a mixture of experts against dense models at matched compute.

Five byte-level models share width, depth, attention, data, seeds and batches
(:func:`variants`): ``dense`` (one feed-forward network per layer), ``dense 4x FFN`` (one
network four times as wide: the same total feed-forward parameters as four experts, the upper
bound of what the extra capacity can buy on this data), and three mixtures of four experts of
the dense width, each token sent to one: without balancing, with the Switch balancing loss, and
with DeepSeek-V3's bias method. A token costs the same multiply-adds in the dense model and in
every MoE (the router aside).

Top-1 routing keeps Switch's *un-renormalised* gate: the chosen expert's output is scaled by
its softmax probability ``p_i``. Renormalising one kept weight makes it exactly 1, and the
language-model loss then sends no gradient to the router (:func:`router_grad_norm` measures
both). :func:`moe_run` trains one variant on one seed and returns its held-out loss, the load
of every layer's experts and the course of layer 0's load; :func:`bigram_loss` is the baseline
the models must beat before their comparison means anything.
"""

from __future__ import annotations

import functools

import torch

from ..evidence import Experiment

__all__ = ["VARIANTS", "MOE_VARIANTS", "SEEDS", "SIZES", "MOE", "variants", "moe_run", "router_grad_norm",
           "data", "bigram_loss", "eval_windows", "FACTORS", "SENTENCE", "gap_change"]

VARIANTS = ("dense", "dense 4x FFN", "MoE, no balancing", "MoE + balancing loss",
            "MoE + bias balancing")
MOE_VARIANTS = VARIANTS[2:]
#: The first three seeds; :data:`MOE` runs two more (``MOE.seeds``).
SEEDS = (0, 1, 2)
N_EXPERTS = 4
#: Capacity factors the held-out routing of every MoE run is replayed against (dropped share).
FACTORS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
#: The sentence whose layer-0 routing every MoE run records (drawn in the chapter).
SENTENCE = "The for statement is used to iterate over the elements of a sequence."
SIZES = {
    "cpu": dict(d_model=64, d_ff=128, n_layers=2, steps=180, lr=3e-3, warmup=20, batch=16,
                seq_len=64, eval_every=30, val_windows=128, aux_coef=0.01, bias_rate=1e-2),
    "long": dict(d_model=64, d_ff=128, n_layers=2, steps=1200, lr=3e-3, warmup=20, batch=16,
                 seq_len=64, eval_every=100, val_windows=128, aux_coef=0.01, bias_rate=1e-2),
}


def variants(*, d_model, d_ff, n_layers, aux_coef, bias_rate, normalize=False, **_) -> dict:
    """``{name: ModelConfig}`` of the five models. ``normalize=True`` renormalises the kept
    top-1 weight (the set-up that starves the router, kept for :func:`router_grad_norm`)."""
    from ..model import ModelConfig

    base = dict(vocab_size=256, d_model=d_model, n_layers=n_layers, n_heads=4, max_seq_len=128,
                position="rope", d_ff=d_ff)
    sparse = dict(n_experts=N_EXPERTS, experts_top_k=1, expert_d_ff=d_ff, moe_normalize=normalize)
    return {
        "dense": ModelConfig(**base),
        "dense 4x FFN": ModelConfig(**{**base, "d_ff": N_EXPERTS * d_ff}),
        "MoE, no balancing": ModelConfig(**base, **sparse),
        "MoE + balancing loss": ModelConfig(**base, **sparse, router_aux_loss_coef=aux_coef),
        "MoE + bias balancing": ModelConfig(**base, **sparse, moe_bias_balancing=True,
                                            moe_bias_rate=bias_rate),
    }


@functools.lru_cache(maxsize=1)
def data():
    """``(train_tokens, val_tokens)`` of the byte corpus "prose" (90/10 split)."""
    from ..training.data import ByteTokenizer, load_corpus, train_val_split

    return train_val_split(ByteTokenizer().encode(load_corpus("prose")), 0.1)


def eval_windows(*, seq_len, val_windows, **_):
    """The held-out windows every model is scored on: ``(val_windows, seq_len)`` bytes."""
    _, val = data()
    return val[: len(val) // seq_len * seq_len].view(-1, seq_len)[:val_windows]


def bigram_loss(**params) -> float:
    """Held-out loss (nats/byte) of a byte bigram fitted on the training bytes, on the same
    targets as the models (every byte of the evaluation windows after the first)."""
    import numpy as np

    from ..training.ngram import ByteNgram

    train_tokens, _ = data()
    windows = eval_windows(**params)
    model = ByteNgram(order=2).fit(train_tokens)
    return float(np.mean([model.nll(w).mean() for w in windows]))


def router_grad_norm(config, seed: int = 0) -> float:
    """Norm of layer 0's router gradient after one backward pass of the language-model loss
    (no balancing term), on random bytes: 0.0 means the router cannot learn from the loss."""
    from ..model import DecoderLM
    from ..runtime import device as best_device

    dev = best_device()
    torch.manual_seed(seed)
    model = DecoderLM(config).to(dev)
    x = torch.randint(0, config.vocab_size, (4, 33), device=dev)
    logits = model(x[:, :-1]).logits
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten()).backward()
    grad = model.layers[0].mlp.gate.weight.grad
    return 0.0 if grad is None else float(grad.norm())


def moe_run(variant: str, seed: int, *, prefix: int | None = None, save_to: str | None = None,
            **params) -> dict:
    """Train ``variant`` on ``seed``; return ``{"loss", "curve", "params"}`` and, for an MoE,
    ``"imbalance"`` (busiest / mean load, mean over layers), ``"load"`` (``{"layer0": [share of
    each expert], ...}`` on the held-out windows), ``"course"`` (``{"e0": [layer 0's share
    at step 0, eval_every, ...], ...}``), ``"dropped"`` (layer 0's held-out assignments dropped
    at each capacity factor of :data:`FACTORS`) and ``"text"`` (``{"e0": [layer 0's router
    probability of expert 0 for each byte of :data:`SENTENCE`], ...}``). ``save_to``: a file to
    save the trained weights in. With ``prefix`` the run keeps the full run's learning-rate
    schedule, stops at the first curve point at or past ``prefix`` steps and returns only
    ``"curve"`` (and ``"course"``), the start of what the full run records."""
    import numpy as np

    from ..moe import expert_capacity, load_imbalance, plan_dispatch
    from ..training.data import ByteTokenizer
    from ..model import DecoderLM
    from ..runtime import device as best_device
    from ..training import TrainConfig
    from ._prefix import scored_run

    configs = variants(**params)
    if variant not in configs:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}")
    dev = best_device()
    train_tokens, _ = data()
    windows = eval_windows(**params).to(dev)
    probe = windows[:32, :-1]
    torch.manual_seed(seed)
    model = DecoderLM(configs[variant]).to(dev)
    moe = configs[variant].n_experts is not None

    def val_loss(m):
        with torch.no_grad():
            out = m(windows[:, :-1])
        return float(torch.nn.functional.cross_entropy(out.logits.float().flatten(0, 1),
                                                       windows[:, 1:].flatten())), out

    def shares(m):
        with torch.no_grad():
            load = m(probe).moe[0].load.float()
        return (load / load.sum()).tolist()

    def score(step, m):
        row = {"loss": val_loss(m)[0]}
        if moe:
            row.update({f"e{e}": s for e, s in enumerate(shares(m))})
        return row

    # the full run's schedule even for a prefix, so a prefix's curve is the record's start
    curves = scored_run(model, train_tokens, TrainConfig(
        steps=params["steps"], lr=params["lr"], warmup=params["warmup"],
        batch_size=params["batch"], seq_len=params["seq_len"], eval_every=params["eval_every"],
        seed=seed, device=dev), score, prefix=prefix)
    curve = curves.pop("loss")
    course = curves if moe else {}
    if prefix is not None:  # what is measured at fixed steps only (the reproducibility check)
        return {"curve": curve, "course": course} if moe else {"curve": curve}
    model.eval()
    if save_to is not None:
        torch.save(model.state_dict(), save_to)
    loss, out = val_loss(model)
    row = {"loss": loss, "curve": curve, "params": float(sum(p.numel() for p in model.parameters()))}
    if moe:
        row["imbalance"] = float(np.mean([load_imbalance(info.load) for info in out.moe]))
        row["load"] = {f"layer{i}": (info.load.float() / info.load.sum()).tolist()
                       for i, info in enumerate(out.moe)}
        row["course"] = course
        idx = out.moe[0].routing.indices.cpu()  # (N, 1): layer 0's choice per held-out token
        row["dropped"] = [plan_dispatch(idx, N_EXPERTS, capacity=expert_capacity(
            idx.shape[0], 1, N_EXPERTS, f)).n_dropped / idx.numel() for f in FACTORS]
        with torch.no_grad():
            probs = model(ByteTokenizer().encode(SENTENCE)[None].to(dev)).moe[0].routing.probs
        row["text"] = {f"e{e}": probs[:, e].float().cpu().tolist() for e in range(N_EXPERTS)}
    return row


MOE = Experiment(
    # five paired seeds: at three, a t interval is 4.3 standard errors wide each side, and the
    # load verdicts stay unresolved even where every seed moves the same way
    "ch16_moe", moe_run, variants=VARIANTS, seeds=SEEDS + (3, 4), sizes=SIZES,
    prefix={"cpu": 60, "long": 200},  # two curve points after step 0
    description="byte-level MoE (Switch gate, top-1) against dense and dense 4x FFN at matched "
                "active compute, with no balancing, the balancing loss, and bias balancing")


def gap_change(curves_a, curves_b, start: int):
    """The paired per-seed change of the gap ``a - b`` from curve point ``start`` to the end.

    ``curves_a[i]`` and ``curves_b[i]`` are seed i's held-out loss curves of two variants, one
    value per evaluation. For each seed the gap is ``a - b`` at every point; the change is the
    gap at the last point minus the gap at ``start``. The returned paired estimate (mean and t
    interval over seeds) excludes zero when the gap was still moving the same way in every seed,
    so a steady trend fails a check built on it, however small the gap it ends at.
    """
    from ..evidence import paired

    if len(curves_a) != len(curves_b) or len(curves_a) < 2:
        raise ValueError(f"gap_change needs the same number (>= 2) of seeds' curves on both "
                         f"sides, got {len(curves_a)} and {len(curves_b)}")
    ends, starts = [], []
    for a, b in zip(curves_a, curves_b):
        if len(a) != len(b):
            raise ValueError(f"gap_change needs curves of equal length per seed, got {len(a)} "
                             f"and {len(b)}: pair runs evaluated at the same steps")
        if not 0 <= start < len(a) - 1:
            raise ValueError(f"start must index a curve point before the last (0..{len(a) - 2}), "
                             f"got {start}")
        ends.append(float(a[-1]) - float(b[-1]))
        starts.append(float(a[start]) - float(b[start]))
    return paired(ends, starts)


def gap_slopes(curves_a, curves_b, start: int, every: int = 1) -> list[float]:
    """Each seed's least-squares slope of the gap ``a - b`` from curve point ``start`` to the end.

    ``curves_a[i]`` and ``curves_b[i]`` are seed i's held-out loss curves of two variants, one
    value per evaluation, ``every`` training steps apart. For each seed the gap ``a - b`` is
    fitted by a straight line over the points ``start`` to the last (at least three points), and
    the slope is returned in loss units per 1000 training steps. Unlike :func:`gap_change`, which
    reads only the two end points, the fit uses every point between them, so a gap that closes
    steadily is seen even when the end points alone are noisy.
    """
    if len(curves_a) != len(curves_b) or len(curves_a) < 2:
        raise ValueError(f"gap_slopes needs the same number (>= 2) of seeds' curves on both "
                         f"sides, got {len(curves_a)} and {len(curves_b)}")
    if not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be the positive number of steps between curve points, "
                         f"got {every!r}")
    slopes = []
    for a, b in zip(curves_a, curves_b):
        if len(a) != len(b):
            raise ValueError(f"gap_slopes needs curves of equal length per seed, got {len(a)} "
                             f"and {len(b)}: pair runs evaluated at the same steps")
        if not 0 <= start <= len(a) - 3:
            raise ValueError(f"start must leave at least three curve points to fit "
                             f"(0..{len(a) - 3}), got {start}")
        gap = torch.tensor([float(x) - float(y) for x, y in zip(a[start:], b[start:])],
                           dtype=torch.float64)
        x = torch.arange(len(gap), dtype=torch.float64) * every
        xc = x - x.mean()
        slopes.append(float((xc * (gap - gap.mean())).sum() / (xc * xc).sum()) * 1000)
    return slopes
