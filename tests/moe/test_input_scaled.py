"""Llama 4's mixture (experts scale their input by the routing weight) against transformers'
Llama4TextMoe, and against llmviz's output-weighted mixture, which it must differ from."""

from __future__ import annotations

import pytest
import torch

from llmviz.moe import MoELayer
from llmviz.moe.input_scaled import InputScaledMoE

_KW = dict(n_experts=4, top_k=1, d_expert=8, n_shared=1, d_shared=8, score="sigmoid", normalize=False)


def _layer() -> InputScaledMoE:
    torch.manual_seed(0)
    layer = InputScaledMoE(16, **_KW)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)
    return layer


def test_matches_transformers_llama4_moe():
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama4.modeling_llama4 import Llama4TextMoe

    cfg = transformers.Llama4TextConfig(hidden_size=16, intermediate_size=8, num_local_experts=4,
                                        num_experts_per_tok=1, num_attention_heads=4, num_hidden_layers=1)
    hf = Llama4TextMoe(cfg)
    ours = _layer()
    with torch.no_grad():
        hf.router.weight.copy_(ours.gate.weight)
        hf.experts.gate_up_proj.copy_(ours.experts.gate_up_proj.transpose(1, 2))
        hf.experts.down_proj.copy_(ours.experts.down_proj.transpose(1, 2))
        for name in ("gate_proj", "up_proj", "down_proj"):
            getattr(hf.shared_expert, name).weight.copy_(getattr(ours.shared_experts, name).weight)
        x = torch.randn(2, 7, 16)
        ref, _ = hf(x)
        torch.testing.assert_close(ours(x), ref.view(2, 7, 16), rtol=0, atol=1e-5)


def test_scaling_the_input_is_not_scaling_the_output():
    ours = _layer()
    plain = MoELayer(16, **_KW)
    plain.load_state_dict(ours.state_dict())
    x = torch.randn(3, 5, 16)
    with torch.no_grad():
        a, info = ours(x, return_info=True)
        b = plain(x)
    assert (a - b).abs().max() > 1e-2
    assert info.routing.weights.min() > 0 and info.routing.weights.max() < 1  # sigmoid weights


def test_no_capacity():
    with pytest.raises(ValueError, match="drops no token: build it with capacity_factor=None"):
        InputScaledMoE(16, **_KW, capacity_factor=1.0)
