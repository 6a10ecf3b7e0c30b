"""Chapter 18's experiment: Gemma 3's own ablation, window size and local:global ratio against
held-out loss.

The Gemma 3 report trained models with sliding-window layers in different local:global ratios
and windows and found perplexity barely moved. :func:`window_run` trains one byte-level model of
six layers whose layer pattern is one of :data:`VARIANTS` (all global; 5 local : 1 global with a
short or a long window; every layer local, the control) and returns its
held-out loss on windows longer than the short span, so the local layers see less than the
whole context. Everything but the attention span is shared: width, depth, data, seeds, batches.

Every training and evaluation window starts with a fixed beginning-of-sequence token
(:data:`BOS`, id 256, past the 256 bytes), as real models' windows do: a key that is always
there is where attention sinks form (Xiao et al., 2024; Gu et al., 2025), and a global layer can
park attention on it while a local layer loses sight of it after its window. Each run also
measures what a reader needs to judge the control: the sink mass on :data:`BOS` per layer, and
the cost of cutting every layer of the trained model to the short window (how much of the loss
comes from context beyond it).
"""

from __future__ import annotations

import torch

from ..evidence import Experiment

__all__ = ["VARIANTS", "SEEDS", "SIZES", "WINDOWS", "BOS", "layer_windows", "window_run",
           "bos_batches", "with_bos", "sink_mass"]

#: The beginning-of-sequence token put before every window (one id past the 256 bytes).
BOS = 256

SEEDS = (0, 1, 2)
VARIANTS = ("all global", "5:1, short window", "5:1, long window", "all local, short window")
SIZES = {
    "cpu": dict(d_model=32, n_layers=6, n_heads=4, short=8, long=24, seq_len=64, steps=100,
                lr=3e-3, warmup=20, batch=16, eval_every=50, val_windows=32),
    "long": dict(d_model=48, n_layers=6, n_heads=4, short=12, long=36, seq_len=96, steps=1000,
                 lr=3e-3, warmup=20, batch=16, eval_every=100, val_windows=48),
}
#: (local layers, global layers) per repeat and which window, per variant.
#: "2:1, short window" is kept for layer_windows (not run: the record holds the four variants).
WINDOWS = {"all global": (0, 1, None), "5:1, short window": (5, 1, "short"),
           "5:1, long window": (5, 1, "long"), "2:1, short window": (2, 1, "short"),
           "all local, short window": (1, 0, "short")}


def layer_windows(variant: str, *, n_layers: int, short: int, long: int, **_) -> tuple:
    """Each layer's window (None: global), local layers first in each repeat, as in Gemma 3."""
    if variant not in WINDOWS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}")
    local, glob, which = WINDOWS[variant]
    span = {"short": short, "long": long, None: None}[which]
    period = local + glob
    return tuple(span if i % period < local else None for i in range(n_layers))


def with_bos(windows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, targets)`` for byte windows ``(N, T)``: ``inputs = [BOS, w_0 .. w_{T-2}]``,
    ``targets = w``, so the model reads :data:`BOS` first and predicts every byte of the window."""
    if windows.ndim != 2 or windows.shape[1] < 2:
        raise ValueError(f"windows must be (N, T) with T >= 2, got shape {tuple(windows.shape)}")
    bos = torch.full_like(windows[:, :1], BOS)
    return torch.cat([bos, windows[:, :-1]], 1), windows


def bos_batches(tokens: torch.Tensor, *, batch: int, seq_len: int):
    """A batch source for :func:`~llmviz.training.train`: ``generator -> (inputs, targets)``,
    ``batch`` windows of ``seq_len`` bytes at random offsets of ``tokens``, each led by BOS."""
    if tokens.ndim != 1 or len(tokens) <= seq_len:
        raise ValueError(f"tokens must be a 1-D stream longer than seq_len={seq_len}, "
                         f"got shape {tuple(tokens.shape)}")

    def draw(generator):
        starts = torch.randint(0, len(tokens) - seq_len, (batch,), generator=generator)
        return with_bos(torch.stack([tokens[s: s + seq_len] for s in starts.tolist()]))

    return draw


@torch.no_grad()
def sink_mass(model, inputs: torch.Tensor, *, skip: int = 8) -> dict[str, list[float]]:
    """``{"L0": [head 0, head 1, ...], ...}``: per layer and head, the attention the queries past
    position ``skip`` put on key 0, divided by the share flat causal attention would give it
    (1 = no preference, and a windowed layer whose window has passed key 0 scores 0)."""
    out = model(inputs, return_weights=True)
    q = torch.arange(skip, inputs.shape[1], device=inputs.device)
    flat = float((1.0 / (q + 1).float()).mean())
    return {f"L{i}": [float(w[:, h, skip:, 0].mean()) / flat for h in range(w.shape[1])]
            for i, w in enumerate(out.weights)}


def window_run(variant: str, seed: int, *, prefix: int | None = None, **params) -> dict:
    """Train ``variant`` on ``seed``: ``{"loss" (held-out nats/byte), "curve" (at step 0,
    eval_every, ...)}``; with ``prefix`` stop after that many steps, on the full run's learning-rate
    schedule (so a prefix reproduces the start of a recorded curve)."""
    from ..model import DecoderLM, ModelConfig
    from ..runtime import device as best_device
    from ..training import TrainConfig, train
    from .ch16 import data

    dev = best_device()
    steps = params["steps"]
    stop = None if prefix is None else min(int(prefix), steps)
    train_tokens, val = data()
    T = params["seq_len"]
    windows = val[: len(val) // T * T].view(-1, T)[: params["val_windows"]].to(dev)
    val_in, val_tgt = with_bos(windows)
    config = ModelConfig(vocab_size=BOS + 1, d_model=params["d_model"], n_layers=params["n_layers"],
                         n_heads=params["n_heads"], max_seq_len=T, position="rope",
                         layer_windows=layer_windows(variant, **params))
    torch.manual_seed(seed)
    model = DecoderLM(config).to(dev)

    def val_loss(step, m):
        # scored on bytes 1 .. T-1 of each window, the byte bigram's targets
        with torch.no_grad():
            logits = m(val_in).logits[:, 1:].float()
        return float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), val_tgt[:, 1:].flatten()))

    class _Stop(Exception):
        """Ends a prefix run at its step; the schedule stays the full run's."""

    def scored(step, m):
        value = val_loss(step, m)
        if stop is not None and step >= stop and step % params["eval_every"] == 0:
            curve.append(value)
            raise _Stop
        return value

    curve = [val_loss(0, model.eval())]
    if stop == 0:
        return {"loss": curve[0], "curve": curve}
    try:
        hist = train(model.train(), bos_batches(train_tokens, batch=params["batch"], seq_len=T),
                     config=TrainConfig(
            steps=steps, lr=params["lr"], warmup=params["warmup"], batch_size=params["batch"],
            seq_len=T, eval_every=params["eval_every"], seed=seed, device=dev), progress=False,
            callbacks={"val": scored})
    except _Stop:
        return {"loss": curve[-1], "curve": curve}
    curve += [v for s, v in zip(hist.metric_steps, hist.metrics["val"])
              if s % params["eval_every"] == 0]
    loss = val_loss(steps, model.eval())
    # the same weights with every layer cut to the short window: what context beyond it is worth
    cut = DecoderLM(config.replace(layer_windows=(params["short"],) * params["n_layers"])).to(dev)
    cut.load_state_dict(model.state_dict())
    return {"loss": loss, "curve": curve, "cut_cost": val_loss(steps, cut.eval()) - loss,
            "sink_mass": sink_mass(model, val_in)}


WINDOW_ABLATION = Experiment(
    "ch18_windows", window_run, variants=VARIANTS, seeds=SEEDS, sizes=SIZES, prefix=50,
    description="Gemma 3's ablation at byte level: local:global ratio and window against loss")
