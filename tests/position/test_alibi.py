"""ALiBi: slopes (paper + BLOOM rule), bias shapes and conventions, parity with BLOOM."""

from __future__ import annotations

import math

import pytest
import torch

from llmviz.position.alibi import alibi_bias, alibi_slopes

transformers = pytest.importorskip("transformers")
from transformers.models.bloom.modeling_bloom import build_alibi_tensor  # noqa: E402


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8, 16, 32, 64])
def test_power_of_two_slopes_follow_the_paper(n_heads):
    slopes = alibi_slopes(n_heads, dtype=torch.float64)
    expected = torch.tensor([2 ** (-8 * (h + 1) / n_heads) for h in range(n_heads)],
                            dtype=torch.float64)
    torch.testing.assert_close(slopes, expected)
    # geometric: constant ratio, equal to the first slope; strictly decreasing; head 0 is not 1
    if n_heads > 1:
        ratios = slopes[1:] / slopes[:-1]
        torch.testing.assert_close(ratios, torch.full_like(ratios, float(slopes[0])))
        assert torch.all(slopes[1:] < slopes[:-1])
    assert slopes[0] < 1.0
    assert slopes[-1] == pytest.approx(2.0**-8)


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_slopes_match_bloom(device, n_heads):
    mask = torch.ones(1, 12, device=device, dtype=torch.long)
    bloom = build_alibi_tensor(mask, n_heads, torch.float32)  # (H, 1, S): slope_h * j
    slopes = alibi_slopes(n_heads, device=device)
    assert slopes.device.type == torch.device(device).type
    torch.testing.assert_close(bloom[:, 0, 1], slopes)
    # our causal bias differs from BLOOM's slope*j only by a per-row constant (softmax-invariant)
    ours = alibi_bias(12, slopes=slopes)  # (H, T, S)
    diff = ours - bloom.expand(-1, 12, -1)
    torch.testing.assert_close(diff, diff[..., :1].expand_as(diff), atol=1e-5, rtol=0)
    causal = torch.ones(12, 12, dtype=torch.bool, device=device).tril()
    w_ours = ours.masked_fill(~causal, float("-inf")).softmax(-1)
    w_bloom = bloom.expand(-1, 12, -1).masked_fill(~causal, float("-inf")).softmax(-1)
    torch.testing.assert_close(w_ours, w_bloom)


def test_non_power_of_two_rule():
    s12 = alibi_slopes(12, dtype=torch.float64)
    torch.testing.assert_close(s12[:8], alibi_slopes(8, dtype=torch.float64))
    torch.testing.assert_close(s12[8:], alibi_slopes(16, dtype=torch.float64)[0::2][:4])
    assert len(set(s12.tolist())) == 12


def test_causal_bias_is_linear_distance():
    slopes = alibi_slopes(4)
    b = alibi_bias(6, slopes=slopes)
    i, j = torch.meshgrid(torch.arange(6), torch.arange(6), indexing="ij")
    torch.testing.assert_close(b, -slopes[:, None, None] * (i - j).float())
    assert torch.isfinite(b).all()  # no -inf: the mask is separate
    assert torch.all(b.diagonal(dim1=-2, dim2=-1) == 0)


def test_symmetric_bias():
    slopes = alibi_slopes(4)
    b = alibi_bias(7, slopes=slopes, causal=False)
    torch.testing.assert_close(b, b.transpose(-1, -2))
    assert torch.all(b <= 0)
    causal = alibi_bias(7, slopes=slopes)
    lower = torch.ones(7, 7, dtype=torch.bool).tril()
    torch.testing.assert_close(b[:, lower], causal[:, lower])


def test_queries_are_the_last_positions_with_a_cache():
    slopes = alibi_slopes(8)
    full = alibi_bias(20, slopes=slopes)
    torch.testing.assert_close(alibi_bias(3, 20, slopes=slopes), full[:, -3:])


def test_any_length_and_dtype(device):
    slopes = alibi_slopes(2, device=device)
    b = alibi_bias(3000, slopes=slopes, dtype=torch.bfloat16)
    assert b.shape == (2, 3000, 3000) and b.dtype == torch.bfloat16
    assert b.device.type == torch.device(device).type
    assert float(b[1, -1, 0]) == pytest.approx(-2 ** -8 * 2999, rel=1e-2)


def test_bias_accepts_a_list_of_slopes():
    b = alibi_bias(3, slopes=[0.5, 0.25])
    assert b.shape == (2, 3, 3) and b.dtype == torch.float32
    assert math.isclose(float(b[0, 2, 0]), -1.0)


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"n_heads must be a positive int, got 0"):
        alibi_slopes(0)
    with pytest.raises(TypeError, match=r"n_heads must be an int, got float 2.5"):
        alibi_slopes(2.5)
    with pytest.raises(ValueError, match=r"S \(3\) must be >= T \(5\)"):
        alibi_bias(5, 3, slopes=alibi_slopes(2))
    with pytest.raises(ValueError, match=r"slopes must be a non-empty 1-D \(H,\) tensor"):
        alibi_bias(5, slopes=torch.ones(2, 2))
    with pytest.raises(ValueError, match=r"T must be a non-negative int, got -1"):
        alibi_bias(-1, slopes=alibi_slopes(2))
