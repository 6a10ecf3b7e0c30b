"""Chapter 12's experiment: feed-forward variants at matched parameters, long record 600 steps.

:data:`FFN` (``ch12_ffn``) trains byte-level models that differ only in the feed-forward: the
GELU MLP of width 4C and the gated ReGLU, GeGLU and SwiGLU of width 8C/3 (the 2/3 rule, exact
at C = 48: ``3 * 48 * 128 = 2 * 48 * 192``), two blocks of three 16-dimensional heads. Every
feed-forward is tried at three peak learning rates and with two initialisations: standard
deviation ``1 / sqrt(C)`` (chapter 11's width-aware scale) and GPT-2's fixed 0.02 (GPT-1's value
at C = 768, kept by GPT-2 at every width, and far below ``1 / sqrt(48)``; residual output
projections get ``1 / sqrt(2 n_layers)`` of it in both). Variants are named ``"<ffn>, <init>@<lr>"``, e.g.
``"SwiGLU, 1/sqrt(C)@0.01"``. Curves are held-out loss on chapter 15's split
(:mod:`llmviz.experiments._curves`), so chapter 15's byte n-gram baselines score the same
targets.

Everything is built on :func:`llmviz.device`; nothing runs at import.
"""

from __future__ import annotations

from ..evidence import Experiment
from ..ffn import glu_hidden_size
from ..model.config import ModelConfig
from ._curves import train_curve

__all__ = ["FFN", "FFNS", "INITS", "LRS", "D_MODEL", "SIZES", "variant", "parse_variant",
           "config_for", "ffn_run"]

D_MODEL = 48
#: feed-forward name -> the ModelConfig fields that make it
FFNS = {
    "MLP GELU": dict(ffn="mlp", activation="gelu", d_ff=4 * D_MODEL),
    "ReGLU": dict(ffn="reglu", d_ff=glu_hidden_size(D_MODEL)),
    "GeGLU": dict(ffn="geglu", d_ff=glu_hidden_size(D_MODEL)),
    "SwiGLU": dict(ffn="swiglu", d_ff=glu_hidden_size(D_MODEL)),
}
#: initialisation name -> standard deviation of every weight matrix at C = 48
INITS = {"1/sqrt(C)": D_MODEL ** -0.5, "std 0.02": 0.02}
LRS = (3e-3, 1e-2, 3e-2)
_RUN = dict(seq_len=64, warmup=40)
#: ``cpu`` is a short smoke size; ``long`` is what the chapter reads
SIZES = {
    "cpu": dict(_RUN, steps=100, batch_size=8, curve_every=50),
    "long": dict(_RUN, steps=600, batch_size=16, curve_every=50),
}


def variant(ffn: str, init: str, lr: float) -> str:
    """The variant name, e.g. ``variant("SwiGLU", "1/sqrt(C)", 0.01) == "SwiGLU, 1/sqrt(C)@0.01"``."""
    return f"{ffn}, {init}@{lr:g}"


def parse_variant(name: str) -> tuple[str, str, float]:
    """``"SwiGLU, 1/sqrt(C)@0.01"`` -> ``("SwiGLU", "1/sqrt(C)", 0.01)``; ValueError otherwise."""
    try:
        head, lr = name.rsplit("@", 1)
        ffn, init = head.split(", ")
        lr = float(lr)
    except (AttributeError, ValueError):
        raise ValueError(f"variant {name!r} is not of the form '<ffn>, <init>@<lr>', "
                         f"e.g. 'SwiGLU, 1/sqrt(C)@0.01'") from None
    if ffn not in FFNS or init not in INITS:
        raise ValueError(f"variant {name!r}: feed-forward must be one of {list(FFNS)} and "
                         f"initialisation one of {list(INITS)}")
    return ffn, init, lr


def config_for(ffn: str, init: str, seq_len: int = 64) -> ModelConfig:
    """The model of feed-forward ``ffn`` with initialisation ``init``."""
    return ModelConfig(d_model=D_MODEL, n_layers=2, n_heads=3, max_seq_len=seq_len, bias=False,
                       init_std=INITS[init], **FFNS[ffn])


def ffn_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One run: ``curve`` (held-out loss from step 0), ``val_loss``, ``tokens_per_s``."""
    ffn, init, lr = parse_variant(variant)
    return train_curve(config_for(ffn, init, p["seq_len"]), seed, lr=lr, prefix=prefix, **p)


_VARIANTS = ([variant(f, "1/sqrt(C)", lr) for f in FFNS for lr in LRS]
             + [variant(f, "std 0.02", 1e-2) for f in ("MLP GELU", "SwiGLU")])
FFN = Experiment("ch12_ffn", ffn_run, variants=_VARIANTS, seeds=[0, 1, 2], sizes=SIZES,
                 prefix=100, description="chapter 12: GELU MLP, ReGLU, GeGLU, SwiGLU at matched "
                                         "parameters, two initialisations, 3 learning rates")
