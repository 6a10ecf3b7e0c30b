"""Cache numbers per token: the formula agrees with what a model's cache really holds."""

from __future__ import annotations

import pytest
import torch

from llmviz.analysis import design_cache_bytes, kv_cache_bytes, kv_cache_bytes_for, layer_cache_elements
from llmviz.model import DecoderLM, ModelConfig

BASE = dict(vocab_size=64, d_model=32, n_layers=4, n_heads=4, max_seq_len=64)
CONFIGS = {
    "mha": ModelConfig(**BASE),
    "gqa": ModelConfig(**BASE, n_kv_heads=2),
    "mqa": ModelConfig(**BASE, n_kv_heads=1),
    "mla": ModelConfig(**BASE, attn_kind="mla", kv_lora_rank=12, qk_nope_head_dim=8,
                       qk_rope_head_dim=4, v_head_dim=8),
    "hybrid": ModelConfig(**BASE, n_kv_heads=2, linear_layers=(0, 1, 2)),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_formula_equals_the_bytes_a_real_cache_holds(name):
    """What one more token adds to a real cache (a linear layer's fixed state does not grow)."""
    config = CONFIGS[name]
    torch.manual_seed(0)
    model = DecoderLM(config).eval()
    sizes = []
    for T in (10, 20):
        cache = model.new_cache()
        with torch.no_grad():
            model(torch.randint(0, 64, (2, T)), cache=cache)
        sizes.append(cache.nbytes())
    per_token = sum(layer_cache_elements(config, i) for i in range(config.n_layers))
    assert per_token > 0
    assert sizes[1] - sizes[0] == per_token * 10 * 2 * 4  # 10 more tokens, batch 2, float32
    assert kv_cache_bytes_for(config, 10, batch=2, bytes_per_el=4) == per_token * 10 * 2 * 4
    if name != "hybrid":
        assert sizes[0] == per_token * 10 * 2 * 4


def test_per_layer_elements_by_design():
    assert layer_cache_elements(CONFIGS["mha"], 0) == 2 * 4 * 8
    assert layer_cache_elements(CONFIGS["mqa"], 0) == 2 * 8
    assert layer_cache_elements(CONFIGS["mla"], 0) == 12 + 4
    assert [layer_cache_elements(CONFIGS["hybrid"], i) for i in range(4)] == [0, 0, 0, 2 * 2 * 8]


def test_designs_against_the_plain_formula():
    kw = dict(n_layers=8, n_heads=16, head_dim=64, n_kv_heads=4)
    assert design_cache_bytes("mha", 100, **kw) == kv_cache_bytes(n_layers=8, n_kv_heads=16, head_dim=64, seq_len=100)
    assert design_cache_bytes("gqa", 100, **kw) == kv_cache_bytes(n_layers=8, n_kv_heads=4, head_dim=64, seq_len=100)
    assert design_cache_bytes("mqa", 100, **kw) == kv_cache_bytes(n_layers=8, n_kv_heads=1, head_dim=64, seq_len=100)
    assert design_cache_bytes("mla", 100, **kw, latent_dim=96, rope_dim=32) == 8 * 128 * 100 * 2
    # a window caps the cache; below the window sliding equals GQA
    assert design_cache_bytes("sliding", 50, **kw, window=64) == design_cache_bytes("gqa", 50, **kw)
    assert design_cache_bytes("sliding", 10_000, **kw, window=64) == design_cache_bytes("gqa", 64, **kw)
    # one softmax layer in every 4 (rounded up)
    assert design_cache_bytes("hybrid", 100, **kw, hybrid_every=4) * 4 == design_cache_bytes("gqa", 100, **kw)


def test_bad_input_names_the_fix():
    with pytest.raises(ValueError, match="design"):
        design_cache_bytes("flash", 10, n_layers=1, n_heads=4, head_dim=8)
    with pytest.raises(ValueError, match="must divide n_heads"):
        design_cache_bytes("gqa", 10, n_layers=1, n_heads=4, head_dim=8, n_kv_heads=3)
    with pytest.raises(ValueError, match="context"):
        design_cache_bytes("mha", 0, n_layers=1, n_heads=4, head_dim=8)
    with pytest.raises(TypeError, match="ModelConfig"):
        layer_cache_elements({"n_layers": 2}, 0)
    with pytest.raises(ValueError, match="layer_idx"):
        layer_cache_elements(CONFIGS["mha"], 4)


# ----------------------------------------------------------------------------- MLA decode cost
@pytest.mark.parametrize("absorbed", [False, True])
@pytest.mark.parametrize("S", [7, 40])
def test_mla_decode_macs_counts_what_the_module_computes(absorbed, S):
    """Counted by torch's FLOP counter on llmviz's own MLA (2 FLOPs per multiply-add): one
    decode step = the new token's projections + mla_decode_macs over the S + 1 keys."""
    from torch.utils.flop_counter import FlopCounterMode

    from llmviz.analysis.kv_frontier import mla_decode_macs
    from llmviz.attention.latent import LatentCache, MultiHeadLatentAttention

    H, r, dn, dr, dv, C = 4, 16, 8, 4, 8, 32
    mla = MultiHeadLatentAttention(C, H, kv_lora_rank=r, qk_nope_head_dim=dn, qk_rope_head_dim=dr,
                                   v_head_dim=dv).eval()
    x = torch.randn(1, S + 1, C, generator=torch.Generator().manual_seed(0))
    cache = LatentCache()
    with torch.no_grad():
        mla(x[:, :S], cache=cache, absorbed=absorbed)
        with FlopCounterMode(display=False) as counter:
            mla(x[:, S:], cache=cache, absorbed=absorbed)
    projections = C * H * (dn + dr) + C * (r + dr) + H * dv * C  # q, latent + rope key, output
    macs = mla_decode_macs(S + 1, n_heads=H, latent_rank=r, nope_dim=dn, rope_dim=dr, v_dim=dv,
                           absorbed=absorbed)
    assert counter.get_total_flops() == 2 * (projections + macs)


def test_mla_decode_macs_bad_input():
    from llmviz.analysis.kv_frontier import mla_decode_macs

    dims = dict(n_heads=2, latent_rank=4, nope_dim=2, rope_dim=2, v_dim=2)
    with pytest.raises(ValueError, match="cached"):
        mla_decode_macs(0, **dims, absorbed=True)
    with pytest.raises(ValueError, match="latent_rank"):
        mla_decode_macs(4, **{**dims, "latent_rank": -1}, absorbed=True)
    with pytest.raises(TypeError, match="absorbed"):
        mla_decode_macs(4, **dims, absorbed=1)
