"""Tests for llmviz.training.losses: masked cross-entropy and the one z-loss definition."""

from __future__ import annotations

import math

import pytest
import torch

from llmviz.model import DecoderLM
from llmviz.model.config import ModelConfig
from llmviz.training.batches import Batch
from llmviz.training.losses import masked_cross_entropy, z_loss, z_loss_term


def test_z_loss_closed_form_uniform_logits():
    # logsumexp of V equal logits c is c + log V
    logits = torch.full((2, 3, 16), 0.5)
    assert z_loss(logits).item() == pytest.approx((0.5 + math.log(16)) ** 2)


def test_z_loss_averages_only_kept_positions():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 4, 9, generator=g)
    logits[:, 0] += 100.0  # a huge log Z at position 0, which the mask drops
    mask = torch.ones(2, 4, dtype=torch.bool)
    mask[:, 0] = False
    kept = torch.logsumexp(logits[:, 1:], -1).square().mean()
    assert z_loss(logits, mask).item() == pytest.approx(kept.item(), rel=1e-6)
    assert z_loss(logits).item() > 100 * z_loss(logits, mask).item()


def test_z_loss_sees_a_shift_that_cross_entropy_ignores():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 11, generator=g)
    targets = torch.randint(0, 11, (2, 5), generator=g)
    shifted = logits + 3.0
    assert masked_cross_entropy(shifted, targets).item() == pytest.approx(
        masked_cross_entropy(logits, targets).item(), abs=1e-5
    )
    assert z_loss(shifted).item() > z_loss(logits).item() + 5


def test_model_loss_uses_the_same_z_loss_over_kept_tokens(gen):
    """DecoderLM.loss == shifted CE over kept labels + w * z_loss over the same positions."""
    model = DecoderLM(ModelConfig(vocab_size=32, d_model=16, n_layers=1, n_heads=2,
                                  max_seq_len=16, z_loss_weight=0.3)).eval()
    ids = torch.randint(0, 32, (2, 9), generator=gen)
    labels = ids.clone()
    labels[0, 3:6] = -100
    with torch.no_grad():
        logits = model(ids).logits  # (B, T, V)
        keep = labels[:, 1:] != -100
        pred, target = logits[:, :-1], labels[:, 1:].clamp_min(0)
        expected = masked_cross_entropy(pred, target, keep) + 0.3 * z_loss(pred, keep)
        assert model.loss(logits, labels).item() == pytest.approx(expected.item(), rel=1e-5)


def test_z_loss_term_is_weighted_and_masked():
    logits = torch.zeros(1, 3, 8)
    logits[0, 2] = 50.0  # dropped by the mask below
    mask = torch.tensor([[True, True, False]])
    term = z_loss_term(0.5)
    batch = Batch(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long), mask)
    assert term(logits, batch).item() == pytest.approx(0.5 * math.log(8) ** 2)
    assert term.__name__ == "z_loss"


def test_loss_errors():
    logits, targets = torch.zeros(2, 3, 5), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        masked_cross_entropy(logits, targets, torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"mask has shape \(3, 2\), expected \(B, T\) = \(2, 3\)"):
        z_loss(logits, torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="logits must have 3 dimensions"):
        z_loss(torch.zeros(3, 5))
    with pytest.raises(ValueError, match="weight must be positive"):
        z_loss_term(0.0)
