"""Chapter 3's uptraining experiment: an MHA model converted to grouped-query attention.

Ainslie et al. (2023) convert a trained multi-head checkpoint to GQA by mean-pooling the key and
value projections of each group, then train briefly ("uptraining"). :func:`uptrain_run` repeats
that on a small model and the induction task of chapter 2 (a random period and start in every
sequence), for one seed: it trains an MHA teacher, converts every layer to ``groups`` kv heads
three ways (mean-pool, keep the first head of each group, fresh key/value weights) and uptrains
each start on the same batches for the same steps. Two references come from the same seed: the
teacher trained for the same extra steps (the compute-matched reference) and a grouped model
trained from scratch for the teacher's and the uptraining's steps together.

The chapter runs three seeds live at the ``cpu`` size with :func:`uptrain_live` (the same run
without the from-scratch reference, which only the record is read for); :data:`UPTRAIN`'s
``long`` size is the same recipe on eleven seeds, recorded (``python -m llmviz.evidence.records run ch03_uptrain
--size long``), because three seeds leave most of its comparisons unresolved.
"""

from __future__ import annotations

import copy

import torch

from ..evidence import Experiment

__all__ = ["STARTS", "SIZES", "UPTRAIN", "uptrain_run", "uptrain_live", "first_head_of_group",
           "convert"]

#: The three ways to start the grouped model from the teacher.
STARTS = ("mean-pool", "first head", "random k/v")
_COMMON = dict(seq_len=32, vocab=32, d_model=64, n_layers=2, n_heads=8, groups=2, d_ff=64,
               lr=1e-3, batch=32, val_size=128, periods=[2, 16])
SIZES = {
    "cpu": dict(_COMMON, teacher_steps=450, uptrain_steps=80),
    "long": dict(_COMMON, teacher_steps=450, uptrain_steps=80),
}
_VAL_SEED = 99
_TEACHER_EVERY = 20  # the teacher's curve points; the reproducibility prefix is one of them


def first_head_of_group(layer, groups: int):
    """The baseline conversion: keep kv head 0 of every group instead of the group's mean."""
    from ..attention import gqa_from_mha

    out = gqa_from_mha(layer, groups)
    r, d = layer.n_heads // groups, layer.head_dim
    with torch.no_grad():
        for name in ("k_proj", "v_proj"):
            w = getattr(layer, name).weight.view(groups, r, d, -1)[:, 0]  # (G, D, C)
            getattr(out, name).weight.copy_(w.reshape(groups * d, -1))
    return out


def convert(model, groups: int, how, fresh=None):
    """A copy of ``model`` with every layer converted to ``groups`` kv heads by ``how``; with
    ``fresh`` (an untrained grouped model), its key and value weights replace the converted ones."""
    out = copy.deepcopy(model)
    for i, block in enumerate(out.layers):
        block.self_attn = how(block.self_attn, groups)
        if fresh is not None:
            with torch.no_grad():
                for name in ("k_proj", "v_proj"):
                    getattr(block.self_attn, name).weight.copy_(
                        getattr(fresh.layers[i].self_attn, name).weight)
    return out


def uptrain_run(variant: str, seed: int, *, prefix: int | None = None, scratch: bool = True,
                **p) -> dict:
    """One seed: the teacher, its three grouped starts uptrained, and the two references.

    Returns ``{"teacher": {"loss", "acc"}, "curve" (the teacher's loss every 20 steps from step
    0), <start>: {"before", "after", "curve"} for each of :data:`STARTS`, "teacher+": {"after"},
    "scratch": {"after"}}`` (losses in nats on the
    induction positions of one fixed evaluation set). With ``prefix`` it trains the teacher that
    many steps and returns ``{"curve": [loss at step 0, loss at prefix]}``; with ``scratch=False``
    it leaves out the from-scratch model (:func:`uptrain_live`).
    """
    from ..attention import gqa_from_mha
    from ..model import DecoderLM, ModelConfig
    from ..runtime import device as best_device
    from ..training import TrainConfig, masked_cross_entropy, train
    from ..training.data import induction_task

    if variant != "uptrain":
        raise ValueError(f"variant={variant!r} is not one of ['uptrain']")
    steps = p["teacher_steps"]
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or not 1 <= prefix <= steps):
        raise ValueError(f"prefix must be an int number of teacher steps in [1, {steps}], "
                         f"got {prefix!r}")
    dev = best_device()
    periods = range(p["periods"][0], p["periods"][1] + 1)
    small = ModelConfig(vocab_size=p["vocab"], d_model=p["d_model"], n_layers=p["n_layers"],
                        n_heads=p["n_heads"], ffn="mlp", d_ff=p["d_ff"], max_seq_len=p["seq_len"],
                        position="learned", tie_embeddings=False)
    val = induction_task(batch_size=p["val_size"], seq_len=p["seq_len"], vocab_size=p["vocab"],
                         periods=periods, generator=torch.Generator().manual_seed(_VAL_SEED),
                         device=dev)
    every = p["uptrain_steps"] // 5

    def task(g):
        return induction_task(batch_size=p["batch"], seq_len=p["seq_len"], vocab_size=p["vocab"],
                              periods=periods, generator=g)

    def val_loss(model):
        with torch.no_grad():
            return float(masked_cross_entropy(model(val.inputs).logits, val.targets, val.mask))

    def val_accuracy(model):
        with torch.no_grad():
            right = model(val.inputs).logits.argmax(-1) == val.targets
            return float(right[val.mask].float().mean())

    def fit(model, n, *, seed, curve=False):
        cfg = TrainConfig(steps=n, lr=p["lr"], warmup=0, schedule="constant", weight_decay=0.0,
                          grad_clip=None, seed=seed, eval_every=every if curve else 0, device=dev)
        return train(model, task, config=cfg, progress=False,
                     callbacks={"val": lambda step, m: val_loss(m)} if curve else ())

    torch.manual_seed(seed)
    teacher = DecoderLM(small).to(dev)
    start = val_loss(teacher)
    if prefix is not None:  # the teacher's first steps (a constant rate: the same as the run's)
        fit(teacher, prefix, seed=seed)
        return {"curve": [start, val_loss(teacher)]}
    cfg = TrainConfig(steps=steps, lr=p["lr"], warmup=0, schedule="constant", weight_decay=0.0,
                      grad_clip=None, seed=seed, eval_every=_TEACHER_EVERY, device=dev)
    hist = train(teacher, task, config=cfg, progress=False,
                 callbacks={"val": lambda step, m: val_loss(m)})
    teacher_curve = [start] + [float(v) for s, v in zip(hist.metric_steps, hist.metrics["val"])
                               if s % _TEACHER_EVERY == 0]
    groups, up = p["groups"], p["uptrain_steps"]
    torch.manual_seed(10_000 + seed)
    fresh = DecoderLM(small.replace(n_kv_heads=groups)).to(dev)  # the model's own initialisation
    out = {"teacher": {"loss": val_loss(teacher), "acc": val_accuracy(teacher)},
           "curve": teacher_curve}  # the teacher's loss every _TEACHER_EVERY steps from step 0
    for name, how, src in (("mean-pool", gqa_from_mha, None),
                           ("first head", first_head_of_group, None),
                           ("random k/v", gqa_from_mha, fresh)):
        student = convert(teacher, groups, how, src)
        before = val_loss(student)
        hist = fit(student, up, seed=1_000 + seed, curve=True)
        curve = [before] + [float(v) for v in hist.metrics["val"]]
        out[name] = {"before": before, "after": float(hist.metrics["val"][-1]), "curve": curve}
    hist = fit(teacher, up, seed=1_000 + seed, curve=True)  # the compute-matched reference
    out["teacher+"] = {"after": float(hist.metrics["val"][-1])}
    if not scratch:  # the live seeds: the page reads the from-scratch model from the record only
        return out
    torch.manual_seed(20_000 + seed)
    model = DecoderLM(small.replace(n_kv_heads=groups)).to(dev)
    fit(model, steps + up, seed=seed)
    out["scratch"] = {"after": val_loss(model)}
    return out


def uptrain_live(seed: int, **p) -> dict:
    """:func:`uptrain_run` for one seed without its last part, the grouped model trained from
    scratch (the longest of its runs): the chapter's live seeds, which read only the teacher, the
    three starts and the compute-matched teacher. Returns :func:`uptrain_run`'s dict without
    ``"scratch"``; every other number is the one it returns for the same seed."""
    return uptrain_run("uptrain", seed, scratch=False, **p)


UPTRAIN = Experiment(
    "ch03_uptrain", uptrain_run, variants=["uptrain"], seeds=list(range(11)), sizes=SIZES,
    prefix=20, description="chapter 3: an MHA teacher converted to GQA three ways and uptrained, "
                           "with a compute-matched teacher and a GQA model from scratch")
