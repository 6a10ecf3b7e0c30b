"""Chapter 11's experiments: where the norm sits, at initialisation and in training.

* :data:`XIONG` reproduces the mechanism of Xiong et al. (2020) at initialisation: per layer, the
  gradient norm of the feed-forward weights after one backward pass, for post-norm and pre-norm
  stacks of several depths, with Xavier initialisation (their analysis) and with the book's
  (``init_std`` 1/sqrt(C), ``o_proj``/``down_proj`` scaled by 1/sqrt(2L)).
* :data:`LR_SWEEP` trains post-norm and pre-norm stacks over a learning-rate grid, with and
  without warmup, and scores the held-out loss: where does each placement stop training?
* :data:`DEPTH` trains post-norm and pre-norm at several depths with one recipe (the chapter's
  stability-map recipe with warmup, run 5x longer) on six paired seeds.
* :data:`DEPTH_LOW` is :data:`DEPTH` at lr 3e-3, post-norm's largest no-warmup rate in the
  sweep, on six paired seeds: a rate at which post-norm trains at the shallowest depth.

Every model is the chapter's byte-level block (LayerNorm with bias, GELU MLP, 4 heads, learned
absolute positions, embedding scaled by sqrt(C)) trained on the prose corpus with AdamW, no
gradient clipping and no weight decay. A run that produces a non-finite loss, or a training loss
above 2 ln 256, is stopped and marked diverged; its held-out loss is scored as uniform guessing
(ln 256) from then on. Everything is built on :func:`llmviz.device`; nothing runs at import.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from .. import runtime
from ..evidence import Experiment
from ..model import DecoderLM
from ..model.config import ModelConfig
from ..training import TrainConfig, train
from ..training.data import ByteTokenizer, load_corpus, random_batches, train_val_split
from ..training.ngram import ByteNgram

__all__ = ["XIONG", "LR_SWEEP", "LR_LOW", "DEPTH", "DEPTH_LOW", "DEPTH_WARM", "warm_run", "UNIFORM", "data", "model_for", "val_targets", "val_loss",
           "baselines", "grad_profile", "train_placement", "lr_variants", "depth_variants",
           "parse_variant", "spread_starts", "spread_targets", "spread_loss", "spread_baselines",
           "train_spread", "spread_warm_run"]

UNIFORM = math.log(256)
SEQ = 32  # training and scoring window (bytes)
PLACEMENTS = ("post", "pre")


@functools.lru_cache(maxsize=1)
def data() -> tuple[torch.Tensor, torch.Tensor]:
    """The byte streams of the prose corpus: (training head, held-out tail of 10 %)."""
    return train_val_split(ByteTokenizer().encode(load_corpus("prose")), 0.1)


def _windows(n: int) -> torch.Tensor:
    val = data()[1]
    return val[: n * SEQ].view(n, SEQ)


def val_targets(n: int) -> torch.Tensor:
    """Indices into the held-out stream of the targets :func:`val_loss` scores: the first ``n``
    windows of :data:`SEQ` bytes, every position but the first."""
    return (torch.arange(n)[:, None] * SEQ + torch.arange(1, SEQ)).flatten()


def val_loss(model: nn.Module, n: int) -> float:
    """Mean loss (nats/byte) on :func:`val_targets`; ln 256 if it is not finite."""
    windows = _windows(n).to(next(model.parameters()).device)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits = model(windows[:, :-1]).logits.float()
    model.train(was_training)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()
    return min(loss, UNIFORM) if math.isfinite(loss) else UNIFORM


def baselines(n: int) -> dict[str, float]:
    """Byte unigram (the plateau), bigram and 5-gram losses on :func:`val_targets`, fitted on the
    training head."""
    train_tokens, val = data()
    targets = val_targets(n).numpy()
    return {name: float(ByteNgram(o).fit(train_tokens).nll(val, targets).mean())
            for name, o in (("unigram", 1), ("bigram", 2), ("5-gram", 5))}


def model_for(placement: str, n_layers: int, d_model: int, init: str = "book") -> DecoderLM:
    """The chapter's block stack; ``init`` ``"book"`` (normal 1/sqrt(C), residual projections
    1/sqrt(C)/sqrt(2L)) or ``"xavier"`` (every linear Xavier-normal, no residual scaling, as in
    Xiong et al.'s analysis). Seed the global RNG first."""
    if init not in ("book", "xavier"):
        raise ValueError(f"init must be 'book' or 'xavier', got {init!r}")
    cfg = ModelConfig(d_model=d_model, n_layers=n_layers, n_heads=4, max_seq_len=64,
                      placement=placement, norm="layer", ffn="mlp", bias=True,
                      init_std=d_model ** -0.5, embed_scale=True)
    model = DecoderLM(cfg)
    if init == "xavier":
        for module in model.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_normal_(module.weight)
    return model.to(runtime.device())


def parse_variant(variant: str) -> dict[str, str]:
    """``"post L=12 xavier"`` -> ``{"placement": "post", "L": "12", "init": "xavier"}``: the
    first word is the placement, then ``key=value`` words or bare words for ``init``."""
    words = variant.split()
    if not words or words[0] not in PLACEMENTS:
        raise ValueError(f"variant {variant!r} must start with one of {PLACEMENTS}")
    out = {"placement": words[0]}
    for w in words[1:]:
        key, _, value = w.partition("=")
        out.update({key: value} if value else {"init": key})
    return out


# --- Xiong et al.: gradients at initialisation ------------------------------------------------

XIONG_DEPTHS = (6, 12, 24, 48)
XIONG_VARIANTS = [f"{p} L={L} {init}" for init in ("xavier", "book") for p in PLACEMENTS
                  for L in XIONG_DEPTHS]


def grad_profile(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """Per-layer gradient norms of the feed-forward weights (``up_proj`` and ``down_proj``
    together) after one backward pass of the next-byte loss on ``batch`` training windows of
    ``seq_len`` bytes (the seed draws the initialisation and the windows). Nothing is trained,
    so ``prefix`` changes nothing. Returns ``{"ffn_grad": [...], "last": ..., "first": ...}``."""
    v = parse_variant(variant)
    torch.manual_seed(seed)
    model = model_for(v["placement"], int(v["L"]), p["d_model"], v.get("init", "book"))
    x, y = random_batches(data()[0], batch_size=p["batch"], seq_len=p["seq_len"],
                          generator=torch.Generator().manual_seed(seed))
    dev = runtime.device()
    logits = model(x.to(dev)).logits.float()
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.to(dev).flatten()).backward()
    grads = [math.sqrt(sum(float(w.grad.pow(2).sum()) for w in (b.mlp.up_proj.weight,
                                                                 b.mlp.down_proj.weight)))
             for b in model.layers]
    return {"ffn_grad": grads, "first": grads[0], "last": grads[-1]}


XIONG = Experiment(
    "ch11_xiong", grad_profile, variants=XIONG_VARIANTS, seeds=list(range(30)),
    sizes={"cpu": dict(d_model=32, batch=4, seq_len=32), "long": dict(d_model=64, batch=16, seq_len=64)},
    prefix=1, description="chapter 11: feed-forward gradient norm per layer at init, post vs pre")


# --- training runs: learning-rate sweep and depth ---------------------------------------------

class _Prefix(Exception):
    """Raised by the curve callback to stop a run after its prefix."""


def train_placement(placement: str, n_layers: int, lr: float, warmup: int, seed: int, p: dict,
                    prefix: int | None = None) -> dict:
    """One run: ``curve`` (held-out loss from step 0, every ``curve_every`` steps, padded with
    ln 256 after a divergence), ``loss`` (its last point), ``diverged`` (1.0 or 0.0)."""
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or not 1 <= prefix <= p["steps"]):
        raise ValueError(f"prefix must be an int number of steps in [1, {p['steps']}], got {prefix!r}")
    torch.manual_seed(seed)
    model = model_for(placement, n_layers, p["d_model"])
    n_val = p["val_windows"]
    curve = [val_loss(model, n_val)]

    def point(step: int, m) -> float:
        curve.append(val_loss(m, n_val))
        if prefix is not None and step >= prefix:
            raise _Prefix
        return curve[-1]

    cfg = TrainConfig(steps=p["steps"], lr=lr, warmup=warmup, schedule="cosine", grad_clip=None,
                      weight_decay=0.0, batch_size=p["batch"], seq_len=SEQ, seed=seed,
                      eval_every=p["curve_every"], max_loss=2 * UNIFORM)
    hist = None
    try:
        hist = train(model, data()[0], config=cfg, callbacks={"val_loss": point}, progress=False)
    except _Prefix:
        return {"curve": curve, "loss": curve[-1], "diverged": 0.0}
    diverged = bool(hist.diverged)
    n_points = p["steps"] // p["curve_every"] + 1
    curve += [UNIFORM] * (n_points - len(curve))
    return {"curve": curve, "loss": curve[-1], "diverged": float(diverged)}


def spread_starts(n: int) -> torch.Tensor:
    """Start offsets into the held-out stream of ``n`` windows of :data:`SEQ` bytes spread evenly
    over the whole tail (the first starts at 0, the last ends at the tail's end; they do not
    overlap). :func:`val_targets` instead takes the first ``n`` consecutive windows."""
    room = len(data()[1]) - SEQ
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= room // SEQ + 1:
        raise ValueError(f"n must be an int number of windows in [2, {room // SEQ + 1}] (windows of "
                         f"{SEQ} bytes that do not overlap in the held-out tail), got {n!r}")
    return torch.arange(n) * room // (n - 1)


def spread_targets(n: int) -> torch.Tensor:
    """Indices into the held-out stream of the targets :func:`spread_loss` scores: every position
    but the first of the windows at :func:`spread_starts`."""
    return (spread_starts(n)[:, None] + torch.arange(1, SEQ)).flatten()


def spread_loss(model: nn.Module, n: int) -> float:
    """Mean loss (nats/byte) on :func:`spread_targets`; ln 256 if it is not finite."""
    windows = data()[1][spread_starts(n)[:, None] + torch.arange(SEQ)]
    windows = windows.to(next(model.parameters()).device)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits = model(windows[:, :-1]).logits.float()
    model.train(was_training)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()
    return min(loss, UNIFORM) if math.isfinite(loss) else UNIFORM


def spread_baselines(n: int) -> dict[str, float]:
    """:func:`baselines` on :func:`spread_targets`."""
    train_tokens, val = data()
    targets = spread_targets(n).numpy()
    return {name: float(ByteNgram(o).fit(train_tokens).nll(val, targets).mean())
            for name, o in (("unigram", 1), ("bigram", 2), ("5-gram", 5))}


def train_spread(placement: str, n_layers: int, lr: float, warmup: int, seed: int, p: dict,
                 prefix: int | None = None) -> dict:
    """:func:`train_placement`, scored on :func:`spread_targets` instead of the first windows.

    The records made with :func:`train_placement` keep it unchanged (their fingerprints name
    it); a record re-made from now on should use this one."""
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or not 1 <= prefix <= p["steps"]):
        raise ValueError(f"prefix must be an int number of steps in [1, {p['steps']}], got {prefix!r}")
    torch.manual_seed(seed)
    model = model_for(placement, n_layers, p["d_model"])
    n_val = p["val_windows"]
    curve = [spread_loss(model, n_val)]

    def point(step: int, m) -> float:
        curve.append(spread_loss(m, n_val))
        if prefix is not None and step >= prefix:
            raise _Prefix
        return curve[-1]

    cfg = TrainConfig(steps=p["steps"], lr=lr, warmup=warmup, schedule="cosine", grad_clip=None,
                      weight_decay=0.0, batch_size=p["batch"], seq_len=SEQ, seed=seed,
                      eval_every=p["curve_every"], max_loss=2 * UNIFORM)
    try:
        hist = train(model, data()[0], config=cfg, callbacks={"val_loss": point}, progress=False)
    except _Prefix:
        return {"curve": curve, "loss": curve[-1], "diverged": 0.0}
    curve += [UNIFORM] * (p["steps"] // p["curve_every"] + 1 - len(curve))
    return {"curve": curve, "loss": curve[-1], "diverged": float(bool(hist.diverged))}


LRS = ("1e-2", "3e-2", "1e-1", "3e-1", "1")


def lr_variants() -> list[str]:
    """``"post lr=1e-2 warmup=0"`` ... for every placement, learning rate and warmup flag."""
    return [f"{p} lr={lr} warmup={w}" for w in (0, 1) for p in PLACEMENTS for lr in LRS]


def lr_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One run of the learning-rate sweep (``warmup=1``: ``p["warmup"]`` steps, else none)."""
    v = parse_variant(variant)
    warm = p["warmup"] if v["warmup"] == "1" else 0
    return train_placement(v["placement"], p["n_layers"], float(v["lr"]), warm, seed, p, prefix)


#: the sizes of the learning-rate sweep, shared by :data:`LR_SWEEP` and :data:`LR_LOW`
_LR_SIZES = {"cpu": dict(d_model=32, n_layers=4, steps=40, warmup=10, batch=8, curve_every=20,
                         val_windows=256),
             "long": dict(d_model=32, n_layers=8, steps=300, warmup=30, batch=8, curve_every=50,
                          val_windows=512)}

LR_SWEEP = Experiment(
    "ch11_lr", lr_run, variants=lr_variants(), seeds=[0, 1, 2],
    sizes=_LR_SIZES,
    prefix={"cpu": 20, "long": 50},
    description="chapter 11: post- vs pre-norm over a learning-rate grid, with and without warmup")

#: the same recipe at two rates below :data:`LR_SWEEP`'s grid (whose lowest rate, 1e-2, is
#: already above post-norm's usable range): does each placement train somewhere?
LR_LOW = Experiment(
    "ch11_lr_low", lr_run,
    variants=[f"{p} lr={lr} warmup={w}" for w in (0, 1) for p in ("post", "pre") for lr in ("1e-3", "3e-3")],
    seeds=[0, 1, 2],
    sizes=_LR_SIZES,
    prefix={"cpu": 20, "long": 50},
    description="chapter 11: the learning-rate sweep's recipe at 1e-3 and 3e-3, below its grid")

DEPTHS = (6, 12, 24)


def depth_variants() -> list[str]:
    """``"post L=6"`` ... for every placement and depth."""
    return [f"{p} L={L}" for p in PLACEMENTS for L in DEPTHS]


def depth_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One run of the depth experiment at the recipe's ``lr`` and ``warmup``."""
    v = parse_variant(variant)
    return train_placement(v["placement"], int(v["L"]), p["lr"], p["warmup"], seed, p, prefix)


DEPTH = Experiment(
    "ch11_depth", depth_run, variants=depth_variants(), seeds=[0, 1, 2, 3, 4, 5],
    sizes={"cpu": dict(d_model=32, steps=56, lr=1e-2, warmup=18, batch=8, curve_every=28,
                       val_windows=256),
           "long": dict(d_model=32, steps=300, lr=1e-2, warmup=18, batch=8, curve_every=50,
                        val_windows=512)},
    prefix=50, description="chapter 11: post- vs pre-norm at 6, 12 and 24 layers, six paired seeds")

#: :data:`DEPTH`'s recipe at lr 3e-3, post-norm's largest no-warmup rate in the sweep, so that
#: post-norm can train at the shallow depths and a failure at depth is not the rate's alone
DEPTH_LOW = Experiment(
    "ch11_depth_low", depth_run, variants=depth_variants(), seeds=[0, 1, 2, 3, 4, 5],
    sizes={size: dict(p, lr=3e-3) for size, p in DEPTH.sizes.items()},
    prefix=50, description="chapter 11: ch11_depth's recipe at lr 3e-3, six paired seeds")


def warm_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One run of :data:`DEPTH_WARM`: ``"post warmup=18"`` is post-norm with an 18-step warmup,
    at the size's ``n_layers``, ``lr`` and ``steps``."""
    v = parse_variant(variant)
    return train_placement(v["placement"], p["n_layers"], p["lr"], int(v["warmup"]), seed, p, prefix)


def spread_warm_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """:func:`warm_run` scored on :func:`spread_targets` (:func:`train_spread`)."""
    v = parse_variant(variant)
    return train_spread(v["placement"], p["n_layers"], p["lr"], int(v["warmup"]), seed, p, prefix)


#: :data:`DEPTH_LOW`'s deepest stack (24 layers, lr 3e-3) trained 4x longer, post-norm with that
#: recipe's 18-step warmup and with a 300-step one, pre-norm with 300: is the failure at 24 layers
#: depth's, or the short warmup's?
DEPTH_WARM = Experiment(
    "ch11_depth_warm", warm_run, variants=["post warmup=18", "post warmup=300", "pre warmup=300"],
    seeds=[0, 1, 2],
    sizes={"cpu": dict({k: v for k, v in DEPTH_LOW.sizes["cpu"].items() if k != "warmup"},
                       n_layers=6, steps=100, curve_every=50),
           "long": dict({k: v for k, v in DEPTH_LOW.sizes["long"].items() if k != "warmup"},
                        n_layers=24, steps=1200, curve_every=100)},
    prefix=100, description="chapter 11: 24-layer post-norm at lr 3e-3 with an 18- and a 300-step "
                            "warmup, pre-norm with 300, 1200 steps")
