"""Fully blocked rows and blocked keys: one behaviour on every attention path.

A query that may attend to no key (through a bool mask or ``-inf`` in an additive bias) gets
zero weights and a zero output; a key that no query may attend to never contributes, even if it
holds ``inf``. Same on the reference path, the fused path and Shaw relative attention, and
decided without reading values back to the host (the functions compile with fullgraph=True).
"""

from __future__ import annotations

import pytest
import torch

from llmviz.attention import scaled_dot_product_attention
from llmviz.position.relative import ShawRelativePosition


def _qkv(B=2, H=4, G=2, T=5, S=5, D=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(*shape, generator=g, dtype=torch.float64)
        for shape in ((B, H, T, D), (B, G, S, D), (B, G, S, D))
    )


PATHS = [pytest.param(True, id="fused"), pytest.param(False, id="reference")]


@pytest.mark.parametrize("fused", PATHS)
@pytest.mark.parametrize("how", ["mask", "bias", "both"])
def test_fully_blocked_row_gives_zeros(fused, how):
    q, k, v = _qkv()
    allowed = torch.ones(5, 5, dtype=torch.bool)
    allowed[1] = False  # query 1 may attend to nothing
    bias = torch.zeros(5, 5, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
    kw = {"mask": dict(mask=allowed), "bias": dict(bias=bias),
          "both": dict(mask=allowed, bias=torch.zeros(5, 5, dtype=torch.float64))}[how]
    out = scaled_dot_product_attention(q, k, v, fused=fused, **kw)
    assert torch.isfinite(out).all()
    assert torch.all(out[:, :, 1] == 0)
    # the other rows are ordinary attention over every key
    full = scaled_dot_product_attention(q, k, v, fused=False)
    torch.testing.assert_close(out[:, :, [0, 2, 3, 4]], full[:, :, [0, 2, 3, 4]])
    if not fused:
        _, w = scaled_dot_product_attention(q, k, v, return_weights=True, **kw)
        assert torch.all(w[:, :, 1] == 0)
        torch.testing.assert_close(w[:, :, [0, 2, 3, 4]].sum(-1), torch.ones(2, 4, 4, dtype=torch.float64))


@pytest.mark.parametrize("fused", PATHS)
@pytest.mark.parametrize("how", ["mask", "bias"])
@pytest.mark.parametrize("poison", [float("inf"), float("-inf"), float("nan")])
def test_blocked_key_never_contributes_whatever_it_holds(fused, how, poison):
    q, k, v = _qkv()
    keep = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)[:, None, None, :]
    kw = dict(mask=keep) if how == "mask" else dict(
        bias=torch.zeros(2, 1, 1, 5, dtype=torch.float64).masked_fill(~keep, float("-inf")))
    clean = scaled_dot_product_attention(q, k, v, fused=fused, is_causal=False, **kw)
    k_bad, v_bad = k.clone(), v.clone()
    k_bad[0, :, 0], v_bad[0, :, 0] = poison, poison  # key 0 of row 0 is padding
    out = scaled_dot_product_attention(q, k_bad, v_bad, fused=fused, **kw)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, clean)


@pytest.mark.parametrize("fused", PATHS)
def test_paths_agree_on_padding_plus_causal(fused):
    """Left padding with a causal structure blocks whole rows (pad queries): same on each path."""
    q, k, v = _qkv()
    keep = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)[:, None, None, :]
    want = scaled_dot_product_attention(q, k, v, mask=keep, is_causal=True, fused=False)
    got = scaled_dot_product_attention(q, k, v, mask=keep, is_causal=True, fused=fused)
    torch.testing.assert_close(got, want)
    assert torch.all(got[0, :, :2] == 0)  # the two pad queries of row 0 see only padding


def test_shaw_relative_attention_blocked_row_and_key():
    torch.manual_seed(0)
    shaw = ShawRelativePosition(8, max_distance=3).double()
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    allowed = torch.ones(5, 5, dtype=torch.bool)
    allowed[2] = False  # query 2 attends to nothing
    allowed[:, 4] = False  # key 4 is blocked for everyone
    out, w = shaw(q, k, v, mask=allowed, return_weights=True)
    assert torch.isfinite(out).all()
    assert torch.all(out[:, :, 2] == 0) and torch.all(w[:, :, 2] == 0)
    k_bad, v_bad = k.clone(), v.clone()
    k_bad[:, :, 4], v_bad[:, :, 4] = float("inf"), float("nan")
    torch.testing.assert_close(shaw(q, k_bad, v_bad, mask=allowed), out)


def test_blocked_rows_are_handled_without_host_reads():
    dynamo = pytest.importorskip("torch._dynamo")
    q, k, v = _qkv()
    allowed = torch.ones(5, 5, dtype=torch.bool)
    allowed[1] = False
    bias = torch.randn(4, 5, 5, dtype=torch.float64)
    for fused in (True, False):
        dynamo.reset()
        f = torch.compile(scaled_dot_product_attention, fullgraph=True, backend="eager")
        got = f(q, k, v, mask=allowed, bias=bias, fused=fused)  # raises on a graph break
        want = scaled_dot_product_attention(q, k, v, mask=allowed, bias=bias, fused=fused)
        torch.testing.assert_close(got, want)
