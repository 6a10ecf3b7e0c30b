"""Every component in float64, float32, bfloat16 and float16, against its own float64 result.

Error is measured relative to the size of the float64 output, ``max |y - y64| / max |y64|``,
and bounded per dtype by a few units of its rounding error (unit roundoff: float32 6e-8,
float16 4.9e-4, bfloat16 3.9e-3): float32 1e-5, float16 1e-2, bfloat16 5e-2; a whole
two-layer model gets twice that. Outputs keep the input's dtype. The RoPE check is the one the
bug report was about: after ``.to(torch.bfloat16)`` the angles at position 8191 must still be
float32-accurate (a bfloat16 ``inv_freq`` put them off by up to 0.7 rad at 4095).
"""

from __future__ import annotations

import copy

import pytest
import torch

from llmviz.attention import KVCache, MultiHeadAttention, scaled_dot_product_attention
from llmviz.ffn import make_ffn
from llmviz.model.lm import DecoderLM
from llmviz.model.presets import preset
from llmviz.norm import LayerNorm, RMSNorm, layer_norm, rms_norm
from llmviz.position.rotary import RotaryEmbedding

DTYPES = [torch.float64, torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 5e-2}


def _rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float((y.double() - ref).abs().max() / ref.abs().max())


def _check(
    y: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, factor: float = 1.0, floor: float = 0.0
) -> None:
    assert y.dtype == dtype, f"output is {y.dtype}, input was {dtype}"
    assert torch.isfinite(y).all()
    err, tol = _rel_err(y, ref), max(factor * TOL[dtype], floor)
    assert err <= tol, f"{dtype}: relative error {err:.2e} > {tol:.0e}"


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fused", [True, False])
def test_attention(dtype, fused):
    q, k, v = _randn(2, 4, 16, 32, seed=1), _randn(2, 2, 16, 32, seed=2), _randn(2, 2, 16, 32, seed=3)
    ref = scaled_dot_product_attention(q, k, v, is_causal=True, fused=False)
    y = scaled_dot_product_attention(
        q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True, fused=fused
    )
    _check(y, ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_module(dtype):
    torch.manual_seed(0)
    m64 = MultiHeadAttention(64, 4, n_kv_heads=2, rope=RotaryEmbedding(16)).double().eval()
    x = _randn(2, 12, 64)
    with torch.no_grad():
        ref = m64(x)
        y = copy.deepcopy(m64).to(dtype)(x.to(dtype))
    _check(y, ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_at_position_8191_after_module_cast(dtype):
    rope = RotaryEmbedding(64).to(dtype)
    assert rope.inv_freq.dtype in (torch.float32, torch.float64)
    positions = torch.tensor([0, 1, 4095, 8191])
    # the angles themselves: float32 accuracy at every position, whatever the module dtype
    cos, sin = rope.cos_sin(positions, dtype=torch.float64)
    exact = positions.double()[:, None] * RotaryEmbedding(64).inv_freq.double()  # (T, R/2)
    exact = torch.cat((exact, exact), dim=-1)
    assert (cos - exact.cos()).abs().max() < 2e-3
    assert (sin - exact.sin()).abs().max() < 2e-3
    # the rotated queries and keys against float64
    q, k = _randn(1, 2, 4, 64, seed=4), _randn(1, 1, 4, 64, seed=5)
    ref_q, ref_k = RotaryEmbedding(64).double()(q, k, positions)
    got_q, got_k = rope(q.to(dtype), k.to(dtype), positions)
    # float32 angles (as in Hugging Face) are good to 8191 * 2**-24 ~ 5e-4 rad at 8191: that,
    # not the float32 rounding of the output, bounds the float32 error here
    _check(got_q, ref_q, dtype, floor=1e-3 if dtype != torch.float64 else 0.0)
    _check(got_k, ref_k, dtype, floor=1e-3 if dtype != torch.float64 else 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fused", [True, False])
def test_norm_modules(dtype, fused):
    x = _randn(3, 5, 32) * 3 + 1
    for make in (lambda: LayerNorm(32, fused=fused), lambda: RMSNorm(32, fused=fused)):
        torch.manual_seed(0)
        m64 = make().double()
        with torch.no_grad():
            m64.weight.normal_()
        ref = m64(x)
        _check(copy.deepcopy(m64).to(dtype)(x.to(dtype)), ref, dtype)
        # a module left in float32 (mixed precision) must not promote the activations
        if dtype != torch.float64:
            _check(copy.deepcopy(m64).float()(x.to(dtype)), ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_norm_functions_keep_input_dtype_with_float32_weights(dtype):
    x = _randn(4, 16) * 2 - 1
    w, b = _randn(16, seed=7).float(), _randn(16, seed=8).float()  # float32 parameters
    w64, b64 = w.double(), b.double()
    _check(layer_norm(x.to(dtype), w, b), layer_norm(x, w64, b64), dtype)
    _check(rms_norm(x.to(dtype), w), rms_norm(x, w64), dtype)
    _check(rms_norm(x.to(dtype), w, unit_offset=True), rms_norm(x, w64, unit_offset=True), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["mlp", "swiglu", "geglu"])
def test_ffn(dtype, kind):
    torch.manual_seed(0)
    f64 = make_ffn(kind, 32, 64).double()
    x = _randn(2, 6, 32)
    with torch.no_grad():
        _check(copy.deepcopy(f64).to(dtype)(x.to(dtype)), f64(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["llama2", "gpt2"])
def test_small_decoder_lm(dtype, name):
    torch.manual_seed(0)
    m64 = DecoderLM(preset(name)).double().eval()
    ids = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        ref = m64(ids).logits
        y = copy.deepcopy(m64).to(dtype)(ids).logits
    _check(y, ref, dtype, factor=2.0)


def test_kv_cache_refuses_mixed_dtypes():
    cache = KVCache()
    k = torch.zeros(1, 2, 3, 4)
    cache.update(0, k, k)
    with pytest.raises(TypeError, match=r"layer 0: new k/v are torch.bfloat16 .* the cache holds torch.float32"):
        cache.update(0, k.bfloat16(), k.bfloat16())
    with pytest.raises(TypeError, match=r"k \(torch.float32\) and v \(torch.float16\) must share a dtype"):
        cache.update(1, k, k.half())
    assert cache.length(0) == 3 and len(cache) == 1
