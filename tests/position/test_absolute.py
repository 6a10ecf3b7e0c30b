"""Sinusoidal and learned absolute position encodings."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.position.learned import LearnedPositionalEmbedding
from llmviz.position.sinusoidal import (
    SinusoidalPositionalEmbedding,
    sinusoidal_encoding,
    sinusoidal_features,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
    sinusoidal_wavelengths,
)


def test_interleaved_layout_matches_the_paper_formula():
    pe = sinusoidal_encoding(50, 16)
    p = torch.arange(50, dtype=torch.float64)[:, None]
    i = torch.arange(8, dtype=torch.float64)[None, :]
    angle = p / 10000 ** (2 * i / 16)
    torch.testing.assert_close(pe[:, 0::2].double(), angle.sin(), atol=1e-5, rtol=0)
    torch.testing.assert_close(pe[:, 1::2].double(), angle.cos(), atol=1e-5, rtol=0)


def test_concat_layout_is_a_permutation_of_interleaved():
    inter = sinusoidal_encoding(30, 12)
    concat = sinusoidal_encoding(30, 12, layout="concat")
    perm = torch.cat((torch.arange(0, 12, 2), torch.arange(1, 12, 2)))
    torch.testing.assert_close(concat, inter[:, perm])
    assert not torch.allclose(concat, inter)


def test_wavelengths_span_two_pi_to_base():
    w = sinusoidal_wavelengths(64)
    assert w[0] == pytest.approx(2 * math.pi)
    assert torch.all(w[1:] > w[:-1])
    assert 2 * math.pi * 10000 ** (62 / 64) == pytest.approx(float(w[-1]), rel=1e-5)
    torch.testing.assert_close(sinusoidal_frequencies(64) * w, torch.full_like(w, 2 * math.pi))


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
@pytest.mark.parametrize("k", [1, 5, 37])
def test_shift_by_k_is_a_fixed_rotation(layout, k):
    C = 32
    m = sinusoidal_shift_matrix(k, C, layout=layout).double()
    pe = sinusoidal_encoding(200 + k, C, layout=layout, dtype=torch.float64)
    # PE(p + k) = M_k PE(p) for every p, with the same M_k
    torch.testing.assert_close(pe[:200] @ m.T, pe[k:], atol=1e-5, rtol=0)
    # and M_k is orthogonal (a rotation), with determinant +1
    torch.testing.assert_close(m @ m.T, torch.eye(C, dtype=torch.float64), atol=1e-6, rtol=0)
    assert torch.linalg.det(m) == pytest.approx(1.0, abs=1e-5)


@settings(max_examples=25, deadline=None)
@given(p=st.integers(0, 2000), q=st.integers(0, 2000), s=st.integers(0, 2000))
def test_dot_product_depends_only_on_offset(p, q, s):
    a = sinusoidal_features(torch.tensor([p, q, p + s, q + s], dtype=torch.float64), 32)
    assert float(a[0] @ a[1]) == pytest.approx(float(a[2] @ a[3]), abs=1e-9)
    assert float(a[0] @ a[1]) == pytest.approx(float(a[1] @ a[0]))  # symmetric


def test_dot_product_is_not_monotone_in_offset():
    pe = sinusoidal_encoding(256, 64, dtype=torch.float64)
    dots = pe[0] @ pe.T  # (T,)
    steps = dots[1:] - dots[:-1]
    assert dots[0] == pytest.approx(32.0)  # |PE|^2 = C/2
    assert (steps > 0).any() and (steps < 0).any()


def test_no_two_integer_positions_collide():
    pe = sinusoidal_encoding(1000, 64, dtype=torch.float64)
    dist = torch.cdist(pe, pe)
    dist.fill_diagonal_(float("inf"))
    assert dist.min() > 1e-3


def test_module_handles_any_length_and_float_positions():
    emb = SinusoidalPositionalEmbedding(16, layout="concat")
    out = emb(torch.arange(100000, 100004))
    assert out.shape == (4, 16) and torch.isfinite(out).all()
    torch.testing.assert_close(emb(torch.arange(5)), sinusoidal_encoding(5, 16, layout="concat"))
    assert list(emb.parameters()) == []
    half = emb(torch.tensor([0.5]))
    assert half.shape == (1, 16)


def test_learned_lookup_and_limit():
    emb = LearnedPositionalEmbedding(8, 4)
    torch.testing.assert_close(emb(torch.arange(8)), emb.weight)
    out = emb(torch.tensor([[0, 7], [3, 3]]))
    assert out.shape == (2, 2, 4)
    out.sum().backward()
    assert emb.weight.grad is not None and emb.weight.grad[3].abs().sum() > 0
    with pytest.raises(ValueError, match=r"position 8 is past the learned table: max_positions is 8"):
        emb(torch.arange(9))
    with pytest.raises(ValueError, match=r"positions must be >= 0, got -1"):
        emb(torch.tensor([-1]))
    with pytest.raises(TypeError, match=r"positions must be integers"):
        emb(torch.tensor([0.5]))


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"d_model must be an even int.*got 7"):
        sinusoidal_encoding(4, 7)
    with pytest.raises(ValueError, match=r"layout='both' is not supported"):
        sinusoidal_encoding(4, 8, layout="both")
    with pytest.raises(ValueError, match=r"n_positions must be a non-negative int, got -2"):
        sinusoidal_encoding(-2, 8)
    with pytest.raises(ValueError, match=r"base must be > 1, got 0.5"):
        sinusoidal_frequencies(8, base=0.5)
    with pytest.raises(ValueError, match=r"max_positions must be a positive int, got 0"):
        LearnedPositionalEmbedding(0, 4)
    with pytest.raises(TypeError, match=r"positions must be a torch.Tensor, got list"):
        SinusoidalPositionalEmbedding(8)([1, 2])
