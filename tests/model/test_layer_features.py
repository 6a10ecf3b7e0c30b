"""Per-layer features needed to represent published families exactly: windows per layer, a local
RoPE base, QK-norm over heads or over the whole projection, o_proj bias apart from q/k/v, and
OLMo 2's norm on each sublayer's output."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.module import MultiHeadAttention
from llmviz.model import DecoderLM, ModelConfig, TransformerBlock


def _cfg(**kw):
    base = dict(vocab_size=50, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, max_seq_len=32)
    base.update(kw)
    return ModelConfig(**base)


def test_layer_windows_set_each_layer_and_local_rope_base():
    c = _cfg(layer_windows=(4, None, 4), local_rope_base=100.0)
    assert [c.window_for(i) for i in range(3)] == [4, None, 4]
    m = DecoderLM(c)
    assert [layer.self_attn.sliding_window for layer in m.layers] == [4, None, 4]
    bases = [layer.self_attn.rope.base for layer in m.layers]
    assert bases == [100.0, 10000.0, 100.0]
    assert m.layers[0].self_attn.rope is m.layers[2].self_attn.rope  # one local rope, shared


def test_layer_windows_equal_sliding_window_with_global_every():
    torch.manual_seed(0)
    a = DecoderLM(_cfg(sliding_window=3, global_every=3)).eval()
    b = DecoderLM(_cfg(layer_windows=(3, 3, None))).eval()
    b.load_state_dict(a.state_dict())
    x = torch.randint(0, 50, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(a(x).logits, b(x).logits, rtol=0, atol=0)


def test_o_bias_apart_from_qkv_bias():
    c = _cfg(attn_bias=True, o_bias=False)
    attn = DecoderLM(c).layers[0].self_attn
    assert attn.q_proj.bias is not None and attn.v_proj.bias is not None and attn.o_proj.bias is None
    assert _cfg(attn_bias=True).o_bias is True  # default follows attn_bias
    assert c.replace(d_model=64).o_bias is False  # an explicit value survives replace()


def test_qk_norm_scope_all_normalises_the_whole_projection():
    attn = MultiHeadAttention(32, 4, n_kv_heads=2, qk_norm="rms", qk_norm_scope="all", qk_norm_eps=1e-5)
    assert attn.q_norm.weight.shape == (32,) and attn.k_norm.weight.shape == (16,)
    head = MultiHeadAttention(32, 4, n_kv_heads=2, qk_norm="rms_gemma")
    assert head.q_norm.weight.shape == (8,)
    assert torch.all(head.q_norm.weight == 0)  # Gemma's (1 + w) norm starts at w = 0
    # with unit gains, "head" and "all" differ: per-head RMS is not the RMS over H*D
    x = torch.randn(1, 5, 32)
    other = MultiHeadAttention(32, 4, n_kv_heads=2, qk_norm="rms", qk_norm_scope="head", qk_norm_eps=1e-5)
    other.load_state_dict({k: v for k, v in attn.state_dict().items() if "norm" not in k}, strict=False)
    assert not torch.allclose(attn(x), other(x))


def test_post_sublayer_placement_is_olmo2():
    torch.manual_seed(0)
    block = TransformerBlock.from_config(_cfg(placement="post_sublayer"))
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        h = x + block.attn_norm(block.self_attn(x))
        expected = h + block.ffn_norm(block.mlp(h))
        torch.testing.assert_close(block(x), expected)
    assert _cfg(placement="post_sublayer").has_final_norm


def test_layer_feature_errors():
    with pytest.raises(ValueError, match="layer_windows has 2 entries but n_layers is 3"):
        _cfg(layer_windows=(4, None))
    with pytest.raises(ValueError, match="either layer_windows or sliding_window"):
        _cfg(layer_windows=(4, None, 4), sliding_window=4)
    with pytest.raises(ValueError, match="each layer_windows entry must be a positive int"):
        _cfg(layer_windows=(4, 0, 4))
    with pytest.raises(ValueError, match="local_rope_base .* only applies to position='rope'"):
        _cfg(position="learned", local_rope_base=100.0)
    with pytest.raises(ValueError, match="qk_norm_scope='rows' is not supported"):
        _cfg(qk_norm="rms", qk_norm_scope="rows")
    with pytest.raises(ValueError, match="post_sublayer' is defined for serial blocks only"):
        _cfg(placement="post_sublayer", parallel=True)
