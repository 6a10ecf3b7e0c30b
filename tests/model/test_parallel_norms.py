"""GPT-NeoX's parallel block with one norm per branch, against the formula in plain torch and
against transformers' own GPT-NeoX layer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from llmviz.model import DecoderLM, ModelConfig
from llmviz.model.parallel_norms import TwoNormParallelBlock, parallel_two_norms


def _model(**kw) -> DecoderLM:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, norm="layer", ffn="mlp",
                      bias=True, parallel=True, max_seq_len=32, **kw)
    model = parallel_two_norms(DecoderLM(cfg))
    with torch.no_grad():  # norms away from 1 and 0, so the two norms differ
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    return model.eval()


def test_block_is_the_two_norm_formula():
    model = _model()
    block = model.layers[0]
    assert isinstance(block, TwoNormParallelBlock)
    x = torch.randn(2, 7, 32)
    n1, n2 = block.attn_norm, block.ffn_norm
    h1 = F.layer_norm(x, (32,), n1.weight, n1.bias, n1.eps)
    h2 = F.layer_norm(x, (32,), n2.weight, n2.bias, n2.eps)
    with torch.no_grad():
        want = x + block.self_attn(h1) + block.mlp(h2)
        got, weights = block(x, return_weights=True)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert weights.shape == (2, 4, 7, 7)
    # the second norm matters: with it set to the first, the block is llmviz's one-norm block
    assert not torch.allclose(n1.weight, n2.weight)


def test_parameters_add_one_norm_per_layer():
    one = DecoderLM(ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, norm="layer",
                                ffn="mlp", bias=True, parallel=True))
    n_one = sum(p.numel() for p in one.parameters())
    two = parallel_two_norms(one)
    assert sum(p.numel() for p in two.parameters()) == n_one + 2 * 2 * 32  # weight + bias, 2 layers
    assert "layers.1.ffn_norm.weight" in two.state_dict()


def test_cached_decoding_matches_the_full_pass():
    model = _model()
    x = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        cache = model.new_cache()
        steps = [model(x[:, :4], cache=cache).logits]
        steps += [model(x[:, t:t + 1], cache=cache).logits for t in range(4, 9)]
        torch.testing.assert_close(torch.cat(steps, 1), model(x).logits, atol=1e-5, rtol=0)


def test_matches_transformers_gpt_neox_layer():
    transformers = pytest.importorskip("transformers")
    from llmviz.hf import from_hf

    torch.manual_seed(0)
    cfg = transformers.GPTNeoXConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=32, use_parallel_residual=True)
    hf = transformers.GPTNeoXForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "layernorm" in name:
                p.add_(0.3 * torch.randn_like(p))
    ours = from_hf(hf)
    x = torch.randint(0, 50, (1, 6))
    with torch.no_grad():
        h = hf.gpt_neox.embed_in(x)
        pos = torch.arange(6)[None]
        ref = hf.gpt_neox.layers[0](h, position_embeddings=hf.gpt_neox.rotary_emb(h, pos))
        ref = ref[0] if isinstance(ref, tuple) else ref
        got = ours.layers[0](ours.embed_tokens(x))
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-5)


def test_errors_name_the_fix():
    serial = DecoderLM(ModelConfig(vocab_size=50, d_model=32, n_layers=1, n_heads=4))
    with pytest.raises(ValueError, match=r"need parallel=True, placement='pre'.*parallel=False"):
        parallel_two_norms(serial)
    with pytest.raises(TypeError, match="model must be a DecoderLM, got dict"):
        parallel_two_norms({})
    with pytest.raises(ValueError, match=r"replaces a parallel pre-norm block; this one has parallel=False"):
        TwoNormParallelBlock.from_block(serial.layers[0], torch.nn.LayerNorm(32))
    with pytest.raises(TypeError, match="ffn_norm must be a norm module, got int"):
        TwoNormParallelBlock.from_block(_model().layers[0], 3)
