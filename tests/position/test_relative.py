"""Relative schemes: Shaw, Transformer-XL terms, T5 buckets/bias (parity with Hugging Face)."""

from __future__ import annotations

import pytest
import torch

from llmviz.position.relative import (
    ShawRelativePosition,
    T5RelativeBias,
    relative_positions,
    shaw_relative_index,
    t5_relative_bucket,
    transformer_xl_terms,
)
from llmviz.position.sinusoidal import sinusoidal_features

transformers = pytest.importorskip("transformers")
from transformers import T5Config  # noqa: E402
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402


def test_relative_positions_with_cache():
    rel = relative_positions(2, 5)
    assert rel.tolist() == [[-3, -2, -1, 0, 1], [-4, -3, -2, -1, 0]]


# ----------------------------------------------------------------------------- T5
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (8, 20), (64, 256)])
def test_t5_buckets_match_hf(device, bidirectional, num_buckets, max_distance):
    rel = torch.arange(-600, 601, device=device)[None, :]
    ours = t5_relative_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                              max_distance=max_distance)
    hf = T5Attention._relative_position_bucket(rel, bidirectional=bidirectional,
                                               num_buckets=num_buckets, max_distance=max_distance)
    assert torch.equal(ours, hf)
    assert ours.min() >= 0 and ours.max() < num_buckets


def test_t5_bucket_structure():
    rel = torch.arange(-200, 201)
    b = t5_relative_bucket(rel, bidirectional=True)
    # exact buckets for small distances, then non-decreasing with distance, saturating
    past = b[rel <= 0].flip(0)  # distance 0, 1, 2, ...
    assert past[:8].tolist() == list(range(8))
    assert torch.all(past[1:] >= past[:-1]) and past[-1] == 15
    assert b[rel == 1].item() == 17 and b[rel == 200].item() == 31
    uni = t5_relative_bucket(rel, bidirectional=False)
    assert torch.all(uni[rel > 0] == 0)


def test_t5_bias_matches_hf_compute_bias(device):
    for is_decoder in (False, True):
        cfg = T5Config(d_model=16, d_kv=4, num_heads=3, relative_attention_num_buckets=16,
                       relative_attention_max_distance=40, is_decoder=is_decoder)
        hf = T5Attention(cfg, has_relative_attention_bias=True).to(device)
        ours = T5RelativeBias(3, num_buckets=16, max_distance=40,
                              bidirectional=not is_decoder).to(device)
        ours.relative_attention_bias.weight.data.copy_(hf.relative_attention_bias.weight.data)
        with torch.no_grad():
            expected = hf.compute_bias(9, 9, device=device)[0]  # (H, T, S)
            torch.testing.assert_close(ours(9), expected)
            # with a cache: the last 2 queries of 9 keys
            torch.testing.assert_close(ours(2, 9), expected[:, -2:])


# ----------------------------------------------------------------------------- Shaw
def test_shaw_index_clips():
    idx = shaw_relative_index(6, max_distance=2)
    assert idx.min() == 0 and idx.max() == 4
    assert torch.all(idx.diagonal() == 2)
    assert idx[5, 0] == 0 and idx[0, 5] == 4


def test_shaw_attention_matches_explicit_formula(gen):
    shaw = ShawRelativePosition(8, max_distance=3)
    q = torch.randn(2, 2, 5, 8, generator=gen)
    k = torch.randn(2, 2, 5, 8, generator=gen)
    v = torch.randn(2, 2, 5, 8, generator=gen)
    out, w = shaw(q, k, v, return_weights=True)
    ak = shaw.rel_k.detach()
    av = shaw.rel_v.detach()
    expect_out = torch.zeros_like(out)
    for i in range(5):
        a_k = torch.stack([ak[max(-3, min(3, j - i)) + 3] for j in range(5)])  # (S, D)
        a_v = torch.stack([av[max(-3, min(3, j - i)) + 3] for j in range(5)])
        s = (q[:, :, i, None, :] * (k + a_k)).sum(-1) / 8**0.5  # (B, H, S)
        wi = s.softmax(-1)
        torch.testing.assert_close(w[:, :, i], wi)
        expect_out[:, :, i] = (wi[..., None] * (v + a_v)).sum(-2)
    torch.testing.assert_close(out.detach(), expect_out)


def test_shaw_position_term_is_translation_invariant(gen):
    shaw = ShawRelativePosition(8, max_distance=4, values=False)
    q = torch.randn(1, 1, 1, 8, generator=gen).expand(1, 1, 12, 8)
    bias = shaw.score_bias(q).detach()[0, 0]  # (T, S) with the same query everywhere
    for d in range(-11, 12):
        diag = bias.diagonal(d)
        torch.testing.assert_close(diag, diag[:1].expand_as(diag))
    assert shaw.rel_v is None


def test_shaw_mask(gen):
    shaw = ShawRelativePosition(4, max_distance=2)
    q = torch.randn(1, 1, 4, 4, generator=gen)
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    _, w = shaw(q, q, q, mask=mask, return_weights=True)
    assert torch.all(w[0, 0][~mask] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(1, 1, 4))


# ----------------------------------------------------------------------------- Transformer-XL
def test_transformer_xl_terms(gen):
    T = S = 6
    D = 8
    q = torch.randn(2, T, D, generator=gen, dtype=torch.float64)  # (H, T, D)
    k = torch.randn(2, S, D, generator=gen, dtype=torch.float64)
    w_r = torch.randn(D, D, generator=gen, dtype=torch.float64)
    R = sinusoidal_features(torch.arange(-(S - 1), S), D, dtype=torch.float64)  # (2S-1, D)
    r = (R @ w_r.T).expand(2, -1, -1)
    u = torch.randn(2, D, generator=gen, dtype=torch.float64)
    v = torch.randn(2, D, generator=gen, dtype=torch.float64)
    terms = transformer_xl_terms(q, k, r, u, v)
    for i in range(T):
        for j in range(S):
            r_ij = R[i - j + S - 1] @ w_r.T
            expected = q[:, i] @ k[:, j].T
            full = (q[:, i] + u) * k[:, j] + (q[:, i] + v) * r_ij
            torch.testing.assert_close(terms.total[:, i, j], full.sum(-1))
            torch.testing.assert_close(terms.content[:, i, j], expected.diagonal())
    # (c) is constant down each column; (d) is constant along each diagonal (purely relative)
    c = terms.global_content
    torch.testing.assert_close(c, c[:, :1].expand_as(c))
    d = terms.global_position
    for off in range(-(S - 1), S):
        diag = d.diagonal(off, dim1=-2, dim2=-1)
        torch.testing.assert_close(diag, diag[:, :1].expand_as(diag))


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"max_distance must be a positive int, got 0"):
        ShawRelativePosition(8, max_distance=0)
    with pytest.raises(ValueError, match=r"n_heads must be a positive int, got 0"):
        T5RelativeBias(0)
    with pytest.raises(ValueError, match=r"max_distance \(4\) must exceed the 8 exact buckets"):
        T5RelativeBias(2, num_buckets=32, max_distance=4)
    with pytest.raises(TypeError, match=r"relative_position must be an integer tensor"):
        t5_relative_bucket(torch.zeros(3))
    with pytest.raises(ValueError, match=r"S \(2\) must be >= T \(3\)"):
        relative_positions(3, 2)
    with pytest.raises(ValueError, match=r"r must hold 2S-1 = 7 relative encodings"):
        x = torch.zeros(4, 4, 8)
        transformer_xl_terms(x, x, torch.zeros(4, 4, 8), torch.zeros(4, 8), torch.zeros(4, 8))
    with pytest.raises(ValueError, match=r"q must have 4 dimensions"):
        ShawRelativePosition(8, max_distance=2).score_bias(torch.zeros(3, 8))
