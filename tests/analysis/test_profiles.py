"""Tests for llmviz.analysis.profiles: per-layer gradient norm and residual-stream RMS."""

from __future__ import annotations

import pytest
import torch

from llmviz.analysis import depth_profiles
from llmviz.model import DecoderLM
from llmviz.model.config import ModelConfig


def _model(placement: str, n_layers: int = 3) -> DecoderLM:
    torch.manual_seed(0)
    return DecoderLM(ModelConfig(d_model=16, n_layers=n_layers, n_heads=2, max_seq_len=16,
                                 placement=placement, norm="layer"))


def test_one_entry_per_block_and_hooks_removed():
    model = _model("post")
    prof = depth_profiles(model, torch.randint(0, 256, (2, 8)))
    assert len(prof["grad_norm"]) == len(prof["residual_rms"]) == 3
    assert all(g > 0 for g in prof["grad_norm"])
    # post-norm ends every block with a LayerNorm (unit gain, zero shift): RMS 1 up to eps
    assert prof["residual_rms"] == pytest.approx([1.0] * 3, abs=1e-3)
    assert not model.layers[0]._forward_hooks  # hooks removed


def test_grad_norm_is_the_norm_of_the_blocks_gradients():
    model = _model("pre")
    ids = torch.randint(0, 256, (2, 8))
    prof = depth_profiles(model, ids)
    model.zero_grad(set_to_none=True)
    model(ids, labels=ids).loss.backward()  # the same pass by hand
    for layer, g in zip(model.layers, prof["grad_norm"]):
        grads = torch.cat([p.grad.flatten() for p in layer.parameters() if p.grad is not None])
        assert g == pytest.approx(float(grads.norm()), rel=1e-5)


def test_bad_input_says_what_to_pass():
    with pytest.raises(TypeError, match=r"must have a \.layers list"):
        depth_profiles(torch.nn.Linear(2, 2), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"input_ids must be a \(B, T\) tensor"):
        depth_profiles(_model("pre"), torch.zeros(8, dtype=torch.long))


def test_stability_stats_reads_entropy_log_z_logits_and_loss():
    from llmviz.analysis import stability_stats

    model = _model("pre")
    model.train()
    ids = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(0))
    stats = stability_stats(model, ids, ids)
    assert model.training  # mode restored
    out = model.eval()(ids, return_weights=True)
    ent = min(float(-(w * w.clamp_min(1e-12).log()).sum(-1).mean()) for w in out.weights)
    assert stats["min_attention_entropy"] == pytest.approx(ent, rel=1e-5)
    assert stats["log_z"] == pytest.approx(float(torch.logsumexp(out.logits, -1).mean()), rel=1e-5)
    assert stats["max_abs_logit"] == pytest.approx(float(out.logits.abs().max()), rel=1e-5)
    ce = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), ids.flatten())
    assert stats["loss"] == pytest.approx(float(ce), rel=1e-5)
    # causal attention over T keys: entropy between 0 and log(T)
    assert 0.0 <= stats["min_attention_entropy"] <= torch.log(torch.tensor(8.0)).item()
    assert "loss" not in stability_stats(model, ids)
    with pytest.raises(ValueError, match=r"targets must be a \(B, T\) tensor like input_ids"):
        stability_stats(model, ids, ids[:, :4])
    with pytest.raises(ValueError, match=r"input_ids must be a \(B, T\) tensor"):
        stability_stats(model, ids[0])
