"""Hugging Face bridge: tiny random Llama (GQA) and GPT-2 configs, built in code, no downloads."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from llmviz.hf import (  # noqa: E402
    capture_attention,
    config_from_hf_gpt2,
    config_from_hf_llama,
    from_hf_gpt2,
    from_hf_llama,
)
from llmviz.model import generate  # noqa: E402


def _llama(**kw):
    cfg = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
               rope_scaling=None, rms_norm_eps=1e-5, initializer_range=0.2, tie_word_embeddings=False)
    cfg.update(kw)
    torch.manual_seed(0)
    hc = transformers.LlamaConfig(**cfg)
    return transformers.LlamaForCausalLM(hc).eval(), hc


def _gpt2(**kw):
    cfg = dict(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64, initializer_range=0.2)
    cfg.update(kw)
    torch.manual_seed(0)
    hc = transformers.GPT2Config(**cfg)
    return transformers.GPT2LMHeadModel(hc).eval(), hc


def _randomise_norms(model):
    with torch.no_grad():  # so the test also checks that norm gains are copied
        for name, p in model.named_parameters():
            if "norm" in name or "ln_" in name:
                p.add_(0.3 * torch.randn_like(p))


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_llama_logits_match(kv_heads, gen, device):
    hf, hc = _llama(num_key_value_heads=kv_heads)
    _randomise_norms(hf)
    ours = from_hf_llama(hf).eval()
    hf, ours = hf.to(device), ours.to(device)
    x = torch.randint(0, 128, (2, 20), generator=gen).to(device)
    with torch.no_grad():
        ref = hf(x).logits
        got = ours(x).logits
    assert ref.abs().max() > 1.0  # logits are not trivially small
    assert (got - ref).abs().max() <= 1e-5 * max(1.0, ref.abs().max().item())


def test_llama_from_state_dict_tied_and_theta(gen):
    hf, hc = _llama(tie_word_embeddings=True, rope_theta=500000.0)
    ours = from_hf_llama(hf.state_dict(), hc).eval()
    assert ours.config.rope_base == 500000.0 and ours.config.tie_embeddings
    x = torch.randint(0, 128, (1, 16), generator=gen)
    with torch.no_grad():
        torch.testing.assert_close(ours(x).logits, hf(x).logits, atol=1e-5, rtol=0)


def test_llama_padding_mask_matches(gen):
    hf, _ = _llama()
    ours = from_hf_llama(hf).eval()
    x = torch.randint(0, 128, (2, 10), generator=gen)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0  # right padding
    with torch.no_grad():
        ref = hf(x, attention_mask=mask).logits
        got = ours(x, attention_mask=mask).logits
    torch.testing.assert_close(got[0], ref[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(got[1, :7], ref[1, :7], atol=1e-5, rtol=0)


def test_llama_kv_cache_decode_matches_full(gen, device):
    hf, _ = _llama()
    ours = from_hf_llama(hf).eval().to(device)
    x = torch.randint(0, 128, (2, 16), generator=gen).to(device)
    with torch.no_grad():
        full = ours(x).logits
        cache = ours.new_cache()
        steps = [ours(x[:, :6], cache=cache).logits] + [
            ours(x[:, t : t + 1], cache=cache).logits for t in range(6, 16)
        ]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_llama_greedy_generation_matches_hf(gen):
    hf, _ = _llama()
    ours = from_hf_llama(hf).eval()
    prompt = torch.randint(0, 128, (1, 5), generator=gen)
    ref = hf.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
    got = generate(ours, prompt, max_new_tokens=8, temperature=0)
    assert torch.equal(got, ref)


def test_gpt2_logits_match(gen, device):
    hf, hc = _gpt2()
    _randomise_norms(hf)
    ours = from_hf_gpt2(hf).eval()
    hf, ours = hf.to(device), ours.to(device)
    x = torch.randint(0, 128, (2, 24), generator=gen).to(device)
    with torch.no_grad():
        ref = hf(x).logits
        got = ours(x).logits
    assert ref.abs().max() > 1.0
    assert (got - ref).abs().max() <= 1e-5 * max(1.0, ref.abs().max().item())


def test_capture_attention_matches_ours(gen):
    hf, _ = _gpt2()
    ours = from_hf_gpt2(hf).eval()
    x = torch.randint(0, 128, (2, 12), generator=gen)
    before = hf.config._attn_implementation
    maps = capture_attention(hf, x)
    assert len(maps) == 2 and maps[0].shape == (2, 4, 12, 12)
    with torch.no_grad():
        mine = ours(x, return_weights=True).weights
    for a, b in zip(maps, mine):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert hf.config._attn_implementation == before  # the implementation is restored


def test_config_translation():
    _, hc = _llama(num_key_value_heads=2)
    c = config_from_hf_llama(hc)
    assert (c.n_heads, c.n_kv_heads, c.norm, c.ffn, c.position) == (4, 2, "rms", "swiglu", "rope")
    _, gc = _gpt2()
    g = config_from_hf_gpt2(gc)
    assert (g.position, g.norm, g.activation, g.bias) == ("learned", "layer", "gelu_tanh", True)


def test_errors():
    _, hc = _llama(hidden_act="gelu")
    with pytest.raises(ValueError, match="only SwiGLU"):
        config_from_hf_llama(hc)
    hf, hc = _llama()
    with pytest.raises(ValueError, match="pass hf_config"):
        from_hf_llama(hf.state_dict())
    with pytest.raises(TypeError, match="Hugging Face model or its state_dict"):
        from_hf_llama(42, hc)
    sd = {k: v for k, v in hf.state_dict().items() if "layers.1.mlp" not in k}
    with pytest.raises(KeyError, match="no tensor"):
        from_hf_llama(sd, hc)
    with pytest.raises(TypeError, match="must be a Hugging Face model"):
        capture_attention(object(), torch.zeros(1, 3, dtype=torch.long))


@pytest.mark.parametrize(
    "rope_scaling",
    [
        {"rope_type": "linear", "factor": 4.0},
        {"rope_type": "dynamic", "factor": 2.0},
        {"rope_type": "yarn", "factor": 4.0},  # no original_max_position_embeddings: HF falls back
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 32},
    ],
    ids=lambda d: d["rope_type"] + ("+orig" if "original_max_position_embeddings" in d else ""),
)
def test_llama_with_rope_scaling_logits_match(rope_scaling, gen):
    hf, hc = _llama(rope_scaling=rope_scaling, max_position_embeddings=64)
    ours = from_hf_llama(hf).eval()
    assert ours.config.rope_scaling is not None
    x = torch.randint(0, 128, (1, 48), generator=gen)
    with torch.no_grad():
        ref, got = hf(x).logits, ours(x).logits
    # float32 parity, relative to the logits' size (yarn's attention factor scales them up)
    assert (got - ref).abs().max() <= 1e-5 * max(1.0, ref.abs().max().item())
