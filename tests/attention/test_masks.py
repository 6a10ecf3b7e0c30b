"""Masks: shapes, polarity, T != S, parity with Hugging Face's masking utilities.

The parity tests target transformers 5.x (the project requires >= 5.0): ``masking_utils.sdpa_mask``
takes ``q_length``/``q_offset`` where 4.x took ``cache_position``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.attention.masks import (
    causal_mask,
    combine_masks,
    dilated_mask,
    global_local_mask,
    key_padding_to_mask,
    padding_mask,
    query_positions,
    receptive_field,
    sliding_window_mask,
    strided_mask,
)


@given(T=st.integers(1, 12), extra=st.integers(0, 12))
@settings(max_examples=40, deadline=None)
def test_causal_mask_queries_are_last_keys(T, extra):
    S = T + extra
    m = causal_mask(T, S)
    assert m.shape == (T, S) and m.dtype == torch.bool
    for i in range(T):
        pos = S - T + i
        assert m[i, : pos + 1].all() and not m[i, pos + 1 :].any()


def test_causal_mask_square_is_lower_triangular():
    assert torch.equal(causal_mask(5), torch.ones(5, 5, dtype=torch.bool).tril())


def test_causal_mask_last_row_sees_everything_with_cache():
    # one new token after 6 cached ones sees all 7 keys (the seed's T-only mask would not)
    assert causal_mask(1, 7).all()


def test_causal_mask_rejects_fewer_keys_than_queries():
    with pytest.raises(ValueError, match=r"S \(3\) must be >= T \(4\)"):
        causal_mask(4, 3)
    with pytest.raises(ValueError, match="T must be a positive int"):
        causal_mask(0)


def test_padding_conventions_agree():
    hf = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1]])  # 1 = keep
    kpm = torch.tensor([[False, False, False, True], [True, False, False, False]])  # True = pad
    a, b = padding_mask(hf), key_padding_to_mask(kpm)
    assert a.shape == (2, 1, 1, 4) and torch.equal(a, b)
    assert a[0, 0, 0].tolist() == [True, True, True, False]


def test_padding_mask_errors():
    with pytest.raises(TypeError, match="must hold integers or bools"):
        padding_mask(torch.ones(2, 3))
    with pytest.raises(ValueError, match="only 0 \\(pad\\) and 1 \\(keep\\)"):
        padding_mask(torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match=r"must be \(B, S\)"):
        padding_mask(torch.ones(3, dtype=torch.long))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        padding_mask([[1, 0]])


def test_key_padding_mask_errors():
    with pytest.raises(TypeError, match="use padding_mask"):
        key_padding_to_mask(torch.tensor([[1, 0]]))
    with pytest.raises(ValueError, match=r"must be \(B, S\)"):
        key_padding_to_mask(torch.tensor([True]))


@pytest.mark.parametrize("use_vmap", [False, True])
@pytest.mark.parametrize("T,S,window", [(6, 6, 3), (3, 6, 3), (1, 9, 4), (8, 8, 1), (5, 12, 20)])
def test_sliding_window_matches_hf(T, S, window, use_vmap, device):
    from transformers.masking_utils import (
        sdpa_mask,
        sliding_window_causal_mask_function,
    )

    # the T queries are the last T of the S keys: absolute query positions S - T .. S - 1
    hf = sdpa_mask(
        batch_size=1,
        q_length=T,
        kv_length=S,
        q_offset=S - T,
        mask_function=sliding_window_causal_mask_function(window),
        allow_is_causal_skip=False,
        use_vmap=use_vmap,
        device=device,
    )
    ours = sliding_window_mask(T, S, window=window, device=device)
    assert ours.device.type == device.type
    assert hf.shape == (1, 1, T, S)
    assert torch.equal(ours, hf[0, 0])


@pytest.mark.parametrize("use_vmap", [False, True])
def test_causal_matches_hf_sdpa_mask(use_vmap):
    from transformers.masking_utils import causal_mask_function, sdpa_mask

    # 5 queries at positions 2..6 over 7 keys (2 cached)
    hf = sdpa_mask(batch_size=1, q_length=5, kv_length=7, q_offset=2,
                   mask_function=causal_mask_function, allow_is_causal_skip=False,
                   use_vmap=use_vmap)
    assert hf.shape == (1, 1, 5, 7)
    assert torch.equal(causal_mask(5, 7), hf[0, 0])


def test_sliding_window_counts_and_symmetric():
    m = sliding_window_mask(10, window=3)
    assert m.sum(-1).tolist() == [1, 2] + [3] * 8
    sym = sliding_window_mask(10, window=3, causal=False)
    assert torch.equal(sym, sym.T) and sym.sum(-1).max() == 5
    with pytest.raises(ValueError, match="window must be a positive int"):
        sliding_window_mask(4, window=0)


def test_dilated_mask():
    m = dilated_mask(12, window=3, dilation=2)
    assert torch.equal(dilated_mask(12, window=3, dilation=1), sliding_window_mask(12, window=3))
    assert m[11].nonzero().flatten().tolist() == [7, 9, 11]
    with pytest.raises(ValueError, match="dilation must be a positive int"):
        dilated_mask(4, window=2, dilation=0)


def test_strided_mask_two_hops_reach_everything():
    m = strided_mask(16, stride=4)
    assert m[15].nonzero().flatten().tolist() == [3, 7, 11, 12, 13, 14, 15]
    assert torch.equal(receptive_field(m, 2), causal_mask(16))
    assert not torch.equal(receptive_field(sliding_window_mask(16, window=4), 2), causal_mask(16))


def test_global_local_mask():
    m = global_local_mask(8, window=2, global_tokens=1)
    assert m[:, 0].all()  # everyone sees the global token
    assert torch.equal(m & ~causal_mask(8), torch.zeros_like(m))  # still causal
    nc = global_local_mask(8, window=2, global_tokens=[3], causal=False)
    assert nc[3].all() and nc[:, 3].all()
    assert torch.equal(global_local_mask(4, 6, window=2, global_tokens=1), global_local_mask(6, window=2)[2:])
    with pytest.raises(ValueError, match="global token positions must lie in"):
        global_local_mask(4, window=2, global_tokens=[9])


def test_combine_masks_and_broadcast():
    pad = padding_mask(torch.tensor([[1, 1, 0], [1, 1, 1]]))
    c = combine_masks(causal_mask(3), None, pad)
    assert c.shape == (2, 1, 3, 3)
    assert not c[0, 0, :, 2].any() and torch.equal(c[1, 0], causal_mask(3))
    assert combine_masks(None, None) is None
    with pytest.raises(TypeError, match="mask 1 must be a bool tensor"):
        combine_masks(causal_mask(3), torch.ones(3, 3))
    with pytest.raises(ValueError, match="does not broadcast"):
        combine_masks(causal_mask(3), causal_mask(4))


def test_receptive_field_grows_linearly_with_depth():
    m = sliding_window_mask(32, window=4)
    sizes = [int(receptive_field(m, L)[-1].sum()) for L in (1, 2, 3, 4)]
    assert sizes == [4, 7, 10, 13]  # 1 + L * (window - 1)
    with pytest.raises(ValueError, match="square"):
        receptive_field(torch.ones(2, 3, dtype=torch.bool), 1)


# ----------------------------------------------------------------------------- query_positions
@settings(max_examples=50, deadline=None)
@given(T=st.integers(0, 40), cached=st.integers(0, 40))
def test_query_positions_are_the_last_T_of_S(T, cached):
    S = T + cached
    assert torch.equal(query_positions(T, S), torch.arange(S - T, S))
    assert torch.equal(query_positions(T), torch.arange(T))  # S defaults to T
    if T:  # the causal mask's last allowed key of each row is that query's position
        last_allowed = causal_mask(T, S).long().cumsum(-1).argmax(-1)
        assert torch.equal(last_allowed, query_positions(T, S))


def test_query_positions_errors():
    with pytest.raises(ValueError, match=r"S \(3\) must be >= T \(4\): queries are the last T"):
        query_positions(4, 3)
    with pytest.raises(ValueError, match="T must be a non-negative int, got -1"):
        query_positions(-1, 3)
    with pytest.raises(TypeError, match="S must be an int"):
        query_positions(2, 3.0)
