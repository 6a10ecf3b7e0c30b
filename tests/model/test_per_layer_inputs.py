"""Gemma 4's per-layer inputs (the second, per-layer token embedding and the gated read of it in
every block, with the block's layer_scalar) against transformers' Gemma4TextModel and
Gemma4TextDecoderLayer."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.shared_kv import SharedKVAttention
from llmviz.ffn import make_ffn
from llmviz.model.parts import BlockModules
from llmviz.model.per_layer_inputs import PerLayerEmbedding, PerLayerInputBlock, PerLayerSlot
from llmviz.norm import NormSpec
from llmviz.position.rotary import RotaryEmbedding

transformers = pytest.importorskip("transformers")
from transformers.models.gemma4 import modeling_gemma4 as g4  # noqa: E402

V, C, L, P, H, D = 50, 32, 3, 4, 4, 8


def _config():
    cfg = transformers.Gemma4TextConfig(
        vocab_size=V, hidden_size=C, intermediate_size=48, num_hidden_layers=L, num_attention_heads=H,
        num_key_value_heads=2, head_dim=D, global_head_dim=D, hidden_size_per_layer_input=P,
        vocab_size_per_layer_input=V, layer_types=["full_attention"] * L, pad_token_id=0,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 100.0}})
    cfg._attn_implementation = "eager"
    return cfg


def _randomise(module):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(1.0 if p.dim() == 1 else 0.0, 0.3)


def test_per_layer_inputs_match_gemma4():
    hf = g4.Gemma4TextModel(_config()).eval()
    _randomise(hf)
    ours = PerLayerEmbedding(V, C, L, P)
    ours.weight, ours.per_layer.weight = hf.embed_tokens.weight, hf.embed_tokens_per_layer.weight
    ours.projection.weight = hf.per_layer_model_projection.weight
    ours.projection_norm.weight = hf.per_layer_projection_norm.weight
    ids = torch.randint(0, V, (2, 6))
    with torch.no_grad():
        x0 = hf.embed_tokens(ids)
        ref = hf.project_per_layer_inputs(x0, hf.get_per_layer_inputs(ids))
        torch.testing.assert_close(ours(ids) * C ** 0.5, x0)  # unscaled out, as nn.Embedding
        torch.testing.assert_close(ours.slot.value, ref, rtol=0, atol=1e-6)
        assert ours.slot.value.shape == (2, 6, L, P)


def test_block_matches_gemma4_decoder_layer():
    cfg = _config()
    hf = g4.Gemma4TextDecoderLayer(cfg, 1).eval()
    _randomise(hf)
    hf.layer_scalar.fill_(0.7)
    norm = NormSpec("rms", cfg.rms_norm_eps)
    attn = SharedKVAttention(C, H, n_kv_heads=2, head_dim=D, rope=RotaryEmbedding(D, base=100.0),
                             qk_norm=norm, scale=1.0, value_norm_eps=cfg.rms_norm_eps)
    parts = BlockModules(attn, make_ffn("geglu", C, 48, activation="gelu_tanh"), norm.build(C),
                         norm.build(C), norm.build(C), norm.build(C))
    slot = PerLayerSlot()
    ours = PerLayerInputBlock(parts, layer_idx=1, d_model=C, slot=slot, per_layer_dim=P,
                              activation="gelu_tanh", eps=cfg.rms_norm_eps, placement="sandwich")
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attn_norm",
             "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffn_norm"}
    sd = {names.get(k.split(".")[0], k.split(".")[0]) + k[len(k.split(".")[0]):]: v for k, v in hf.state_dict().items()}
    ours.load_state_dict(sd, strict=True)
    x, per_layer = torch.randn(2, 6, C), torch.randn(2, 6, L, P)
    slot.value = per_layer
    cos, sin = g4.Gemma4TextRotaryEmbedding(cfg)(x, torch.arange(6)[None], "full_attention")
    mask = torch.full((6, 6), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        ref = hf(x, per_layer[:, :, 1], {}, (cos, sin), mask)
        torch.testing.assert_close(ours(x), ref, rtol=0, atol=2e-6)
        ours.slot = None  # without per-layer inputs the scalar still applies
        plain = super(PerLayerInputBlock, ours).forward(x)
        torch.testing.assert_close(ours(x), plain * 0.7)


def test_bad_input():
    with pytest.raises(ValueError, match="per_layer_dim must be a positive int"):
        PerLayerEmbedding(V, C, L, 0)
    with pytest.raises(TypeError, match="slot must be a PerLayerSlot, got dict"):
        PerLayerEmbedding(V, C, L, P, slot={})
    emb = PerLayerEmbedding(V, C, L, P, per_layer_vocab=10)
    with pytest.raises(ValueError, match="outside the per-layer table's 10 rows"):
        emb(torch.tensor([[12]]))
    with pytest.raises(ValueError, match=r"x0 \(1, 2, 5\) must be the \(B, T, C=32\)"):
        emb.per_layer_inputs(torch.tensor([[1, 2]]), torch.zeros(1, 2, 5))
    with pytest.raises(ValueError, match="no per-layer inputs for layer 0"):
        PerLayerSlot().layer(0, torch.zeros(1, 2, C))
