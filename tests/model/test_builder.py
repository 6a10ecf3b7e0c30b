"""Blocks built from modules, the config's mask and norm objects, and Llama 4's chunked layers."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.mask_kinds import Causal, Chunked, SlidingWindow
from llmviz.model import DecoderLM, TransformerBlock
from llmviz.model.block import BlockModules, block_norms
from llmviz.model.builder import block_modules, block_options
from llmviz.model.config import ModelConfig
from llmviz.norm import NormSpec, RMSNorm

BASE = dict(vocab_size=40, d_model=32, n_layers=4, n_heads=4, n_kv_heads=2, max_seq_len=32)


def _llama4_like(**kw) -> ModelConfig:
    # chunked local layers with RoPE, every 4th layer global without RoPE (Llama 4's pattern)
    return ModelConfig(**{**BASE, "local_attention": "chunked", "sliding_window": 4,
                          "global_every": 4, "nope_layers": (3,), **kw})


def test_config_gives_each_layer_its_mask_object():
    c = _llama4_like()
    assert [c.mask_for(i) for i in range(4)] == [Chunked(4)] * 3 + [Causal()]
    s = ModelConfig(**BASE, sliding_window=4, global_every=2)
    assert [s.mask_for(i) for i in range(4)] == [SlidingWindow(4), Causal()] * 2
    m = DecoderLM(c)
    assert [layer.self_attn.layer_mask for layer in m.layers] == [c.mask_for(i) for i in range(4)]
    with pytest.raises(ValueError, match=r"local_attention='banded' is not supported; choose one of \('sliding', 'chunked'\)"):
        ModelConfig(**BASE, local_attention="banded")


def test_chunked_model_tokens_never_reach_across_chunks(gen):
    # one chunked layer: a token changes nothing outside its chunk (positions 4..7 here)
    c = ModelConfig(**{**BASE, "n_layers": 1, "local_attention": "chunked", "sliding_window": 4})
    m = DecoderLM(c).eval()
    ids = torch.randint(0, 40, (1, 12), generator=gen)
    other = ids.clone()
    other[0, 5] = (ids[0, 5] + 1) % 40
    with torch.no_grad():
        a, b = m(ids).logits, m(other).logits
    changed = (a - b).abs().amax(-1)[0] > 0
    assert changed.tolist() == [False] * 5 + [True] * 3 + [False] * 4


def test_chunked_model_decodes_with_a_cache_like_the_full_pass(gen):
    m = DecoderLM(_llama4_like()).eval()
    ids = torch.randint(0, 40, (2, 11), generator=gen)
    with torch.no_grad():
        full = m(ids).logits
        cache = m.new_cache()
        steps = [m(ids[:, :5], cache=cache).logits]
        steps += [m(ids[:, t:t + 1], cache=cache).logits for t in range(5, 11)]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-5)


def test_chunked_model_equals_a_causal_model_fed_the_hand_written_mask(gen):
    c = ModelConfig(**{**BASE, "n_layers": 2, "local_attention": "chunked", "sliding_window": 3})
    torch.manual_seed(0)
    chunked = DecoderLM(c).eval()
    plain = DecoderLM(c.replace(local_attention="sliding", sliding_window=None)).eval()
    plain.load_state_dict(chunked.state_dict())
    ids = torch.randint(0, 40, (1, 9), generator=gen)
    hand = torch.tensor([[q // 3 == k // 3 and k <= q for k in range(9)] for q in range(9)])
    with torch.no_grad():
        x = plain.embed_tokens(ids)
        for layer in plain.layers:
            x = layer(x, mask=hand)
        want = plain.lm_head(plain.norm(x))
        torch.testing.assert_close(chunked(ids).logits, want, rtol=0, atol=0)


def test_builder_and_keyword_block_make_the_same_block():
    c = ModelConfig(**BASE, qk_norm="rms", placement="sandwich", norm="layer")
    torch.manual_seed(0)
    built = TransformerBlock.from_modules(block_modules(c, 1), **block_options(c))
    torch.manual_seed(0)
    by_kw = TransformerBlock(32, 4, n_kv_heads=2, d_ff=c.d_ff, norm="layer", placement="sandwich",
                             qk_norm="rms", qk_norm_eps=c.qk_norm_eps, norm_eps=c.norm_eps)
    assert list(built.state_dict()) == list(by_kw.state_dict())
    assert repr(built) == repr(by_kw)
    assert TransformerBlock.from_config(c, 1).state_dict().keys() == built.state_dict().keys()


def test_block_from_modules_takes_what_it_uses(gen):
    mods = block_norms(NormSpec("rms", 1e-6, {"fused": False}), 16, "pre", False,
                       mixer=block_modules(ModelConfig(d_model=16, n_heads=2), 0).mixer,
                       mlp=torch.nn.Linear(16, 16))
    block = TransformerBlock.from_modules(mods)
    assert isinstance(block.attn_norm, RMSNorm) and block.attn_norm.fused is False
    x = torch.randn(1, 5, 16, generator=gen)
    assert block(x).shape == (1, 5, 16)
    with pytest.raises(TypeError, match="modules must be a BlockModules"):
        TransformerBlock(modules={"mixer": None})
    with pytest.raises(TypeError, match="needs d_model, n_heads and d_ff"):
        TransformerBlock()
    assert isinstance(mods, BlockModules)


def test_norm_spec_builds_and_counts_from_the_registry():
    spec = NormSpec("layer", 1e-4)
    norm = spec.build(10)
    assert norm.eps == 1e-4 and spec.params(10) == 20 == sum(p.numel() for p in norm.parameters())
    c = ModelConfig(**BASE, norm="layer_nobias", norm_eps=1e-3, qk_norm="rms_gemma", qk_norm_eps=1e-5)
    assert c.norm_spec == NormSpec("layer_nobias", 1e-3)
    assert c.qk_norm_spec == NormSpec("rms_gemma", 1e-5)
    assert ModelConfig(**BASE).qk_norm_spec is None
    with pytest.raises(ValueError, match=r"norm kind='dyt' is not supported"):
        NormSpec("dyt")
    with pytest.raises(TypeError, match="options must be a mapping"):
        NormSpec("rms", options=[("fused", False)])


def test_flops_and_cache_of_chunked_layers_follow_their_mask():
    from llmviz.analysis import flops_per_token, kv_cache_bytes_for

    chunked, sliding = _llama4_like(), _llama4_like(local_attention="sliding")
    full = chunked.replace(sliding_window=None, global_every=None, local_attention="sliding")
    assert flops_per_token(chunked, seq_len=16) < flops_per_token(sliding, seq_len=16) < flops_per_token(full, seq_len=16)
    assert kv_cache_bytes_for(chunked, 16) == kv_cache_bytes_for(sliding, 16) < kv_cache_bytes_for(full, 16)
