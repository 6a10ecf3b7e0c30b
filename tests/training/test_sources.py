"""Tests for llmviz.training.train with other batch sources, extra loss terms and callbacks."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn

from llmviz.training.batches import Batch, as_batch
from llmviz.training.config import TrainConfig
from llmviz.training.data import induction_task
from llmviz.training.loop import train
from llmviz.training.losses import masked_cross_entropy

CFG = dict(steps=8, lr=1e-2, warmup=0, schedule="constant", weight_decay=0.0, grad_clip=None)


class PositionTable(nn.Module):
    """Logits are a free table per position, ``(T, V)``: position t's loss moves row t only."""

    def __init__(self, T: int = 6, V: int = 10):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(T, V))

    def forward(self, input_ids):
        return self.table[None].expand(input_ids.shape[0], -1, -1)  # (B, T, V)


def _batch(B=4, T=6, V=10, seed=0, mask=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    return (x, y) if mask is None else (x, y, mask)


def _lm(seed=0, vocab=16):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Embedding(vocab, 16), nn.Linear(16, vocab))


# ----------------------------------------------------------------------------- batch sources
def test_loss_mask_trains_only_the_kept_position():
    mask = torch.zeros(4, 6, dtype=torch.bool)
    mask[:, 3] = True
    model = PositionTable()
    hist = train(model, [_batch(mask=mask)] * 8, config=TrainConfig(**CFG), progress=False)
    moved = model.table.detach().abs().sum(-1)  # (T,)
    assert moved[3] > 0
    assert torch.equal(moved[[0, 1, 2, 4, 5]], torch.zeros(5))
    assert hist.loss[-1] < hist.loss[0]


def test_function_source_gets_the_seeded_generator():
    """A function source draws from a generator seeded with config.seed: same seed, same run."""
    cfg = TrainConfig(**CFG, seed=3)

    def task(g):
        return induction_task(batch_size=4, seq_len=8, vocab_size=16, generator=g)

    h1 = train(_lm(), task, config=cfg, progress=False)
    h2 = train(_lm(), task, config=cfg, progress=False)
    assert h1.loss == h2.loss
    first = task(torch.Generator().manual_seed(3))  # the first batch the run saw
    with torch.no_grad():
        expected = masked_cross_entropy(_lm()(first.inputs), first.targets, first.mask)
    assert h1.loss[0] == pytest.approx(expected.item(), rel=1e-6)
    assert train(_lm(), task, config=TrainConfig(**CFG, seed=4), progress=False).loss != h1.loss


def test_iterator_source_is_read_once_per_step():
    gen = torch.Generator().manual_seed(0)
    stream = (induction_task(batch_size=4, seq_len=8, vocab_size=16, generator=gen)
              for _ in itertools.count())
    train(_lm(), stream, config=TrainConfig(**CFG), progress=False)
    # the iterator advanced exactly `steps` times: its next batch is the 9th
    replay = torch.Generator().manual_seed(0)
    for _ in range(8):
        induction_task(batch_size=4, seq_len=8, vocab_size=16, generator=replay)
    ninth = induction_task(batch_size=4, seq_len=8, vocab_size=16, generator=replay)
    assert torch.equal(next(stream).inputs, ninth.inputs)


def test_batch_source_errors():
    cfg = TrainConfig(**CFG)
    with pytest.raises(ValueError, match=r"ran out after 2 batches but config.steps is 8"):
        train(_lm(), [_batch(V=16)] * 2, config=cfg, progress=False)
    with pytest.raises(TypeError, match="does not take one; write e.g. lambda g"):
        train(_lm(), lambda: _batch(V=16), config=cfg, progress=False)
    with pytest.raises(TypeError, match="data must be a \\(N,\\) token tensor"):
        train(_lm(), 42, config=cfg, progress=False)
    with pytest.raises(TypeError, match=r"a batch must be \(inputs, targets\)"):
        train(_lm(), [torch.zeros(2, 3, dtype=torch.long)] * 8, config=cfg, progress=False)
    x, y = _batch()
    with pytest.raises(ValueError, match=r"batch targets have shape \(4, 5\) but inputs \(4, 6\)"):
        as_batch((x, y[:, :5]))
    with pytest.raises(TypeError, match="batch mask must be a bool tensor"):
        as_batch((x, y, torch.ones(4, 6)))
    with pytest.raises(ValueError, match=r"batch mask has shape \(4, 5\)"):
        as_batch((x, y, torch.ones(4, 5, dtype=torch.bool)))
    assert as_batch((x, y)) == Batch(x, y, None)


# ----------------------------------------------------------------------------- loss terms
def test_extra_loss_term_changes_the_gradient_by_its_own():
    """The recorded pre-clip gradient norm is that of CE + term on the first batch."""
    batch = _batch(V=16)
    cfg = TrainConfig(**{**CFG, "steps": 1})

    def logit_penalty(output, b):
        return 0.5 * output.square().mean()

    hist = train(_lm(), [batch], config=cfg, loss_terms=[logit_penalty], progress=False)
    plain = train(_lm(), [batch], config=cfg, progress=False)
    model = _lm()
    ce = masked_cross_entropy(model(batch[0]), batch[1])
    term = logit_penalty(model(batch[0]), None)
    (ce + term).backward()
    norm = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
    assert hist.grad_norm[0] == pytest.approx(norm, rel=1e-5)
    assert hist.grad_norm[0] != pytest.approx(plain.grad_norm[0], rel=1e-3)
    assert hist.terms["logit_penalty"][0] == pytest.approx(term.item(), rel=1e-6)
    assert hist.cross_entropy[0] == pytest.approx(plain.loss[0], rel=1e-6)
    assert hist.loss[0] == pytest.approx(ce.item() + term.item(), rel=1e-6)


def test_a_term_that_is_zero_changes_nothing():
    cfg = TrainConfig(**CFG)
    src = [_batch(V=16)] * 8
    a = train(_lm(), src, config=cfg, progress=False)
    b = train(_lm(), src, config=cfg, loss_terms={"zero": lambda out, b: 0.0 * out.sum()},
              progress=False)
    assert a.loss == b.loss and b.terms["zero"] == [0.0] * 8


def test_loss_term_errors():
    cfg = TrainConfig(**CFG)
    src = [_batch(V=16)] * 8
    with pytest.raises(TypeError, match="loss term 'vec' must return a scalar tensor"):
        train(_lm(), src, config=cfg, loss_terms={"vec": lambda out, b: out.mean(-1)},
              progress=False)
    with pytest.raises(TypeError, match="each of loss_terms must be callable"):
        train(_lm(), src, config=cfg, loss_terms=[1.0], progress=False)

    def same(out, b):
        return out.mean()

    with pytest.raises(ValueError, match="two loss_terms are named 'same'"):
        train(_lm(), src, config=cfg, loss_terms=[same, same], progress=False)


# ----------------------------------------------------------------------------- callbacks
def test_callbacks_run_every_eval_every_steps_in_eval_mode():
    seen = []

    def weight_norm(step, model):
        seen.append((step, model.training))
        return model[1].weight.norm()

    model = _lm()
    before = model[1].weight.norm().item()
    hist = train(model, [_batch(V=16)] * 9, config=TrainConfig(**{**CFG, "steps": 9}, eval_every=4),
                 callbacks={"w": weight_norm, "both": lambda s, m: {"step": s, "half": s / 2}},
                 progress=False)
    assert hist.metric_steps == [4, 8, 9] and [s for s, _ in seen] == [4, 8, 9]
    assert not any(training for _, training in seen)
    assert hist.metrics["both.step"] == [4.0, 8.0, 9.0] and hist.metrics["both.half"][0] == 2.0
    assert hist.metrics["w"][-1] == pytest.approx(model[1].weight.norm().item())
    assert hist.metrics["w"][0] != pytest.approx(before)
    assert hist.eval_steps == []  # no val_tokens: no length evaluation


def test_callback_errors():
    with pytest.raises(TypeError, match="callback 'bad' returned str"):
        train(_lm(), [_batch(V=16)] * 8, config=TrainConfig(**CFG), callbacks={"bad": lambda s, m: "x"},
              progress=False)
    with pytest.raises(TypeError, match=r"callback 'vec' returned a tensor of shape \(2,\)"):
        train(_lm(), [_batch(V=16)] * 8, config=TrainConfig(**CFG),
              callbacks={"vec": lambda s, m: torch.zeros(2)}, progress=False)
    assert math.isfinite(train(_lm(), [_batch(V=16)] * 8, config=TrainConfig(**CFG),
                               callbacks=[], progress=False).final_loss)
