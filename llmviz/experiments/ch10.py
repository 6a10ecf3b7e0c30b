"""Chapter 10's experiment: LayerNorm against RMSNorm in training.

:data:`NORMS` trains the same small Llama-style model (width 64, 3 layers, 4 query heads sharing
2 key/value heads, RoPE, SwiGLU, pre-norm, a window of 64 bytes) twice per seed, once with
RMSNorm and once with LayerNorm (with its bias) in every norm, on the training head of the prose
corpus, with the same initialisation seed and the same batches. It scores the held-out tail
every ``curve_every`` steps from step 0, on every target of the tail cut into windows of the
training length (:func:`val_targets`, the targets :func:`ngram_losses` scores the byte n-grams
on). The chapter's live cell runs size ``cpu``; the ``long`` record (1200 steps, where this
model passes the byte 5-gram) is the one that decides.

Self-contained on purpose (its own data and scoring helpers) so that no other chapter's code
enters the record's fingerprint. Everything is built on :func:`llmviz.device`; nothing runs at
import.
"""

from __future__ import annotations

import functools

import torch

from .. import runtime
from ..evidence import Experiment
from ..model import DecoderLM
from ..model.presets import llama2
from ..training import TrainConfig, train
from ..training.data import ByteTokenizer, load_corpus, train_val_split
from ..training.kneser_ney import NgramBaseline, best_ngram
from ..training.ngram import ByteNgram

__all__ = ["NORMS", "SIZES", "VARIANTS", "data", "val_targets", "val_loss", "ngram_losses",
           "strongest_ngram", "norm_run"]

#: variant name -> the ``ModelConfig.norm`` it trains with
VARIANTS = {"RMSNorm": "rms", "LayerNorm": "layer"}
_MODEL = dict(d_model=64, n_layers=3, n_heads=4, n_kv_heads=2, seq_len=64, lr=5e-3, warmup=30,
              batch_size=32)
#: ``cpu`` is what the chapter trains live; ``long`` the same recipe for 1200 steps
SIZES = {
    "cpu": dict(_MODEL, steps=100, curve_every=50),
    "long": dict(_MODEL, steps=1200, curve_every=100),
}


class _Prefix(Exception):
    """Raised by the curve callback to stop a run after its prefix."""


@functools.lru_cache(maxsize=1)
def data() -> tuple[torch.Tensor, torch.Tensor]:
    """The byte streams of the prose corpus: (training head, held-out tail of 10 %)."""
    return train_val_split(ByteTokenizer().encode(load_corpus("prose")), 0.1)


def _windows(seq_len: int) -> torch.Tensor:
    val = data()[1]
    return val[: len(val) // seq_len * seq_len].view(-1, seq_len)


def val_targets(seq_len: int) -> torch.Tensor:
    """Indices into the held-out stream of the targets :func:`val_loss` scores (every position
    of each window of ``seq_len`` bytes but its first)."""
    n = len(_windows(seq_len))
    return (torch.arange(n)[:, None] * seq_len + torch.arange(1, seq_len)).flatten()


def val_loss(model, seq_len: int) -> float:
    """Mean loss (nats/byte) on every target of :func:`val_targets`."""
    windows = _windows(seq_len).to(next(model.parameters()).device)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits = model(windows[:, :-1]).logits.float()
    model.train(was_training)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()


def ngram_losses(seq_len: int = 64, orders: tuple[int, ...] = (2, 5)) -> dict[int, float]:
    """Byte n-gram losses (nats/byte), fitted on the training head, on :func:`val_targets`."""
    train_tokens, val = data()
    targets = val_targets(seq_len).numpy()
    return {o: float(ByteNgram(o).fit(train_tokens).nll(val, targets).mean()) for o in orders}


def strongest_ngram(seq_len: int = 64) -> NgramBaseline:
    """The stronger of the book's byte n-grams (Kneser-Ney or absolute discounting, each with its
    order chosen on the training head) on :func:`val_targets`; Kneser-Ney reads only the bytes of
    the target's own window, as the model does. The gate both models must pass."""
    train_tokens, val = data()
    return best_ngram(train_tokens, val, val_targets(seq_len).numpy(), window=seq_len)


def norm_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One seed of the model with ``variant``'s norm at size ``p``: ``curve`` (held-out loss
    from step 0, every ``curve_every`` steps) and ``val_loss`` (its last point, nats/byte)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; ch10_norms has {list(VARIANTS)}")
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or not 1 <= prefix <= p["steps"]):
        raise ValueError(f"prefix must be an int number of steps in [1, {p['steps']}], got {prefix!r}")
    cfg = llama2(d_model=p["d_model"], n_layers=p["n_layers"], n_heads=p["n_heads"],
                 n_kv_heads=p["n_kv_heads"], max_seq_len=p["seq_len"], norm=VARIANTS[variant])
    torch.manual_seed(seed)  # the initialisation; the run's config seeds the batches
    model = DecoderLM(cfg).to(runtime.device())
    curve = [val_loss(model, p["seq_len"])]

    def point(step: int, m) -> float:
        curve.append(val_loss(m, p["seq_len"]))
        if prefix is not None and step >= prefix:
            raise _Prefix
        return curve[-1]

    run = TrainConfig(steps=p["steps"], lr=p["lr"], warmup=p["warmup"], seed=seed,
                      batch_size=p["batch_size"], seq_len=p["seq_len"], eval_every=p["curve_every"])
    try:
        train(model, data()[0], config=run, callbacks={"val_loss": point}, progress=False)
    except _Prefix:
        pass
    return {"curve": curve, "val_loss": curve[-1]}


NORMS = Experiment("ch10_norms", norm_run, variants=list(VARIANTS), seeds=[0, 1, 2], sizes=SIZES,
                   prefix=100, description="chapter 10: RMSNorm vs LayerNorm, held-out loss vs steps")
