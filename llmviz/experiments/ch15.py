"""Chapter 15's experiment: the small Llama trained longer than the live page can afford.

:func:`train_llama` trains the chapter's model (``llama2`` shrunk to width 64, 3 layers, 4
query heads sharing 2 key/value heads, a window of 64 bytes) on the training head of the prose
corpus and scores it every ``curve_every`` steps, from step 0, on every target of the held-out
tail cut into windows of the training length (:func:`val_targets`, the targets the chapter's
byte n-gram baselines are scored on). The chapter's live cell calls it at size ``cpu``;
:data:`LLAMA` records it at size ``long`` (width 96, 4 layers, 3000 steps), where the question
"does it beat the strongest byte n-gram?" gets an answer.

Everything is built on :func:`llmviz.device`; nothing runs at import.
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

__all__ = ["LLAMA", "SIZES", "data", "val_windows", "val_targets", "config_for", "train_config",
           "val_loss", "train_llama", "llama"]

_MODEL = dict(d_model=64, n_layers=3, n_heads=4, n_kv_heads=2, seq_len=64, lr=5e-3, warmup=30,
              batch_size=32)
#: ``cpu`` is what the chapter trains live; ``long`` is the same recipe with a wider, deeper
#: model (width 96, 4 layers) for 3000 steps, tried because at width 64 and 1600 steps every seed
#: ended behind the Kneser-Ney byte 7-gram (1.244-1.270 against 1.210 nats/byte). It does not
#: beat it either: its held-out loss bottoms out at steps 2000-2200 (1.223-1.230) and then rises
SIZES = {
    "cpu": dict(_MODEL, steps=300, curve_every=50),
    "long": dict(_MODEL, d_model=96, n_layers=4, steps=3000, curve_every=100),
}


class _Prefix(Exception):
    """Raised by the curve callback to stop a run after its prefix."""


@functools.lru_cache(maxsize=1)
def data() -> tuple[torch.Tensor, torch.Tensor]:
    """The byte streams of the prose corpus: (training head, held-out tail of 10 %)."""
    return train_val_split(ByteTokenizer().encode(load_corpus("prose")), 0.1)


def val_windows(seq_len: int) -> torch.Tensor:
    """The held-out tail cut into ``(N, seq_len)`` windows (the ragged end dropped)."""
    val = data()[1]
    return val[: len(val) // seq_len * seq_len].view(-1, seq_len)


def val_targets(seq_len: int) -> torch.Tensor:
    """Indices into the held-out stream of the targets :func:`val_loss` scores: every position
    of each window but its first (which has no context inside the window)."""
    n = len(val_windows(seq_len))
    return (torch.arange(n)[:, None] * seq_len + torch.arange(1, seq_len)).flatten()


def config_for(p: dict):
    """The chapter's ``llama2`` config at size ``p``."""
    return llama2(d_model=p["d_model"], n_layers=p["n_layers"], n_heads=p["n_heads"],
                  n_kv_heads=p["n_kv_heads"], max_seq_len=p["seq_len"])


def train_config(p: dict, seed: int) -> TrainConfig:
    """The training run of size ``p`` with ``seed`` (it seeds the batches)."""
    return TrainConfig(steps=p["steps"], lr=p["lr"], warmup=p["warmup"], seed=seed,
                       batch_size=p["batch_size"], seq_len=p["seq_len"],
                       eval_every=p["curve_every"])


def val_loss(model, seq_len: int) -> float:
    """Mean loss (nats/byte) on every target of :func:`val_targets`."""
    windows = val_windows(seq_len).to(next(model.parameters()).device)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits = model(windows[:, :-1]).logits.float()
    model.train(was_training)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()


def window_losses(model, seq_len: int) -> torch.Tensor:
    """The targets of :func:`val_loss` scored window by window: the mean loss (nats/byte) of each
    window of :func:`val_windows`, shape ``(N,)`` on the CPU (their mean is :func:`val_loss`)."""
    windows = val_windows(seq_len).to(next(model.parameters()).device)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits = model(windows[:, :-1]).logits.float()
    model.train(was_training)
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none")
    return nll.mean(1).cpu()


def train_llama(seed: int, p: dict, prefix: int | None = None):
    """Train the chapter's model with ``seed`` at size ``p``.

    Returns ``(model, history, curve)``: ``curve[i]`` is :func:`val_loss` after
    ``i * curve_every`` steps (``curve[0]`` before training). With ``prefix`` the run stops at
    the first curve point at or past ``prefix`` steps (the schedule is the full run's).
    """
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or not 1 <= prefix <= p["steps"]):
        raise ValueError(f"prefix must be an int number of training steps in [1, {p['steps']}], "
                         f"got {prefix!r}")
    torch.manual_seed(seed)  # the initialisation; the run's config seeds the batches
    model = DecoderLM(config_for(p)).to(runtime.device())
    curve = [val_loss(model, p["seq_len"])]

    def point(step: int, m) -> float:
        curve.append(val_loss(m, p["seq_len"]))
        if prefix is not None and step >= prefix:
            raise _Prefix
        return curve[-1]

    history = None
    try:
        history = train(model, data()[0], config=train_config(p, seed),
                        callbacks={"val_loss": point}, progress=False)
    except _Prefix:
        pass
    return model, history, curve


def llama(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One seed of the small Llama at size ``p``: ``curve`` (held-out loss from step 0, every
    ``curve_every`` steps), ``val_loss`` (the last point, nats/byte) and, after a whole run,
    ``window_loss`` (the last model's loss on each held-out window, :func:`window_losses`: what
    lets a page split the windows that occur verbatim in the training text from the rest)."""
    if variant != "llama":
        raise ValueError(f"unknown variant {variant!r}; ch15_llama has one variant, 'llama'")
    model, _, curve = train_llama(seed, p, prefix)
    out = {"curve": curve, "val_loss": curve[-1]}
    if prefix is None:
        out["window_loss"] = window_losses(model, p["seq_len"]).tolist()
    return out


LLAMA = Experiment("ch15_llama", llama, variants=["llama"], seeds=[0, 1, 2], sizes=SIZES,
                   prefix=100, description="chapter 15's small Llama, held-out loss vs steps")
