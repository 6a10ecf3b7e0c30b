"""Norms: closed-form properties, parity with torch and Hugging Face, masks, and bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.norm import (
    NORM_KINDS,
    BatchNormSeq,
    GroupNormSeq,
    InstanceNormSeq,
    LayerNorm,
    RMSNorm,
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    make_norm,
    rms_norm,
)


def _x(gen, *shape, scale=1.0, shift=0.0):
    return torch.randn(*shape, generator=gen) * scale + shift


# ----------------------------------------------------------------------------- properties
def test_layer_norm_zero_mean_unit_variance(gen):
    x = _x(gen, 4, 7, 64, scale=3.0, shift=2.0)
    y = layer_norm(x, eps=1e-12)
    torch.testing.assert_close(y.mean(-1), torch.zeros(4, 7), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(4, 7), atol=1e-4, rtol=0)


def test_layer_norm_variance_is_var_over_var_plus_eps(gen):
    x = _x(gen, 3, 32, scale=0.01)
    eps = 1e-4
    var = x.var(-1, unbiased=False)
    y = layer_norm(x, eps=eps)
    torch.testing.assert_close(y.var(-1, unbiased=False), var / (var + eps), rtol=1e-4, atol=1e-6)


def test_rms_norm_is_normalize_times_sqrt_d(gen):
    d = 48
    x = _x(gen, 2, 5, d)
    w = _x(gen, d)
    y = rms_norm(x, w, eps=1e-12)
    expected = torch.nn.functional.normalize(x, dim=-1) * math.sqrt(d) * w
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)


def test_rms_norm_equals_layer_norm_on_centred_input(gen):
    d = 32
    x = _x(gen, 6, d, shift=5.0)
    centred = x - x.mean(-1, keepdim=True)
    w = _x(gen, d)
    # With the same eps on both sides: the centred mean square IS the variance.
    torch.testing.assert_close(
        rms_norm(centred, w, eps=1e-3), layer_norm(centred, w, None, eps=1e-3),
        rtol=1e-5, atol=1e-6,
    )
    # ... and not on uncentred input.
    assert not torch.allclose(rms_norm(x, w), layer_norm(x, w, None), atol=1e-2)


@settings(max_examples=25, deadline=None)
@given(a=st.floats(1e-2, 1e3), seed=st.integers(0, 2**16))
def test_scale_invariance(a, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 16, generator=g, dtype=torch.float64) + 0.5
    for fn in (lambda v: rms_norm(v, eps=1e-12), lambda v: layer_norm(v, eps=1e-12)):
        torch.testing.assert_close(fn(a * x), fn(x), rtol=1e-7, atol=1e-7)
    # LayerNorm is also shift invariant; RMSNorm is not.
    torch.testing.assert_close(layer_norm(x + 7.0, eps=1e-12), layer_norm(x, eps=1e-12))
    assert not torch.allclose(rms_norm(x + 7.0, eps=1e-12), rms_norm(x, eps=1e-12))


def test_eps_dominates_tiny_inputs(gen):
    x = _x(gen, 4, 16, scale=1e-4)
    y = rms_norm(x, eps=1e-2)
    assert y.pow(2).mean(-1).max() < 1e-4  # not rescaled to unit RMS: eps wins
    assert torch.allclose(rms_norm(x, eps=1e-14).pow(2).mean(-1), torch.ones(4), atol=1e-4)


def test_half_precision_keeps_dtype(gen):
    x = _x(gen, 2, 8, 32).bfloat16()
    for norm in (LayerNorm(32), RMSNorm(32), RMSNorm(32, unit_offset=True), LayerNorm(32, fused=False)):
        assert norm.to(torch.bfloat16)(x).dtype == torch.bfloat16



@pytest.mark.parametrize("fused", [True, False])
def test_layer_norm_float64_into_float32_names_both_dtypes_and_the_fix(gen, fused):
    norm = LayerNorm(32, fused=fused)
    x = _x(gen, 2, 8, 32).double()
    with pytest.raises(TypeError, match=r"LayerNorm got x of dtype torch.float64 but its weights are "
                       r"torch.float32; .*x.to\(torch.float32\) or module.to\(x.dtype\), e.g. model.double\(\)"):
        norm(x)
    y32 = norm(x.float())
    torch.testing.assert_close(norm.double()(x), y32.double(), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match=r"got x of dtype torch.float32 but its weights are torch.float64"):
        norm(x.float())


@pytest.mark.parametrize("unit_offset", [False, True])
@pytest.mark.parametrize("fused", [True, False])
def test_rms_norm_float64_into_float32_refuses_like_layer_norm(gen, fused, unit_offset):
    norm = RMSNorm(32, fused=fused, unit_offset=unit_offset)
    x = _x(gen, 2, 8, 32).double()
    with pytest.raises(TypeError, match=r"RMSNorm got x of dtype torch.float64 but its weights are "
                       r"torch.float32; .*module.to\(x.dtype\), e.g. model.double\(\)"):
        norm(x)
    y16 = norm(x.bfloat16())  # mixed precision stays allowed: float32 gain, bf16 in and out
    assert y16.dtype == torch.bfloat16
    torch.testing.assert_close(y16.float(), norm(x.float()), rtol=2e-2, atol=2e-2)


def test_layer_norm_low_precision_input_may_meet_float32_weights(gen):
    x = _x(gen, 2, 8, 32).bfloat16()
    for fused in (True, False):  # mixed precision: the norm stays float32, the output keeps bf16
        assert LayerNorm(32, fused=fused)(x).dtype == torch.bfloat16

# ----------------------------------------------------------------------------- fused == formula
@pytest.mark.parametrize("cls,kw", [(LayerNorm, {}), (LayerNorm, {"bias": False}), (RMSNorm, {}),
                                    (RMSNorm, {"unit_offset": True})])
def test_fused_equals_formula(cls, kw, gen, device):
    d = 40
    fused, ref = cls(d, fused=True, **kw).to(device), cls(d, fused=False, **kw).to(device)
    with torch.no_grad():
        for p in fused.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    ref.load_state_dict(fused.state_dict())
    x = _x(gen, 3, 9, d, scale=4.0).to(device)
    torch.testing.assert_close(fused(x), ref(x), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- torch parity
def _randomise(*modules, gen):
    with torch.no_grad():
        params = [list(m.parameters()) for m in modules]
        for group in zip(*params):
            v = torch.randn(group[0].shape, generator=gen)
            for p in group:
                p.copy_(v)


def test_layer_norm_matches_torch(gen, device):
    ours, ref = LayerNorm(24, eps=1e-5).to(device), torch.nn.LayerNorm(24, eps=1e-5).to(device)
    _randomise(ours, ref, gen=gen)
    x = _x(gen, 2, 11, 24, scale=3).to(device)
    torch.testing.assert_close(ours(x), ref(x))
    ours.fused = False
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)


def test_rms_norm_matches_torch(gen, device):
    ours, ref = RMSNorm(24, eps=1e-6).to(device), torch.nn.RMSNorm(24, eps=1e-6).to(device)
    _randomise(ours, ref, gen=gen)
    x = _x(gen, 2, 11, 24, scale=3).to(device)
    torch.testing.assert_close(ours(x), ref(x))
    ours.fused = False
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_matches_hf_llama(gen, device, dtype):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    ours, ref = RMSNorm(32, eps=1e-5, fused=False), LlamaRMSNorm(32, eps=1e-5)
    _randomise(ours, ref, gen=gen)
    ours, ref = ours.to(device, dtype), ref.to(device, dtype)
    x = _x(gen, 2, 5, 32, scale=2).to(device, dtype)
    torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=0)  # same rounding order


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_gemma_matches_hf(gen, device, dtype):
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm

    ours, ref = make_norm("rms_gemma", 32, eps=1e-6, fused=False), GemmaRMSNorm(32, eps=1e-6)
    assert torch.all(ours.weight == 0)  # Gemma stores the offset from one
    x = _x(gen, 2, 5, 32, scale=2).to(device, dtype)
    torch.testing.assert_close(ours.to(device, dtype)(x), ref.to(device, dtype)(x), rtol=0, atol=0)
    _randomise(ours, ref, gen=gen)
    torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=0)
    ours.fused = True
    torch.testing.assert_close(ours(x), ref(x))


@pytest.mark.parametrize("n_groups", [1, 2, 8])
def test_group_norm_matches_torch(n_groups, gen, device):
    ours = GroupNormSeq(8, n_groups).to(device)
    ref = torch.nn.GroupNorm(n_groups, 8).to(device)
    _randomise(ours, ref, gen=gen)
    x = _x(gen, 3, 10, 8, scale=2, shift=1).to(device)
    torch.testing.assert_close(ours(x), ref(x.transpose(1, 2)).transpose(1, 2), rtol=1e-5, atol=1e-5)


def test_instance_norm_matches_torch(gen, device):
    ours = InstanceNormSeq(6).to(device)
    ref = torch.nn.InstanceNorm1d(6, affine=True).to(device)
    _randomise(ours, ref, gen=gen)
    x = _x(gen, 3, 10, 6, scale=2, shift=1).to(device)
    torch.testing.assert_close(ours(x), ref(x.transpose(1, 2)).transpose(1, 2), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(instance_norm(x), group_norm(x, 6))


def test_batch_norm_matches_torch_train_and_eval(gen, device):
    ours = BatchNormSeq(5, momentum=0.2).to(device)
    ref = torch.nn.BatchNorm1d(5, momentum=0.2).to(device)
    _randomise(ours, ref, gen=gen)
    for step in range(3):
        x = _x(gen, 4, 7, 5, scale=2.0, shift=float(step)).to(device)
        torch.testing.assert_close(ours(x), ref(x.transpose(1, 2)).transpose(1, 2), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.running_mean, ref.running_mean)
    torch.testing.assert_close(ours.running_var, ref.running_var)
    ours.eval(), ref.eval()
    x = _x(gen, 2, 3, 5).to(device)
    torch.testing.assert_close(ours(x), ref(x.transpose(1, 2)).transpose(1, 2), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- padding masks
def _padded(gen, lengths, T=9, C=4, pad_value=100.0):
    B = len(lengths)
    x = _x(gen, B, T, C)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
    x[~mask] = pad_value  # garbage that would contaminate the statistics
    return x, mask


def test_batch_norm_mask_excludes_pads(gen):
    x, mask = _padded(gen, [9, 4, 6])
    real = x[mask]  # (N, C) only real tokens
    bn = BatchNormSeq(4, momentum=1.0)
    y = bn(x, mask=mask)
    torch.testing.assert_close(bn.running_mean, real.mean(0))
    torch.testing.assert_close(bn.running_var, real.var(0, unbiased=True))
    torch.testing.assert_close(y[mask], (real - real.mean(0)) / torch.sqrt(real.var(0, unbiased=False) + 1e-5))
    # Without the mask the pads pull the mean far away.
    assert (BatchNormSeq(4, momentum=1.0)(x) - y).abs()[mask].max() > 0.5


def test_batch_norm_int_mask_equals_bool_mask(gen):
    x, mask = _padded(gen, [9, 3])
    torch.testing.assert_close(batch_norm(x, mask=mask), batch_norm(x, mask=mask.long()))


def test_group_and_instance_mask_exclude_pads(gen):
    x, mask = _padded(gen, [9, 5])
    y = instance_norm(x, mask=mask)
    y1 = instance_norm(x[1:2, :5])
    torch.testing.assert_close(y[1, :5], y1[0], rtol=1e-5, atol=1e-5)
    yg = group_norm(x, 2, mask=mask)
    torch.testing.assert_close(yg[1, :5], group_norm(x[1:2, :5], 2)[0], rtol=1e-5, atol=1e-5)


def test_batch_norm_eval_ignores_batch(gen):
    bn = BatchNormSeq(4)
    bn(_x(gen, 8, 16, 4, scale=3.0, shift=2.0))
    bn.eval()
    x = _x(gen, 1, 5, 4)
    # In eval mode each example is normalised on its own, independent of its batch-mates.
    torch.testing.assert_close(bn(torch.cat([x, 50 * x]))[:1], bn(x))


# ----------------------------------------------------------------------------- factory
@pytest.mark.parametrize("kind", NORM_KINDS)
def test_make_norm_builds_every_kind(kind, gen):
    kwargs = {"n_groups": 2} if kind == "group" else {}
    norm = make_norm(kind, 8, eps=1e-6, **kwargs)
    x = _x(gen, 2, 5, 8)
    assert norm(x).shape == x.shape
    if kind != "none":
        assert norm.eps == 1e-6


def test_qk_norm_on_heads(gen):
    # QK-norm: the same module applied per head on (B, H, T, D).
    q = _x(gen, 2, 4, 6, 16, scale=5)
    out = make_norm("rms", 16)(q)
    torch.testing.assert_close(out.pow(2).mean(-1), torch.ones(2, 4, 6), atol=1e-4, rtol=0)


# ----------------------------------------------------------------------------- bad input
def test_errors():
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"built for d=16 .* last dimension is 8"):
        RMSNorm(16)(x)
    with pytest.raises(ValueError, match=r"built for d=4 .* last dimension is 8"):
        LayerNorm(4)(x)
    with pytest.raises(ValueError, match="eps must be positive"):
        RMSNorm(8, eps=0.0)
    with pytest.raises(ValueError, match="eps must be positive"):
        layer_norm(x, eps=-1e-5)
    with pytest.raises(ValueError, match="eps must be positive"):
        make_norm("layer", 8, eps=0)
    with pytest.raises(ValueError, match=r"norm kind='batchnorm' is not supported"):
        make_norm("batchnorm", 8)
    with pytest.raises(ValueError, match="needs n_groups="):
        make_norm("group", 8)
    with pytest.raises(ValueError, match=r"C \(8\) must be divisible by n_groups \(3\)"):
        GroupNormSeq(8, 3)
    with pytest.raises(ValueError, match=r"C \(8\) must be divisible by n_groups \(3\)"):
        group_norm(x, 3)
    with pytest.raises(ValueError, match=r"mask must have shape \(B, T\) = \(2, 3\)"):
        BatchNormSeq(8)(x, mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="only 0/1"):
        batch_norm(x, mask=torch.full((2, 3), 2))
    with pytest.raises(TypeError, match="mask must be a torch.Tensor"):
        batch_norm(x, mask=[[1, 1, 1], [1, 1, 1]])
    with pytest.raises(ValueError, match="more than one real value per channel"):
        BatchNormSeq(8)(torch.randn(1, 1, 8))
    with pytest.raises(ValueError, match="needs running_mean and running_var"):
        batch_norm(x, training=False)
    with pytest.raises(ValueError, match=r"momentum must be in \(0, 1\]"):
        BatchNormSeq(8, momentum=0.0)
    with pytest.raises(ValueError, match=r"weight must have shape \(8,\)"):
        rms_norm(x, torch.ones(3))
    with pytest.raises(TypeError, match="floating-point"):
        rms_norm(torch.ones(2, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="must have 3 dimensions"):
        batch_norm(torch.randn(4, 8))
    with pytest.raises(ValueError, match="at least one real token"):
        group_norm(x, 2, mask=torch.tensor([[1, 1, 1], [0, 0, 0]]))
