"""Tests for llmviz.training.loop: schedule, determinism, divergence, length evaluation."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from llmviz.training import (
    History,
    LengthEval,
    TrainConfig,
    evaluate_lengths,
    lr_at,
    masked_cross_entropy,
    train,
)
from llmviz.training.losses import logits_of


@dataclass
class _Out:
    logits: torch.Tensor


class TinyLM(nn.Module):
    """Stand-in language model: embedding, a causal mean over the prefix, and a readout.

    Returns an object with ``.logits`` (like DecoderLM) or the bare tensor (``bare=True``).
    """

    def __init__(self, vocab: int = 64, d: int = 16, *, bare: bool = False, dropout: float = 0.0):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.mix = nn.Linear(2 * d, d)
        self.norm = nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(d, vocab)
        self.bare = bare

    def forward(self, input_ids, labels=None):
        h = self.emb(input_ids)  # (B, T, C)
        counts = torch.arange(1, h.shape[1] + 1, device=h.device)[None, :, None]
        prefix = h.cumsum(1) / counts  # (B, T, C)
        h = self.norm(h + torch.tanh(self.mix(torch.cat([h, prefix], -1))))
        logits = self.out(self.drop(h))
        return logits if self.bare else _Out(logits)


def _stream(n=4000, vocab=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(0, vocab, (50,), generator=g)
    return base.repeat(n // 50 + 1)[:n]  # periodic: learnable


def _fresh(seed=0, **kw):
    torch.manual_seed(seed)
    return TinyLM(**kw)


FAST = dict(steps=30, lr=1e-2, warmup=5, batch_size=8, seq_len=16)


# ----------------------------------------------------------------------------- config/schedule
def test_warmup_then_cosine_shape():
    cfg = TrainConfig(steps=100, lr=1.0, warmup=10, min_lr=0.1)
    lrs = [lr_at(s, cfg) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1)
    assert all(b > a for a, b in zip(lrs[:10], lrs[1:10]))  # linear increase
    assert lrs[9] == pytest.approx(1.0)
    assert all(b <= a + 1e-12 for a, b in zip(lrs[10:], lrs[11:]))  # monotone decay
    assert lrs[-1] == pytest.approx(0.1)
    mid = 10 + (100 - 10 - 1) / 2
    assert lr_at(int(mid), cfg) == pytest.approx(0.55, abs=0.02)  # cosine: half way at mid point


def test_constant_schedule_and_no_warmup():
    cfg = TrainConfig(steps=20, lr=0.5, warmup=0, schedule="constant")
    assert {lr_at(s, cfg) for s in range(20)} == {0.5}
    assert TrainConfig(lr=2.0).min_lr == pytest.approx(0.2)


def test_config_errors():
    with pytest.raises(ValueError, match="steps must be a positive int, got 0"):
        TrainConfig(steps=0)
    with pytest.raises(TypeError, match="batch_size must be an int, got float 8.0"):
        TrainConfig(batch_size=8.0)
    with pytest.raises(ValueError, match=r"min_lr \(1.0\) must not exceed lr \(0.1\)"):
        TrainConfig(lr=0.1, min_lr=1.0)
    with pytest.raises(ValueError, match="schedule='linear' is not supported"):
        TrainConfig(schedule="linear")
    with pytest.raises(ValueError, match=r"eval_tail \(64\) is longer than eval length\(s\) \[32\]"):
        TrainConfig(eval_lengths=(32, 128), eval_tail=64)
    with pytest.raises(ValueError, match="grad_clip must be positive"):
        TrainConfig(grad_clip=0)


# ----------------------------------------------------------------------------- training
def test_training_reduces_loss_and_records_everything():
    cfg = TrainConfig(**{**FAST, "steps": 60}, eval_every=20, eval_lengths=(16, 32))
    data = _stream()
    hist = train(_fresh(), data, config=cfg, val_tokens=_stream(seed=0), progress=False)
    assert isinstance(hist, History) and not hist.diverged
    assert len(hist.loss) == len(hist.lr) == len(hist.grad_norm) == 60
    assert hist.final_loss < hist.loss[0] - 0.5
    assert hist.eval_steps == [20, 40, 60]
    assert hist.evals[-1].lengths == (16, 32)
    assert hist.eval_loss(16)[-1] < hist.eval_loss(16)[0]
    assert hist.lr == [lr_at(s, cfg) for s in range(60)]


def test_training_is_deterministic_under_seed():
    data = _stream()
    cfg = TrainConfig(**FAST, seed=7)
    h1 = train(_fresh(dropout=0.1), data, config=cfg, progress=False)
    torch.manual_seed(123)  # the caller's RNG state must not matter
    h2 = train(_fresh(dropout=0.1), data, config=cfg, progress=False)
    assert h1.loss == h2.loss and h1.grad_norm == h2.grad_norm
    h3 = train(_fresh(dropout=0.1), data, config=TrainConfig(**FAST, seed=8), progress=False)
    assert h3.loss != h1.loss


def test_training_leaves_global_rng_alone():
    model = _fresh(dropout=0.1)
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    train(model, _stream(), config=TrainConfig(**FAST), progress=False)
    assert torch.equal(torch.rand(3), expected)


def test_weight_decay_only_on_matrices():
    class WithDead(TinyLM):
        """Two parameters with zero gradient: only decoupled weight decay can move them."""

        def __init__(self):
            super().__init__()
            self.dead_matrix = nn.Parameter(torch.ones(3, 3))
            self.dead_vector = nn.Parameter(torch.ones(3))

        def forward(self, input_ids, labels=None):
            out = super().forward(input_ids)
            zero = 0.0 * (self.dead_matrix.sum() + self.dead_vector.sum())
            return _Out(out.logits + zero)

    torch.manual_seed(0)
    model = WithDead()
    cfg = TrainConfig(steps=4, lr=0.1, warmup=0, schedule="constant", weight_decay=0.5,
                      batch_size=2, seq_len=8)
    train(model, _stream(), config=cfg, progress=False)
    assert torch.allclose(model.dead_matrix, torch.full((3, 3), (1 - 0.1 * 0.5) ** 4))
    assert torch.equal(model.dead_vector, torch.ones(3))


def test_grad_clipping_records_preclip_norm():
    cfg = TrainConfig(**{**FAST, "steps": 10}, grad_clip=1e-3)
    hist = train(_fresh(), _stream(), config=cfg, progress=False)
    assert max(hist.grad_norm) > 1e-3  # recorded before clipping


def test_divergence_with_huge_lr_stops_cleanly():
    cfg = TrainConfig(steps=200, lr=1e4, warmup=0, grad_clip=None, batch_size=8, seq_len=16)
    hist = train(_fresh(), _stream(), config=cfg, val_tokens=_stream(), progress=False)
    assert hist.diverged and hist.diverged_at is not None
    assert len(hist.loss) == hist.diverged_at + 1 < 200
    assert math.isnan(hist.final_loss)
    assert hist.evals == []


def test_max_loss_counts_as_divergence():
    cfg = TrainConfig(**FAST, max_loss=0.1)
    hist = train(_fresh(), _stream(), config=cfg, progress=False)
    assert hist.diverged and hist.diverged_at == 0


def test_bare_tensor_models_and_progress_bar(capsys):
    hist = train(_fresh(bare=True), _stream(), config=TrainConfig(**FAST), progress=True)
    assert len(hist.loss) == FAST["steps"]


def test_train_input_errors():
    with pytest.raises(TypeError, match="config must be a TrainConfig"):
        train(_fresh(), _stream(), config={"steps": 3})
    with pytest.raises(ValueError, match="must have 1 dimensions"):
        train(_fresh(), _stream().view(40, 100), config=TrainConfig(**FAST))

    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return {"logits": x}

    with pytest.raises(TypeError, match="must return the logits tensor"):
        train(Bad(), _stream(), config=TrainConfig(**FAST))
    with pytest.raises(ValueError, match=r"logits must have shape \(B, T, V\)"):
        logits_of(torch.zeros(2, 3))


# ----------------------------------------------------------------------------- evaluation
def test_masked_cross_entropy_matches_manual():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 7, generator=g)
    targets = torch.randint(0, 7, (2, 5), generator=g)
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[:, -2:] = True
    logp = logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]
    assert masked_cross_entropy(logits, targets, mask) == pytest.approx(float(-logp[:, -2:].mean()))
    assert masked_cross_entropy(logits, targets) == pytest.approx(float(-logp.mean()))


def test_evaluate_lengths_uniform_model_is_log_vocab():
    class Uniform(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return torch.zeros(*x.shape, 64) + self.w

    res = evaluate_lengths(Uniform(), _stream(), (8, 32, 64), n_windows=5, tail=8)
    assert isinstance(res, LengthEval)
    assert res.lengths == (8, 32, 64) and res.n_tokens == (40, 40, 40)
    assert res.loss == pytest.approx((math.log(64),) * 3)
    assert res.perplexity == pytest.approx((64.0,) * 3)
    assert res.as_dict("perplexity")[32] == pytest.approx(64.0)


def test_evaluate_lengths_tail_scores_last_positions():
    class PositionLoss(nn.Module):
        """Perfectly confident at even positions, uniform at odd ones."""

        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            logits = torch.zeros(*x.shape, 64)
            logits[:, 0::2] = -1e4
            return logits

    full = evaluate_lengths(PositionLoss(), torch.zeros(200, dtype=torch.long), 8, n_windows=3)
    last = evaluate_lengths(PositionLoss(), torch.zeros(200, dtype=torch.long), 8, n_windows=3,
                            tail=1)
    assert full.n_tokens == (24,) and last.n_tokens == (3,)
    assert last.loss[0] == pytest.approx(math.log(64))  # position 7 (odd): uniform
    assert 0 < full.loss[0] < last.loss[0]


def test_evaluate_lengths_batches_do_not_change_result():
    model = _fresh()
    data = _stream()
    a = evaluate_lengths(model, data, (16, 48), n_windows=7)
    b = evaluate_lengths(model, data, (16, 48), n_windows=7, batch_tokens=16)
    assert a.loss == pytest.approx(b.loss, rel=1e-5)


def test_evaluate_lengths_errors():
    with pytest.raises(ValueError, match=r"tail \(16\) is longer than length\(s\) \[8\]"):
        evaluate_lengths(_fresh(), _stream(), (8, 32), tail=16)
    with pytest.raises(ValueError, match="needs at least seq_len"):
        evaluate_lengths(_fresh(), _stream(100), (200,))
    with pytest.raises(ValueError, match="at least one evaluation length"):
        evaluate_lengths(_fresh(), _stream(), ())
    with pytest.raises(ValueError, match="was not evaluated"):
        h = train(_fresh(), _stream(), config=TrainConfig(**FAST), val_tokens=_stream(),
                  progress=False)
        h.eval_loss(999)


def test_train_on_device(device):
    model = _fresh()
    cfg = TrainConfig(**{**FAST, "steps": 5}, device=str(device))
    hist = train(model, _stream(), config=cfg, val_tokens=_stream(), progress=False)
    assert next(model.parameters()).device.type == torch.device(device).type
    assert len(hist.evals) == 1 and math.isfinite(hist.evals[0].loss[0])


def test_train_adds_the_models_z_loss():
    """A model whose config has z_loss_weight > 0 is trained on CE + w * mean(logsumexp^2)."""
    from types import SimpleNamespace

    from llmviz.training.data import random_batches

    cfg = TrainConfig(**{**FAST, "steps": 1, "warmup": 0})
    data = _stream()
    plain = train(_fresh(), data, config=cfg, progress=False).loss[0]
    model = _fresh()
    model.config = SimpleNamespace(z_loss_weight=0.5)
    # The same first batch train() will draw: its generator is seeded with config.seed.
    inputs, targets = random_batches(
        data, batch_size=cfg.batch_size, seq_len=cfg.seq_len,
        generator=torch.Generator().manual_seed(cfg.seed), device=torch.device("cpu"),
    )
    with torch.no_grad():
        logits = model(inputs).logits
        z = torch.logsumexp(logits, dim=-1).square().mean().item()
        ce = masked_cross_entropy(logits, targets).item()
    with_z = train(model, data, config=cfg, progress=False).loss[0]
    assert math.isclose(plain, ce, rel_tol=1e-5)
    assert math.isclose(with_z, ce + 0.5 * z, rel_tol=1e-5)


def test_config_threads_pins_the_count_for_the_run_and_restores_it():
    before = torch.get_num_threads()
    wanted = 1 if before != 1 else 2
    seen = []
    config = TrainConfig(steps=3, warmup=1, batch_size=2, seq_len=8, threads=wanted)
    train(_fresh(), _stream(), config=config, progress=False,
          callbacks={"threads": lambda step, m: seen.append(torch.get_num_threads()) or 0.0})
    assert seen == [wanted]
    assert torch.get_num_threads() == before


def test_config_threads_must_be_a_positive_int():
    with pytest.raises(ValueError, match="threads"):
        TrainConfig(threads=0)
    with pytest.raises(TypeError, match="threads"):
        TrainConfig(threads=1.5)
