"""Chapter 11's warmup comparison on ten paired seeds.

The stability map of chapter 11 trains every placement with and without warmup on three seeds,
live. Whether a post-norm run leaves the unigram plateau happens seed by seed, so three seeds
cannot say how often warmup rescues it, and the warmup boxes' intervals are wide. :data:`MAP_WARM`
repeats the map's post-norm and pre-norm cells (6 layers, C = 32, lr 1e-2, cosine decay, no
clipping, 56 steps of 8 windows of 32 bytes; no warmup and an 18-step warmup) on ten paired
seeds, with :func:`llmviz.experiments.ch11.spread_warm_run`, and scores ``val_windows`` held-out
windows spread evenly over the whole tail (:func:`llmviz.experiments.ch11.spread_targets`), whose
unigram plateau is ``ch11.spread_baselines(n)["unigram"]``. (The chapter's other records score
the first ``val_windows`` consecutive windows of the tail, :func:`llmviz.experiments.ch11.val_targets`:
one stretch of text, on which a count of seeds "off the plateau" can differ from the whole tail's.)
"""

from __future__ import annotations

from ..evidence import Experiment
from .ch11 import spread_warm_run

__all__ = ["MAP_WARM", "WARMUP", "variants"]

#: the map's warmup, in steps (its cpu size)
WARMUP = 18


def variants() -> list[str]:
    """``"post warmup=0"``, ``"post warmup=18"``, ``"pre warmup=0"``, ``"pre warmup=18"``."""
    return [f"{p} warmup={w}" for p in ("post", "pre") for w in (0, WARMUP)]


MAP_WARM = Experiment(
    "ch11_map_warm", spread_warm_run, variants=variants(), seeds=list(range(10)),
    sizes={"cpu": dict(d_model=32, n_layers=6, steps=28, lr=1e-2, batch=8, curve_every=14,
                       val_windows=64),
           "long": dict(d_model=32, n_layers=6, steps=56, lr=1e-2, batch=8, curve_every=28,
                        val_windows=256)},
    prefix=28, description="chapter 11: the stability map's post- and pre-norm cells, with and "
                           "without an 18-step warmup, on ten paired seeds")
