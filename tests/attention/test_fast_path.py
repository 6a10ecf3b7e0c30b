"""The fused attention path hands torch the cheapest description of the structure.

Plain causal attention goes through ``is_causal`` (no ``(T, S)`` tensor), a single decode step
through no mask at all, and explicit masks only where the structure needs one. Each shortcut
must give what the explicit mask gives.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from llmviz.attention import MultiHeadAttention, scaled_dot_product_attention
from llmviz.attention.cost import peak_memory
from llmviz.attention.masks import causal_mask, padding_mask, sliding_window_mask
from llmviz.attention.kv_cache import KVCache


class _Shapes(TorchDispatchMode):
    """Records (op name, output shape) of every op that runs inside the context."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.seen.append((str(func), tuple(t.shape)))
        return out


def _qkv(B=2, H=4, G=2, T=6, S=6, D=8, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, H, T, D, generator=g, dtype=dtype),
        torch.randn(B, G, S, D, generator=g, dtype=dtype),
        torch.randn(B, G, S, D, generator=g, dtype=dtype),
    )


@pytest.mark.parametrize("T,S", [(6, 6), (3, 6), (1, 6), (1, 1)])
@pytest.mark.parametrize("fused", [True, False])
def test_is_causal_equals_explicit_causal_mask(T, S, fused):
    q, k, v = _qkv(T=T, S=S)
    want = scaled_dot_product_attention(q, k, v, mask=causal_mask(T, S), fused=False)
    got = scaled_dot_product_attention(q, k, v, is_causal=True, fused=fused)
    torch.testing.assert_close(got, want)


def test_is_causal_combines_with_mask_and_bias():
    q, k, v = _qkv(T=5, S=5)
    pad = padding_mask(torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]]))  # (B, 1, 1, S)
    bias = torch.randn(4, 5, 5, dtype=torch.float64)
    explicit = causal_mask(5) & pad
    for fused in (True, False):
        want = scaled_dot_product_attention(q, k, v, mask=explicit, bias=bias, fused=False)
        got = scaled_dot_product_attention(q, k, v, mask=pad, bias=bias, is_causal=True, fused=fused)
        torch.testing.assert_close(got, want)


def test_is_causal_reference_weights_are_causal():
    q, k, _ = _qkv(T=4, S=7)
    _, w = scaled_dot_product_attention(q, k, k, is_causal=True, return_weights=True)
    assert torch.all(w.masked_select(~causal_mask(4, 7)) == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 4, dtype=torch.float64))


def test_is_causal_needs_s_at_least_t():
    q, k, v = _qkv(T=6, S=4)
    with pytest.raises(ValueError, match=r"is_causal needs S \(4\) >= T \(6\)"):
        scaled_dot_product_attention(q, k, v, is_causal=True)


@pytest.mark.parametrize("window", [None, 3, 16])
def test_module_fast_path_equals_reference_path(window):
    """Fused (is_causal / window / no mask) and reference (explicit mask) agree, prefill and decode."""
    torch.manual_seed(0)
    m = MultiHeadAttention(32, 4, n_kv_heads=2, sliding_window=window).double().eval()
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    full, _ = m(x, return_weights=True)
    torch.testing.assert_close(m(x), full)
    cache = KVCache()
    steps = [m(x[:, :5], cache=cache)] + [m(x[:, t : t + 1], cache=cache) for t in range(5, 9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


def test_plain_causal_and_decode_step_hand_torch_no_mask():
    """No (T, S) tensor is built for plain causal prefill nor for a one-token decode step."""
    torch.manual_seed(0)
    m = MultiHeadAttention(32, 4).eval()
    T = 24
    x = torch.randn(1, T, 32)
    cache = KVCache()
    with torch.no_grad(), _Shapes() as rec:
        m(x, cache=cache)
        m(x[:, :1], cache=cache)
    square = [(op, s) for op, s in rec.seen if s[-2:] in ((T, T), (1, T + 1), (T, T + 1))]
    assert not square, square


def test_sliding_window_builds_its_mask_only_when_it_bites():
    torch.manual_seed(0)
    T = 12
    x = torch.randn(1, T, 16)
    for window, expect_mask in ((4, True), (T, False)):
        m = MultiHeadAttention(16, 2, sliding_window=window).eval()
        with torch.no_grad(), _Shapes() as rec:
            m(x)
        built = any(s[-2:] == (T, T) for _, s in rec.seen)
        assert built == expect_mask, (window, rec.seen)
    m = MultiHeadAttention(16, 2, sliding_window=4).double().eval()
    xd = x.double()
    want = scaled_dot_product_attention(
        *_project(m, xd), mask=sliding_window_mask(T, window=4), fused=False
    )
    torch.testing.assert_close(m(xd), m.o_proj(want.transpose(1, 2).reshape(1, T, 16)))


def _project(m: MultiHeadAttention, x: torch.Tensor):
    B, T, _ = x.shape
    H, G, D = m.n_heads, m.n_kv_heads, m.head_dim
    return (
        m.q_proj(x).view(B, T, H, D).transpose(1, 2),
        m.k_proj(x).view(B, T, G, D).transpose(1, 2),
        m.v_proj(x).view(B, T, G, D).transpose(1, 2),
    )


def test_causal_forward_at_8192_allocates_no_score_sized_tensor():
    """Peak memory of a causal forward at T = 8192 on CPU stays far below one (T, S) tensor."""
    T, C = 8192, 32
    torch.manual_seed(0)
    m = MultiHeadAttention(C, 2).eval()
    x = torch.randn(1, T, C)
    with torch.no_grad(), _Shapes() as rec:
        m(x)
    assert max(s[-1] * s[-2] for _, s in rec.seen if len(s) >= 2) < T * T // 100
    with torch.no_grad():
        peak = peak_memory(lambda: m(x))
    mask_bytes = T * T  # one bool (T, S) mask: 64 MiB
    # what is left is activations: x, q, k, v, the output and projections, each (T, C) float32
    assert peak <= 6 * x.nbytes < mask_bytes // 8, f"peak {peak} bytes, (T, S) mask {mask_bytes}"
