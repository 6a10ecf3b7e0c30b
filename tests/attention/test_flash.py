"""FlashAttention's backward pass, split-KV decoding and packed GQA heads equal torch's results.

The references are torch's own: autograd through the weights-returning attention (the gradients)
and ``torch.nn.functional.scaled_dot_product_attention`` with ``enable_gqa`` (the outputs). In
float64 the differences are rounding only (< 1e-10), so "exact" is checked at that tolerance.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from llmviz.attention import scaled_dot_product_attention
from llmviz.attention.flash import (
    flash_attention,
    flash_backward,
    flash_forward,
    merge_partials,
    pack_gqa,
    packed_gqa_attention,
    saved_tensor_bytes,
    split_kv_decode,
    unpack_gqa,
)

EXACT = dict(atol=1e-10, rtol=1e-10)


def _qkv(B=2, H=4, G=2, T=37, S=37, D=8, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, D, generator=g, dtype=dtype)
    k = torch.randn(B, G, S, D, generator=g, dtype=dtype)
    v = torch.randn(B, G, S, D + 2, generator=g, dtype=dtype)  # Dv != D on purpose
    return q, k, v


def _reference_grads(q, k, v, dout, causal):
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=False, enable_gqa=True,
                                         attn_mask=_causal(q, k) if causal else None)
    out.backward(dout)
    return out.detach(), q.grad, k.grad, v.grad


def _causal(q, k):
    T, S = q.shape[2], k.shape[2]
    return torch.ones(T, S, dtype=torch.bool).tril(S - T)  # queries are the last T keys


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("blocks", [(8, 8), (16, 5), (64, 64), (1, 37)])
@pytest.mark.parametrize("G", [4, 2, 1])
def test_backward_equals_torch_autograd(causal, blocks, G):
    q, k, v = _qkv(G=G, T=29 if causal else 37, S=37)
    dout = torch.randn(q.shape[:3] + (v.shape[-1],), dtype=q.dtype, generator=torch.Generator().manual_seed(1))
    ref_out, dq_ref, dk_ref, dv_ref = _reference_grads(q, k, v, dout, causal)
    out, lse = flash_forward(q, k, v, causal=causal, block_q=blocks[0], block_k=blocks[1])
    torch.testing.assert_close(out, ref_out, **EXACT)
    dq, dk, dv = flash_backward(q, k, v, out, lse, dout, causal=causal,
                                block_q=blocks[0], block_k=blocks[1])
    for got, want in ((dq, dq_ref), (dk, dk_ref), (dv, dv_ref)):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, **EXACT)


def test_lse_is_the_row_log_sum_exp():
    q, k, v = _qkv(T=20, S=20)
    _, lse = flash_forward(q, k, v, causal=True, block_q=7, block_k=6)
    scores = (q @ k.repeat_interleave(2, 1).transpose(-1, -2)) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(~_causal(q, k), float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1), **EXACT)


def test_flash_attention_in_autograd_matches_the_library_and_saves_no_score_matrix():
    q, k, v = _qkv(B=1, H=4, G=4, T=64, S=64, D=8)
    dout = torch.randn(1, 4, 64, 10, dtype=q.dtype)
    ref = _reference_grads(q, k, v, dout, causal=True)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flash_attention(*leaves, causal=True, block_q=16, block_k=16)
    out.backward(dout)
    for got, want in zip([out.detach()] + [t.grad for t in leaves], ref):
        torch.testing.assert_close(got, want, **EXACT)
    # what the backward pass keeps: q, k, v, out, lse (linear in T) against the (T, S) weights
    a = [t.clone().requires_grad_() for t in (q, k, v)]
    flash_saved = saved_tensor_bytes(lambda: flash_attention(*a, causal=True, block_q=16, block_k=16))
    b = [t.clone().requires_grad_() for t in (q, k, v)]
    naive_saved = saved_tensor_bytes(
        lambda: scaled_dot_product_attention(*b, is_causal=True, fused=False, return_weights=True))
    linear = sum(t.numel() for t in (q, k, v)) * 8 + 64 * 4 * (10 + 1) * 8  # + out, lse
    assert flash_saved == linear
    assert naive_saved >= 64 * 64 * 4 * 8  # at least one (T, S) matrix per head


def test_saved_tensor_bytes_leaves_out_excluded_storages():
    # y = (x * w).sum(): autograd saves x (for dL/dw) and w (for dL/dx); a view of x is x's storage
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, dtype=torch.float64, requires_grad=True)
    both = saved_tensor_bytes(lambda: (x * w).sum())
    assert both == (15 + 5) * 8
    assert saved_tensor_bytes(lambda: (x * w).sum(), exclude=[w]) == 15 * 8
    assert saved_tensor_bytes(lambda: (x * w).sum(), exclude=[x[0], w]) == 0  # a view excludes its storage
    # a product of two fresh tensors: the excluded list names other storages, nothing changes
    assert saved_tensor_bytes(lambda: (x * w).sum(), exclude=[torch.zeros(5)]) == both
    with pytest.raises(TypeError, match="wrap it in a list"):
        saved_tensor_bytes(lambda: x.sum(), exclude=x)
    with pytest.raises(TypeError, match="exclude must hold tensors, got int"):
        saved_tensor_bytes(lambda: x.sum(), exclude=[1])


@pytest.mark.parametrize("S,n_splits", [(100, 1), (100, 7), (100, 100), (5, 4), (64, 8)])
@pytest.mark.parametrize("G", [8, 2, 1])
def test_split_kv_decode_equals_sdpa(S, n_splits, G):
    q, k, v = _qkv(B=2, H=8, G=G, T=1, S=S)
    want = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    out, (outs, lses) = split_kv_decode(q, k, v, n_splits=n_splits, return_partials=True)
    torch.testing.assert_close(out, want, **EXACT)
    assert outs.shape[2] == n_splits and lses.shape[2] == n_splits


def test_merge_partials_of_two_halves_is_the_whole():
    q, k, v = _qkv(B=1, H=2, G=2, T=3, S=30)
    halves = [flash_forward(q, k[:, :, s], v[:, :, s]) for s in (slice(0, 11), slice(11, 30))]
    merged = merge_partials(torch.stack([o for o, _ in halves]), torch.stack([l for _, l in halves]))
    torch.testing.assert_close(merged, flash_forward(q, k, v)[0], **EXACT)


@pytest.mark.parametrize("T,causal", [(1, False), (1, True), (5, True), (5, False)])
@pytest.mark.parametrize("G", [4, 2, 1])
def test_packed_gqa_equals_sdpa_per_head(T, causal, G):
    q, k, v = _qkv(B=2, H=4, G=G, T=T, S=12)
    mask = _causal(q, k) if causal else None
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(packed_gqa_attention(q, k, v, causal=causal), want, **EXACT)
    torch.testing.assert_close(unpack_gqa(pack_gqa(q, G), 4), q, atol=0, rtol=0)


def test_bad_input_names_the_fix():
    q, k, v = _qkv(T=10, S=5)
    with pytest.raises(ValueError, match="S \\(5\\) >= T \\(10\\)"):
        flash_forward(q, k, v, causal=True)
    q, k, v = _qkv(T=1, S=5)
    with pytest.raises(ValueError, match="n_splits \\(6\\) must be at most"):
        split_kv_decode(q, k, v, n_splits=6)
    with pytest.raises(ValueError, match="divisible by n_kv_heads"):
        pack_gqa(q, 3)
    out, lse = flash_forward(q, k, v)
    with pytest.raises(ValueError, match="lse has shape"):
        flash_backward(q, k, v, out, lse[..., None], out)
    with pytest.raises(TypeError, match="fn must be callable"):
        saved_tensor_bytes(3)
    with pytest.raises(ValueError, match="must agree"):
        merge_partials(torch.zeros(2, 3, 4), torch.zeros(3, 3))
