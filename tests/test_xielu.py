"""xIELU against transformers' XIELUActivation (its Python path), its shape, and the "xielu"
feed-forward kind."""

from __future__ import annotations

import pytest
import torch

from llmviz.ffn import FFN_KINDS, FFNS, make_ffn
from llmviz.xielu import XIELU, xielu_mlp


def test_matches_transformers_xielu():
    activations = pytest.importorskip("transformers.activations")
    ref = activations.XIELUActivation(alpha_p_init=1.3, alpha_n_init=0.9, dtype=torch.float32)
    ours = XIELU(alpha_p_init=1.3, alpha_n_init=0.9)
    for name in ("alpha_p", "alpha_n", "beta", "eps"):  # same stored names and values
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name))
    with torch.no_grad():
        ours.alpha_p.add_(0.4), ours.alpha_n.sub_(0.3)
        ref.alpha_p.copy_(ours.alpha_p), ref.alpha_n.copy_(ours.alpha_n)
    x = torch.linspace(-8, 8, 1001)
    torch.testing.assert_close(ours(x), ref._xielu_python(x), atol=1e-6, rtol=0)


def test_shape_positive_parabola_negative_linear_tail_continuous_slope():
    act = XIELU(alpha_p_init=0.8, alpha_n_init=0.8, beta=0.5)
    with torch.no_grad():
        assert act(torch.tensor([2.0])).item() == pytest.approx(0.8 * 4 + 0.5 * 2, rel=1e-5)
        far = act(torch.tensor([-40.0])).item()  # expm1 -> -1: a_n (x... ) -> (-1 - x) 0.8 + 0.5 x
        assert far == pytest.approx(0.8 * (-1 + 40) - 20, rel=1e-5)
    x = torch.tensor([-1e-3, 1e-3], requires_grad=True)
    act(x).sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 0.5), atol=2e-3)  # slope beta on both sides


def test_the_feed_forward_kind_counts_and_builds():
    assert "xielu" in FFNS and FFN_KINDS["xielu"] == "xielu"
    mlp = make_ffn("xielu", 12, 20)
    assert isinstance(mlp.act, XIELU) and mlp.up_proj.bias is None
    assert FFNS["xielu"].params(12, 20) == sum(p.numel() for p in mlp.parameters()) == 2 * 12 * 20 + 2
    assert mlp(torch.randn(3, 12)).shape == (3, 12)


def test_bad_inputs_name_the_fix():
    with pytest.raises(ValueError, match="alpha_n_init > beta"):
        XIELU(alpha_n_init=0.4, beta=0.5)
    with pytest.raises(ValueError, match="has its own activation; got activation='gelu'"):
        xielu_mlp(12, 20, activation="gelu")
