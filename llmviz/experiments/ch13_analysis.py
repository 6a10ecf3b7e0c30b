"""Reading chapter 13's depth-vs-width runs (live or recorded): picks, checks and claims.

A run (``ch13.SHAPES`` at matched parameters, ``ch13.FLOPS`` at matched FLOPs per token) holds
variants ``"L<depth>@<lr>"``. Where it swept rates, each depth is read at the rate with the
lowest mean held-out loss over the seeds (:func:`llmviz.experiments.sweep.best_rates`), and the
claim "the deepest shape ends lower than the widest" carries three kinds of check:

* both compared shapes beat a count baseline on the same targets, the chapter passes the best
  byte n-gram (a comparison of models that have learned less than counting says nothing about
  shape: chapter 10's rule);
* each chosen rate lies inside its grid (a better rate may lie outside it otherwise);
* a sanity check (:func:`rate_control`): on the same seeds, the paired comparison resolves the
  gap between each compared shape at the worst rate of its grid and the same shape at its
  chosen rate. A comparison that cannot resolve that cannot be expected to resolve a difference
  between shapes either; passing it says less, since that gap is large and picked on the same
  seeds (the smallest detectable difference, printed with the verdict, says how small a gap the
  seeds resolve).
"""

from __future__ import annotations

from typing import Any

from ..evidence import Check, Claim, beats_baseline, decide, paired, paired_ratio, positive_control, summarize
from .sweep import best_rates, inside_grid, mean_loss, rates_of

__all__ = ["CHAPTER", "FLAT", "picks", "rate_control", "depth_claim", "flat_claim", "speed_ratio",
           "step_comparison"]

CHAPTER = "13_depth_vs_width"
#: nats: the largest fall of the held-out loss over the last quarter still read as "flattened"
FLAT = 0.02


def _name(depth: int, lr: float) -> str:
    return f"L{depth}@{lr:g}"


def picks(runs: Any, variants: Any, depths: Any, *, rate: float | None = None) -> tuple[dict, dict]:
    """``({depth: its variant}, {depth: inside-grid Check})``: each depth at its best rate of the
    sweep, or every depth at ``rate`` (a run that did not sweep rates; no grid checks then)."""
    depths = list(depths)
    if rate is not None:
        return {L: _name(L, rate) for L in depths}, {}
    best, grid = best_rates(runs, variants), rates_of(variants)
    missing = [L for L in depths if f"L{L}" not in best]
    if missing:
        raise ValueError(f"depths {missing} have no variants among {sorted(grid)}; pass the run's depths")
    return ({L: _name(L, best[f"L{L}"]) for L in depths},
            {L: inside_grid(f"L={L}", best[f"L{L}"], grid[f"L{L}"]) for L in depths})


def rate_control(runs: Any, variants: Any, pick: dict, depths: Any) -> Check:
    """Sanity check (a positive control of a large gap): for every depth in ``depths``, the loss
    at the worst rate of its grid minus the loss at its chosen rate (``pick``), paired over the
    seeds, lies above zero."""
    grid, parts, ok = rates_of(variants), [], True
    for L in depths:
        worst = max(grid[f"L{L}"], key=lambda lr: mean_loss(runs, _name(L, lr)))
        gap = paired(runs.values(_name(L, worst), "val_loss"), runs.values(pick[L], "val_loss"))
        ok = ok and decide(gap, threshold=0.0, direction=">") == "holds"
        parts.append(f"L={L}: rate {worst:g} minus its chosen one {gap.format('.3f')}")
    return positive_control("sanity check: the paired comparison resolves a large gap (each shape at "
                            "its worst rate of the grid against its chosen rate)", ok, "; ".join(parts))


def depth_claim(runs: Any, variants: Any, depths: Any, size: Any, baseline: float, *, matched: str,
                baseline_name: str = "byte bigram", rate: float | None = None,
                suffix: str = "") -> Claim:
    """"At matched ``matched``, the deepest shape ends lower than the widest" from ``runs``.

    Both compared shapes must beat ``baseline`` (the loss of the ``baseline_name`` model on the
    same held-out targets), or the verdict is "cannot decide". With ``rate`` every shape ran at
    that one rate (no rate checks, no control); otherwise each is read at its best rate with the
    grid checks and :func:`rate_control`."""
    depths = sorted(depths)
    wide, deep = depths[0], depths[-1]
    pick, edges = picks(runs, variants, depths, rate=rate)
    loss = {L: runs.values(pick[L], "val_loss") for L in (wide, deep)}
    checks = [beats_baseline({f"L={L}": loss[L] for L in (wide, deep)}, baseline,
                             name=f"the requirement that both compared shapes beat the {baseline_name}")]
    if rate is None:
        checks += [edges[wide], edges[deep], rate_control(runs, variants, pick, (wide, deep))]
    how = f"all at rate {rate:g}" if rate is not None else "each at its own learning rate"
    tag = "flops" if matched.startswith("training FLOPs") else "depth"
    return Claim(f"At matched {matched}, the deepest shape (L={deep}) reaches a lower validation "
                 f"loss than the widest (L={wide}), {how}", paired(loss[deep], loss[wide]),
                 threshold=0.0, direction="<", quantity=f"loss(L={deep}) - loss(L={wide}), nats/byte",
                 id=f"ch13_{tag}{suffix}", chapter=CHAPTER, size=size, checks=checks, fmt=".3f")


def flat_claim(runs: Any, pick: dict, size: Any, *, suffix: str = "") -> Claim:
    """"The curves have flattened": the held-out loss of the picked shapes falls by less than
    :data:`FLAT` over the last quarter of training (per seed, the mean over the shapes)."""
    seeds = len(runs.values(next(iter(pick.values())), "val_loss"))
    drops = []
    for s in range(seeds):
        per = []
        for v in pick.values():
            c = runs.curves(v, "curve")[s]
            per.append(c[round(0.75 * (len(c) - 1))] - c[-1])
        drops.append(sum(per) / len(per))
    return Claim(f"The curves have flattened: over the last quarter of training the held-out loss "
                 f"falls by less than {FLAT:g} nats (mean over shapes)", summarize(drops),
                 threshold=FLAT, direction="<", quantity="loss(3/4 of the steps) - final loss, nats",
                 id=f"ch13_flat{suffix}", chapter=CHAPTER, size=size, fmt=".3f")


def speed_ratio(runs: Any, deep: str, wide: str):
    """Paired ratio of training tokens per second, variant ``deep`` over variant ``wide``."""
    return paired_ratio(runs.values(deep, "tokens_per_s"), runs.values(wide, "tokens_per_s"))


def step_comparison(ours: Any, peer: Any, batch_size: int, seq_len: int = 64, *, device: Any = "cpu",
                    repeats: int = 9, seed: int = 0):
    """One training step (forward and backward of the next-token loss on one batch of random
    bytes) of config ``ours`` against config ``peer``, timed in interleaved rounds on one thread
    with an A/A control (:func:`llmviz.training.bench.compare`), so both meet the same load.
    ``.ratio`` is time(ours) / time(peer); tokens per second go the other way."""
    import torch

    from ..model import DecoderLM
    from ..training.bench import compare

    gen = torch.Generator().manual_seed(seed)
    batch = torch.randint(0, 256, (batch_size, seq_len), generator=gen).to(device)

    def step_of(config):
        torch.manual_seed(seed)
        model = DecoderLM(config).to(device)

        def step():
            for p in model.parameters():
                p.grad = None
            model(batch, labels=batch).loss.backward()
        return step

    return compare("one training step", step_of(ours), step_of(peer), ours_name=f"L={ours.n_layers}",
                   peer_name=f"L={peer.n_layers}", repeats=repeats, warmup=2, min_run_time=0.05,
                   threads=1, inference=False)
