"""Feed-forward blocks and activations: parity with torch/HF, the 2/3 rule, and bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.ffn import (
    ACTIVATION_FNS,
    FFN_ACTIVATIONS,
    FFN_KINDS,
    MLP,
    Activation,
    GatedMLP,
    Swish,
    activation,
    gelu,
    gelu_tanh,
    glu_hidden_size,
    make_ffn,
    relu,
    relu2,
    silu,
    swish,
)

X = torch.linspace(-8, 8, 1001, dtype=torch.float64)


# ----------------------------------------------------------------------------- activations
@pytest.mark.parametrize(
    "ours,ref",
    [
        (relu, F.relu),
        (gelu, F.gelu),
        (gelu_tanh, lambda x: F.gelu(x, approximate="tanh")),
        (silu, F.silu),
        (relu2, lambda x: F.relu(x) ** 2),
    ],
)
def test_activation_formulas_match_torch(ours, ref, device):
    x = X.to(device)
    torch.testing.assert_close(ours(x), ref(x))


@pytest.mark.parametrize(
    "ours,hf", [("relu", "relu"), ("gelu", "gelu"), ("gelu_tanh", "gelu_pytorch_tanh"),
                ("gelu_tanh", "gelu_new"), ("silu", "silu"), ("swish", "swish"), ("relu2", "relu2")]
)
def test_activations_match_hf_act2fn(ours, hf, device):
    from transformers.activations import ACT2FN

    x = X.float().to(device)
    torch.testing.assert_close(activation(ours)(x), ACT2FN[hf](x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["relu", "gelu", "gelu_tanh", "silu"])
def test_fused_activation_equals_formula(name):
    x = X.float()
    torch.testing.assert_close(Activation(name, fused=True)(x), Activation(name, fused=False)(x))


def test_swish_limits_and_gelu_closeness():
    x = X
    torch.testing.assert_close(swish(x, 1.0), silu(x))
    torch.testing.assert_close(swish(x, 1e-8), x / 2, atol=1e-6, rtol=0)  # beta -> 0: linear
    torch.testing.assert_close(swish(x, 1e4), relu(x), atol=1e-3, rtol=0)  # beta -> inf: ReLU
    assert (swish(x, 1.702) - gelu(x)).abs().max() < 0.03  # GELU ~ x * sigmoid(1.702 x)


def test_learnable_swish_starts_at_one_and_learns():
    act = activation("swish", learnable=True)
    assert isinstance(act, Swish) and isinstance(act.beta, torch.nn.Parameter)
    assert act.beta.item() == 1.0
    torch.testing.assert_close(act(X.float()), F.silu(X.float()))
    act(X.float()).sum().backward()
    assert act.beta.grad is not None and act.beta.grad.abs() > 0
    fixed = activation("swish", beta=2.0)
    assert not any(True for _ in fixed.parameters())
    torch.testing.assert_close(fixed(X.float()), X.float() * torch.sigmoid(2 * X.float()))


def test_activation_table_is_complete():
    assert set(ACTIVATION_FNS) == {"relu", "gelu", "gelu_tanh", "silu", "swish", "relu2"}
    assert FFN_ACTIVATIONS == tuple(k for k in ACTIVATION_FNS if k != "swish")


# ----------------------------------------------------------------------------- blocks
def _llama_config(d, h, act):
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=d, intermediate_size=h, hidden_act=act, mlp_bias=False,
                       num_attention_heads=2, num_hidden_layers=1, vocab_size=16)


@pytest.mark.parametrize("act,hf_act", [("silu", "silu"), ("gelu_tanh", "gelu_pytorch_tanh"), ("relu", "relu")])
def test_gated_mlp_matches_hf_llama_mlp(act, hf_act, gen, device):
    from transformers.models.llama.modeling_llama import LlamaMLP

    d, h = 24, glu_hidden_size(24, multiple_of=8)
    ref = LlamaMLP(_llama_config(d, h, hf_act)).to(device)
    ours = GatedMLP(d, h, activation=act).to(device)
    missing = ours.load_state_dict(ref.state_dict(), strict=False)
    assert not missing.missing_keys and not missing.unexpected_keys  # same parameter names
    x = torch.randn(2, 5, d, generator=gen).to(device)
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-6)


def test_mlp_matches_hand_computation(gen):
    mlp = MLP(8, 32, activation="relu2")
    x = torch.randn(3, 8, generator=gen)
    h = relu2(x @ mlp.up_proj.weight.T + mlp.up_proj.bias)
    torch.testing.assert_close(mlp(x), h @ mlp.down_proj.weight.T + mlp.down_proj.bias)


@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 200))
def test_glu_params_equal_mlp_params_under_two_thirds_rule(k):
    d = 3 * k  # divisible by 3: the 2/3 rule is then exact
    mlp = MLP(d, 4 * d, bias=False)
    glu = GatedMLP(d, glu_hidden_size(d), bias=False)
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(glu) == n(mlp) == 8 * d * d


@pytest.mark.parametrize(
    "d,kw,expected",
    [
        (4096, {"multiple_of": 256}, 11008),  # Llama 7B
        (5120, {"multiple_of": 256}, 13824),  # Llama 13B
        (8192, {"multiple_of": 4096, "ffn_dim_multiplier": 1.3}, 28672),  # Llama 2 70B
        (4096, {"multiple_of": 1024, "ffn_dim_multiplier": 1.3}, 14336),  # Llama 3 8B
    ],
)
def test_glu_hidden_size_reproduces_llama(d, kw, expected):
    assert glu_hidden_size(d, **kw) == expected


@settings(max_examples=50, deadline=None)
@given(d=st.integers(1, 4096), m=st.sampled_from([1, 8, 64, 256]))
def test_glu_hidden_size_rounds_up(d, m):
    h = glu_hidden_size(d, multiple_of=m)
    assert h % m == 0 and int(8 * d / 3) <= h < int(8 * d / 3) + m


@pytest.mark.parametrize("kind", list(FFN_KINDS))
def test_make_ffn(kind, gen):
    ffn = make_ffn(kind, 12, 20)
    assert isinstance(ffn, MLP if kind in ("mlp", "xielu") else GatedMLP)
    assert (ffn.up_proj.bias is not None) == (kind == "mlp")  # xIELU's MLP is bias-free (Apertus)
    x = torch.randn(2, 3, 12, generator=gen)
    assert ffn(x).shape == x.shape
    assert make_ffn(kind, 12, 20, bias=True).down_proj.bias is not None


# ----------------------------------------------------------------------------- bad input
def test_errors():
    with pytest.raises(ValueError, match="activation='swiglu' is not supported"):
        activation("swiglu")
    with pytest.raises(ValueError, match="ffn kind='moe' is not supported"):
        make_ffn("moe", 8, 32)
    with pytest.raises(ValueError, match=r"MLP was built for d_model=8, but x has shape \(2, 6\) \(width 6\); x must be \(\.\.\., C\)"):
        MLP(8, 32)(torch.randn(2, 6))
    with pytest.raises(ValueError, match=r"GatedMLP was built for d_model=8, but x has shape \(2, 6\)"):
        GatedMLP(8, 32)(torch.randn(2, 6))
    with pytest.raises(ValueError, match="d_ff must be a positive int, got 0"):
        GatedMLP(8, 0)
    with pytest.raises(TypeError, match="d_model must be an int, got float 8.0"):
        MLP(8.0, 32)
    with pytest.raises(ValueError, match="multiple_of must be a positive int, got 0"):
        glu_hidden_size(64, multiple_of=0)
    with pytest.raises(TypeError, match="activation must be a name"):
        MLP(8, 32, activation=3)
    with pytest.raises(TypeError, match="floating-point"):
        MLP(8, 32)(torch.ones(2, 8, dtype=torch.long))


# ----------------------------------------------------------------------------- activation_curve
def test_activation_curve_slopes_match_closed_forms():
    from llmviz.ffn import activation_curve

    x = torch.linspace(-4, 4, 81, dtype=torch.float64)
    y, slope = activation_curve("relu", x)
    assert torch.equal(y, x.clamp_min(0)) and torch.equal(slope, (x > 0).double())
    y, slope = activation_curve("swish", x, beta=2.0)
    s = torch.sigmoid(2.0 * x)
    assert torch.allclose(slope, s + 2.0 * x * s * (1 - s))  # d/dx x sigmoid(bx)
    _, slope = activation_curve(lambda v: v**3, x)  # any elementwise function
    assert torch.allclose(slope, 3 * x**2)
    assert not y.requires_grad and not slope.requires_grad


def test_activation_curve_errors():
    from llmviz.ffn import activation_curve

    with pytest.raises(ValueError, match="activation='tanh' is not supported"):
        activation_curve("tanh", torch.linspace(-1, 1, 5))
    with pytest.raises(ValueError, match="x must have 1 dimension"):
        activation_curve("relu", torch.zeros(2, 3))


def test_match_output_rms_equalises_init_scale():
    from llmviz.ffn import match_output_rms_, output_rms

    torch.manual_seed(0)
    C = 32
    mlp, glu = MLP(C, 4 * C, bias=False), GatedMLP(C, glu_hidden_size(C))
    for m in (mlp, glu):
        for lin in (mod for mod in m.modules() if isinstance(mod, torch.nn.Linear)):
            torch.nn.init.normal_(lin.weight, std=0.02)
    x = torch.randn(4, 10, C)
    before = output_rms(glu, x)
    assert before < output_rms(mlp, x) / 3  # the product of two small branches is smaller
    w = glu.down_proj.weight.clone()
    factor = match_output_rms_(glu, mlp, x)
    assert output_rms(glu, x) == pytest.approx(output_rms(mlp, x), rel=1e-5)
    assert factor == pytest.approx(output_rms(mlp, x) / before, rel=1e-5)
    assert torch.allclose(glu.down_proj.weight, factor * w)
    # the function is only rescaled: outputs are proportional on other inputs too
    y = torch.randn(3, C)
    glu2 = GatedMLP(C, glu_hidden_size(C))
    glu2.load_state_dict(glu.state_dict())
    glu2.down_proj.weight.data.copy_(w)
    assert torch.allclose(glu(y), factor * glu2(y), atol=1e-6)


def test_match_output_rms_errors():
    from llmviz.ffn import match_output_rms_, output_rms

    mlp = MLP(8, 16)
    with pytest.raises(TypeError, match="ffn must be a feed-forward with a down_proj"):
        output_rms(torch.nn.Linear(8, 8), torch.randn(2, 8))
    with pytest.raises(TypeError, match="reference must be a feed-forward with a down_proj"):
        match_output_rms_(mlp, torch.nn.Identity(), torch.randn(2, 8))
    dead = GatedMLP(8, 16)
    torch.nn.init.zeros_(dead.down_proj.weight)
    with pytest.raises(ValueError, match="output is exactly zero"):
        match_output_rms_(dead, mlp, torch.randn(2, 8))
