"""Chapter 17's experiment: latent attention (MLA) against GQA at the same cache, with an MHA control.

Three byte-level models share width, depth, query heads, data, seeds and batches
(:func:`variants`): ``MHA`` (every head caches its own key and value), ``GQA, 1 kv head`` and
``MLA`` whose latent plus decoupled RoPE key is exactly as wide as GQA's one key plus value, so
GQA and MLA cache the same numbers per token and layer (MHA caches four times as many).

MHA is the control: at the chapter's size, does *any* attention change that costs cache show in
the held-out loss? If MHA cannot be told from one-head GQA, a null between MLA and GQA says
nothing about MLA. The models train on the byte corpus of chapter 16 and are scored on the same
held-out windows, against the same byte bigram (:func:`~llmviz.experiments.ch16.bigram_loss`).
"""

from __future__ import annotations

import torch

from ..evidence import Experiment

__all__ = ["VARIANTS", "SEEDS", "SIZES", "MLA", "variants", "mla_run"]

VARIANTS = ("MHA", "GQA, 1 kv head", "MLA")
SEEDS = tuple(range(7))
_COMMON = dict(d_model=64, n_layers=2, n_heads=4, lr=3e-3, warmup=20, batch=16, seq_len=64,
               val_windows=128)
SIZES = {
    "cpu": dict(_COMMON, steps=300, eval_every=50),
    "long": dict(_COMMON, steps=1500, eval_every=100),
}


def variants(*, d_model, n_layers, n_heads, **_) -> dict:
    """``{name: ModelConfig}`` of the three models (MLA's latent + RoPE key = GQA's key + value)."""
    from ..model import ModelConfig

    head = d_model // n_heads
    base = dict(vocab_size=256, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                max_seq_len=128, position="rope")
    return {
        "MHA": ModelConfig(**base),
        "GQA, 1 kv head": ModelConfig(**base, n_kv_heads=1),
        "MLA": ModelConfig(**base, attn_kind="mla", kv_lora_rank=2 * head - head // 2,
                           qk_nope_head_dim=head, qk_rope_head_dim=head // 2, v_head_dim=head),
    }


def mla_run(variant: str, seed: int, *, prefix: int | None = None, **params) -> dict:
    """Train ``variant`` on ``seed``; return ``{"loss", "curve" (held-out loss at step 0,
    eval_every, ...), "params"}``. With ``prefix`` it keeps the full run's learning-rate
    schedule, stops at the first curve point at or past ``prefix`` steps and returns the curve
    so far (the start of the full run's)."""
    from ..model import DecoderLM
    from ..runtime import device as best_device
    from ..training import TrainConfig
    from ._prefix import scored_run
    from .ch16 import data, eval_windows

    configs = variants(**params)
    if variant not in configs:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}")
    dev = best_device()
    train_tokens, _ = data()
    windows = eval_windows(**params).to(dev)
    torch.manual_seed(seed)
    model = DecoderLM(configs[variant]).to(dev)

    def val_loss(m, step=None):
        with torch.no_grad():
            logits = m(windows[:, :-1]).logits.float()
        return {"loss": float(torch.nn.functional.cross_entropy(logits.flatten(0, 1),
                                                                windows[:, 1:].flatten()))}

    # the full run's schedule even for a prefix, so a prefix's curve is the record's start
    curves = scored_run(model, train_tokens, TrainConfig(
        steps=params["steps"], lr=params["lr"], warmup=params["warmup"],
        batch_size=params["batch"], seq_len=params["seq_len"], eval_every=params["eval_every"],
        seed=seed, device=dev), lambda step, m: val_loss(m), prefix=prefix)
    curve = curves["loss"]
    if prefix is not None:
        return {"curve": curve}
    model.eval()
    return {"loss": val_loss(model)["loss"], "curve": curve,
            "params": float(sum(p.numel() for p in model.parameters()))}


MLA = Experiment(
    "ch17_mla", mla_run, variants=VARIANTS, seeds=SEEDS, sizes=SIZES,
    prefix={"cpu": 100, "long": 200},  # two curve points after step 0
    description="byte-level MLA against one-head GQA at the same cache bytes per token, with "
                "multi-head attention (4x the cache) as the control")
