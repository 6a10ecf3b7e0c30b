"""Gemma 4's dense feed-forward beside a mixture of experts, against the modules of transformers'
Gemma4TextDecoderLayer (its router, experts, dense MLP and the four norms around them)."""

from __future__ import annotations

import pytest
import torch

from llmviz.ffn import make_ffn
from llmviz.moe.dense_and_experts import DenseAndExperts, ScaledRMSRouter

transformers = pytest.importorskip("transformers")
from transformers.models.gemma4 import modeling_gemma4 as g4  # noqa: E402

C, E, K, F = 32, 4, 2, 16


def _hf_layer():
    cfg = transformers.Gemma4TextConfig(
        hidden_size=C, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, global_head_dim=8, layer_types=["full_attention"], hidden_size_per_layer_input=0,
        enable_moe_block=True, num_experts=E, top_k_experts=K, moe_intermediate_size=F)
    torch.manual_seed(0)
    layer = g4.Gemma4TextDecoderLayer(cfg, 0).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(1.0 if p.dim() == 1 else 0.0, 0.3)
    return layer


def _ours(hf) -> DenseAndExperts:
    ours = DenseAndExperts(make_ffn("geglu", C, 48, activation="gelu_tanh"), C, E, K, F)
    names = {"dense": "mlp", "pre_norm": "pre_feedforward_layernorm", "post_norm_1": "post_feedforward_layernorm_1",
             "pre_norm_2": "pre_feedforward_layernorm_2", "post_norm_2": "post_feedforward_layernorm_2",
             "router": "router", "experts": "experts"}
    hf_sd = hf.state_dict()
    ours.load_state_dict({k: hf_sd[names[k.split(".")[0]] + k[len(k.split(".")[0]):]] for k in ours.state_dict()})
    return ours


def test_matches_gemma4_feed_forward():
    hf = _hf_layer()
    ours = _ours(hf)
    x = torch.randn(2, 5, C)
    with torch.no_grad():
        flat = x.reshape(-1, C)
        _, w, idx = hf.router(flat)
        routed = hf.experts(hf.pre_feedforward_layernorm_2(flat), idx, w).reshape(x.shape)
        ref = hf.post_feedforward_layernorm_1(hf.mlp(hf.pre_feedforward_layernorm(x))) + \
            hf.post_feedforward_layernorm_2(routed)
        torch.testing.assert_close(ours(x), ref, rtol=0, atol=2e-6)
        weights, indices = ours.router(flat)
        torch.testing.assert_close(weights, w)
        assert torch.equal(indices, idx)


def test_per_expert_scale_reaches_the_output():
    ours = _ours(_hf_layer())
    x = torch.randn(6, C)
    with torch.no_grad():
        before, (w0, i0) = ours(x), ours.router(x)
        ours.router.per_expert_scale[i0[0, 0]] *= 3.0  # one expert's weight, after the renormalisation
        w1, i1 = ours.router(x)
        assert torch.equal(i0, i1)
        torch.testing.assert_close(w1, torch.where(i0 == i0[0, 0], 3 * w0, w0))
        assert (ours(x) - before).abs().max() > 1e-3


def test_bad_input():
    with pytest.raises(ValueError, match="top_k=5 exceeds n_experts=4"):
        ScaledRMSRouter(C, 4, 5)
    with pytest.raises(TypeError, match="dense must be the dense feed-forward module, got int"):
        DenseAndExperts(3, C, E, K, F)
    layer = DenseAndExperts(make_ffn("geglu", C, 48), C, E, K, F)
    with pytest.raises(ValueError, match="x has width 7 but the layer was built for d_model=32"):
        layer(torch.randn(2, 7))
