"""Chapter 13's experiment: depth against width at matched parameters or FLOPs (long: 600 steps).

:data:`SHAPES` (``ch13_shapes``) trains shapes of matched *total* parameters (:func:`shapes`)
at four depths, three learning rates per shape and three seeds. :func:`flops_shapes` gives the
shapes of matched *training FLOPs per token* (:func:`llmviz.analysis.flops_per_token` at the
training window) for comparison; :data:`FLOPS` (``ch13_flops``) trains the deepest and the widest
of them (the 4-layer shape is the same under both matchings) at the same rates, seeds and batches,
and :func:`flops_run` runs one job of it.

Every shape is the chapter's ``llama2`` family (:func:`shape`) with heads of exactly 16
dimensions, the feed-forward at the SwiGLU 2/3 rule and weights initialised with standard
deviation ``1 / sqrt(C)`` (chapter 11's width-aware scale; GPT-2's fixed 0.02 was chosen for
C = 768): the shapes differ in depth and width only. Variants are named ``"L{depth}@{lr}"``. At
size ``long`` each run sees about 6 training tokens per parameter (8 times the live page's).

Everything is built on :func:`llmviz.device`; nothing runs at import.
"""

from __future__ import annotations

import functools

from ..analysis import count_parameters, flops_per_token
from ..evidence import Experiment
from ..model.presets import llama2
from ._curves import train_curve

__all__ = ["SHAPES", "FLOPS", "FLOPS_EDGE", "DEPTHS", "LRS", "TARGET", "HEAD_DIM", "SIZES", "variant",
           "parse_variant", "shape", "shapes", "flops_shapes", "flops_target", "shape_run", "flops_run"]

DEPTHS = (1, 2, 4, 8)
LRS = (3e-3, 1e-2, 3e-2)
TARGET = 100_000  # total parameters, embeddings and head included
HEAD_DIM = 16
_RUN = dict(seq_len=64, warmup=40)
#: ``cpu`` is a short smoke size; ``long`` is what the chapter reads
SIZES = {
    "cpu": dict(_RUN, steps=150, batch_size=8, curve_every=50),
    "long": dict(_RUN, steps=600, batch_size=16, curve_every=50),
}


def variant(depth: int, lr: float) -> str:
    """The variant name of ``depth`` layers at peak rate ``lr``, e.g. ``"L8@0.01"``."""
    return f"L{depth}@{lr:g}"


def parse_variant(name: str) -> tuple[int, float]:
    """``"L8@0.01"`` -> ``(8, 0.01)``; ValueError for a name not of that form."""
    try:
        depth, lr = name.removeprefix("L").split("@")
        return int(depth), float(lr)
    except (AttributeError, ValueError):
        raise ValueError(f"variant {name!r} is not of the form 'L<depth>@<lr>', e.g. 'L8@0.01'") from None


def shape(depth: int, width: int, seq_len: int = 64):
    """The family's config at ``depth`` layers and residual width ``width``: heads of exactly
    :data:`HEAD_DIM` dimensions (``round(width / 16)`` of them, so the attention's inner width
    is within 8 of ``width``), feed-forward width ``round(8 * width / 3)`` (the SwiGLU 2/3
    rule), initial weights of standard deviation ``1 / sqrt(width)``."""
    heads = max(1, round(width / HEAD_DIM))
    return llama2(n_heads=4, n_kv_heads=4, max_seq_len=seq_len).replace(
        n_layers=depth, d_model=width, n_heads=heads, n_kv_heads=heads, head_dim=HEAD_DIM,
        d_ff=round(8 * width / 3), init_std=width ** -0.5)


def _closest(depth: int, measure, target: float, seq_len: int):
    """The even width whose ``measure(config)`` is nearest ``target`` (measure grows with width),
    then the integer feed-forward width that brings it nearest (the measure is affine in
    ``d_ff``; a width step of 2 moves it by up to several percent, so ``d_ff / C`` ends a little
    off 8/3)."""
    best = None
    for width in range(8, 2048, 2):
        cfg = shape(depth, width, seq_len)
        if best is None or abs(measure(cfg) - target) < abs(measure(best) - target):
            best = cfg
        elif measure(cfg) > target:
            break
    one = measure(best.replace(d_ff=1))
    ideal = 1 + (target - one) / (measure(best.replace(d_ff=2)) - one)
    fits = [best.replace(d_ff=max(1, f)) for f in (int(ideal), int(ideal) + 1)]
    return min(fits, key=lambda c: abs(measure(c) - target))


@functools.lru_cache(maxsize=None)
def shapes(seq_len: int = 64) -> dict:
    """``{depth: config}`` of :func:`shape` whose total parameter count is nearest :data:`TARGET`."""
    return {L: _closest(L, lambda c: count_parameters(c)["total"], TARGET, seq_len) for L in DEPTHS}


def flops_target(seq_len: int = 64) -> float:
    """The training FLOPs per token every :func:`flops_shapes` shape is matched to: those of
    the matched-parameter shape of middle depth (L = 4)."""
    return flops_per_token(shapes(seq_len)[4], seq_len=seq_len)


@functools.lru_cache(maxsize=None)
def flops_shapes(seq_len: int = 64) -> dict:
    """``{depth: config}`` of :func:`shape` whose training FLOPs per token
    (:func:`llmviz.analysis.flops_per_token` at the training window) are nearest
    :func:`flops_target`."""
    target = flops_target(seq_len)
    return {L: _closest(L, lambda c: flops_per_token(c, seq_len=seq_len), target, seq_len)
            for L in DEPTHS}


def _run(table, name: str, seed: int, prefix, p: dict) -> dict:
    depth, lr = parse_variant(name)
    if depth not in table:
        raise ValueError(f"depth {depth} of variant {name!r} is not one of {DEPTHS}")
    config = table[depth]
    out = train_curve(config, seed, lr=lr, prefix=prefix, **p)
    out["params"] = float(count_parameters(config)["total"])
    out["flops_per_token"] = float(flops_per_token(config, seq_len=p["seq_len"]))
    return out


def shape_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One run of :data:`SHAPES`: ``curve``, ``val_loss``, ``tokens_per_s``, ``params``,
    ``flops_per_token`` of the matched-parameter shape ``variant`` (``"L<depth>@<lr>"``)."""
    return _run(shapes(p["seq_len"]), variant, seed, prefix, p)


def flops_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One run of :data:`FLOPS`, the matched-FLOPs shape ``variant``; as :func:`shape_run`."""
    return _run(flops_shapes(p["seq_len"]), variant, seed, prefix, p)


_VARIANTS = [variant(L, lr) for L in DEPTHS for lr in LRS]
SHAPES = Experiment("ch13_shapes", shape_run, variants=_VARIANTS, seeds=[0, 1, 2], sizes=SIZES,
                    prefix=100, description="chapter 13: depth vs width at matched total parameters, "
                                            "3 learning rates per shape")
FLOPS = Experiment("ch13_flops", flops_run,
                   variants=[variant(L, lr) for L in (DEPTHS[0], DEPTHS[-1]) for lr in LRS],
                   seeds=[0, 1, 2], sizes=SIZES, prefix=100,
                   description="chapter 13: the deepest and the widest shape at matched training FLOPs "
                               "per token, 3 learning rates each")
#: the one matched-FLOPs shape whose best rate sat at the top edge of :data:`LRS` (L = 8 at
#: 0.03), one rate higher, same sizes, seeds and batches: read together with :data:`FLOPS`
FLOPS_EDGE = Experiment("ch13_flops_edge", flops_run, variants=[variant(DEPTHS[-1], 0.1)],
                        seeds=[0, 1, 2], sizes=SIZES, prefix=100,
                        description="chapter 13: the deepest matched-FLOPs shape at rate 0.1, "
                                    "above ch13_flops's grid")
