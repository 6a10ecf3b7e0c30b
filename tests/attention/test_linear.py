"""Linear attention and the gated delta rule: the two forms agree, the rules do what they say."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.attention.linear import (
    chunked_scan,
    gated_delta_rule,
    l2_normalize,
    linear_attention,
    recurrent_scan,
    state_bytes,
)


def _inputs(seed, B=2, H=3, T=11, Dk=8, Dv=5, dtype=torch.float64, unit_keys=True):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, Dk, generator=g, dtype=dtype)
    k = torch.randn(B, H, T, Dk, generator=g, dtype=dtype)
    if unit_keys:
        k = l2_normalize(k)
    v = torch.randn(B, H, T, Dv, generator=g, dtype=dtype)
    beta = torch.rand(B, H, T, generator=g, dtype=dtype)
    log_decay = -torch.rand(B, H, T, generator=g, dtype=dtype) * 0.5
    return q, k, v, beta, log_decay


@pytest.mark.parametrize("delta", [True, False])
@pytest.mark.parametrize("gated", [True, False])
@pytest.mark.parametrize("chunk", [1, 3, 4, 11, 16])
def test_chunked_equals_recurrent(delta, gated, chunk):
    q, k, v, beta, decay = _inputs(0)
    decay = decay if gated else None
    o_r, s_r = recurrent_scan(q, k, v, beta, decay, delta=delta)
    o_c, s_c = chunked_scan(q, k, v, beta, decay, delta=delta, chunk_size=chunk)
    torch.testing.assert_close(o_c, o_r, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(s_c, s_r, rtol=1e-10, atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(T=st.integers(1, 40), chunk=st.integers(1, 17), Dk=st.integers(1, 9), Dv=st.integers(1, 6),
       seed=st.integers(0, 10_000), delta=st.booleans())
def test_chunked_equals_recurrent_any_shape(T, chunk, Dk, Dv, seed, delta):
    q, k, v, beta, decay = _inputs(seed, B=1, H=2, T=T, Dk=Dk, Dv=Dv)
    o_r, s_r = recurrent_scan(q, k, v, beta, decay, delta=delta)
    o_c, s_c = chunked_scan(q, k, v, beta, decay, delta=delta, chunk_size=chunk)
    torch.testing.assert_close(o_c, o_r, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(s_c, s_r, rtol=1e-9, atol=1e-9)


def test_linear_attention_is_masked_qk_times_v():
    q, k, v, _, decay = _inputs(1, unit_keys=False)
    T, Dk = q.shape[2], q.shape[-1]
    scores = (q @ k.transpose(-1, -2)) * Dk ** -0.5
    expect = (scores * torch.ones(T, T, dtype=q.dtype).tril()) @ v
    for form in ("chunked", "recurrent"):
        out, _ = linear_attention(q, k, v, form=form, chunk_size=4)
        torch.testing.assert_close(out, expect, rtol=1e-10, atol=1e-10)
    # with a gate, the weight of s at t is the product of the gates after s: exp(G_t - G_s)
    G = decay.cumsum(-1)
    gate = (G.unsqueeze(-1) - G.unsqueeze(-2)).exp() * torch.ones(T, T, dtype=q.dtype).tril()
    for form in ("chunked", "recurrent"):
        out, _ = linear_attention(q, k, v, decay, form=form, chunk_size=4)
        torch.testing.assert_close(out, (scores * gate) @ v, rtol=1e-10, atol=1e-10)


def test_delta_rule_overwrites_a_repeated_key_where_linear_attention_adds():
    k1 = torch.zeros(1, 1, 2, 4, dtype=torch.float64)
    k1[..., 0] = 1.0                                  # the same unit key written twice
    v = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]]], dtype=torch.float64)
    ones = torch.ones(1, 1, 2, dtype=torch.float64)
    _, S_delta = recurrent_scan(k1, k1, v, ones, delta=True)
    _, S_lin = recurrent_scan(k1, k1, v, ones, delta=False)
    read = lambda S: torch.einsum("bhkv,bhk->bhv", S, k1[:, :, 0])  # noqa: E731 - S^T k
    torch.testing.assert_close(read(S_delta), torch.tensor([[[0.0, 1.0]]], dtype=torch.float64))
    torch.testing.assert_close(read(S_lin), torch.tensor([[[1.0, 1.0]]], dtype=torch.float64))


def test_delta_rule_recalls_every_pair_stored_under_orthonormal_keys():
    D, n = 16, 10
    g = torch.Generator().manual_seed(3)
    keys = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=torch.float64))[0][:n]  # orthonormal rows
    values = torch.randn(n, 3, generator=g, dtype=torch.float64)
    k = keys[None, None]
    _, S = gated_delta_rule(k, k, values[None, None], torch.ones(1, 1, n, dtype=torch.float64))
    torch.testing.assert_close(keys @ S[0, 0], values, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("form", ["chunked", "recurrent"])
def test_a_returned_state_continues_the_sequence(form):
    q, k, v, beta, decay = _inputs(4, T=13)
    whole, s_whole = gated_delta_rule(q, k, v, beta, decay, form=form, chunk_size=4)
    a, s_a = gated_delta_rule(q[:, :, :6], k[:, :, :6], v[:, :, :6], beta[:, :, :6],
                              decay[:, :, :6], form=form, chunk_size=4)
    b, s_b = gated_delta_rule(q[:, :, 6:], k[:, :, 6:], v[:, :, 6:], beta[:, :, 6:],
                              decay[:, :, 6:], state=s_a, form=form, chunk_size=4)
    torch.testing.assert_close(torch.cat([a, b], 2), whole, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(s_b, s_whole, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2), (torch.float16, 3e-3)])
def test_low_precision_keeps_its_dtype_and_stays_close(dtype, tol):
    q, k, v, beta, decay = _inputs(5, T=40)
    ref, _ = gated_delta_rule(q, k, v, beta, decay, chunk_size=16)
    out, state = gated_delta_rule(*(x.to(dtype) for x in (q, k, v, beta, decay)), chunk_size=16)
    assert out.dtype == dtype and state.dtype == dtype
    err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < tol, err


def test_t_zero_gives_empty_output_and_the_initial_state():
    q, k, v, beta, decay = _inputs(6, T=0)
    s0 = torch.randn(2, 3, 8, 5, dtype=torch.float64)
    for form in ("chunked", "recurrent"):
        out, s = gated_delta_rule(q, k, v, beta, decay, state=s0, form=form)
        assert out.shape == (2, 3, 0, 5)
        torch.testing.assert_close(s, s0)


def test_state_bytes_do_not_grow_with_length():
    assert state_bytes(16, 128, 128) == 16 * 128 * 128 * 2
    with pytest.raises(ValueError, match="d_k"):
        state_bytes(16, 0, 128)


def test_bad_input_names_the_values_and_the_fix():
    q, k, v, beta, decay = _inputs(7)
    with pytest.raises(ValueError, match=r"q and k must have the same shape"):
        recurrent_scan(q, k[..., :4], v)
    with pytest.raises(ValueError, match=r"v must be \(B, H, T, D_v\)"):
        chunked_scan(q, k, v[:, :, :3])
    with pytest.raises(ValueError, match=r"beta must have shape \(B, H, T\) = \(2, 3, 11\); got \(2, 3, 10\)"):
        chunked_scan(q, k, v, beta[..., :10])
    with pytest.raises(TypeError, match=r"q, k, v must share one dtype"):
        chunked_scan(q, k, v.float())
    with pytest.raises(ValueError, match=r"form='parallel' is not supported"):
        gated_delta_rule(q, k, v, beta, form="parallel")
    with pytest.raises(ValueError, match=r"needs beta"):
        gated_delta_rule(q, k, v, None)
    with pytest.raises(ValueError, match=r"form='parallel' is not supported"):
        linear_attention(q, k, v, form="parallel")
    with pytest.raises(ValueError, match=r"form='parallel' is not supported"):
        gated_delta_rule(q, k, v, None, form="parallel")  # the form is checked first
    with pytest.raises(ValueError, match=r"chunk_size"):
        chunked_scan(q, k, v, chunk_size=0)
    with pytest.raises(ValueError, match=r"state must have shape"):
        recurrent_scan(q, k, v, state=torch.zeros(2, 3, 5, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"scale"):
        recurrent_scan(q, k, v, scale=float("nan"))


def _hf_delta():
    mod = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    return mod.torch_chunk_gated_delta_rule, mod.torch_recurrent_gated_delta_rule


@pytest.mark.parametrize("T", [1, 37, 130])
def test_matches_hugging_face_qwen3_next_torch_kernels(T):
    """Qwen3-Next's torch fallbacks take (B, T, H, D) and normalise q, k inside (l2)."""
    hf_chunk, hf_rec = _hf_delta()
    q, k, v, beta, decay = _inputs(8, B=2, H=4, T=T, Dk=16, Dv=8, dtype=torch.float32,
                                   unit_keys=False)
    bt = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731 - (B, H, T, ...) -> (B, T, H, ...)
    s0 = torch.randn(2, 4, 16, 8) * 0.1
    for hf in (hf_chunk, hf_rec):
        ref, ref_state = hf(bt(q), bt(k), bt(v), bt(decay), bt(beta), initial_state=s0,
                            output_final_state=True, use_qk_l2norm_in_kernel=True)
        for form in ("chunked", "recurrent"):
            out, state = gated_delta_rule(l2_normalize(q), l2_normalize(k), v, beta, decay,
                                          state=s0, form=form, chunk_size=64)
            torch.testing.assert_close(bt(out), ref, rtol=2e-4, atol=2e-5)
            torch.testing.assert_close(state, ref_state, rtol=2e-4, atol=2e-5)


# --- the Gated DeltaNet layer -------------------------------------------------------------

from llmviz.attention.deltanet import GatedDeltaNet  # noqa: E402


def _hf_layer(n_k=2, n_v=4, Dk=8, Dv=6, C=32, K=4, seed=0):
    tr = pytest.importorskip("transformers")
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet
    cfg = tr.Qwen3NextConfig(hidden_size=C, linear_num_value_heads=n_v, linear_num_key_heads=n_k,
                             linear_key_head_dim=Dk, linear_value_head_dim=Dv,
                             linear_conv_kernel_dim=K, num_hidden_layers=1,
                             layer_types=["linear_attention"], num_attention_heads=2,
                             num_key_value_heads=1, vocab_size=16, intermediate_size=16)
    torch.manual_seed(seed)
    layer = Qwen3NextGatedDeltaNet(cfg, 0).eval()
    with torch.no_grad():  # non-default gains, so a swapped weight shows
        layer.norm.weight.uniform_(0.5, 1.5)
        layer.dt_bias.uniform_(-1.0, 1.0)
    return layer


@pytest.mark.parametrize("n_k,n_v", [(2, 4), (3, 3)])
@pytest.mark.parametrize("T", [1, 9, 70])
def test_gated_deltanet_matches_hugging_face_qwen3_next_layer(n_k, n_v, T):
    from llmviz.hf.layers import gated_deltanet_from_hf
    hf = _hf_layer(n_k=n_k, n_v=n_v)
    ours = gated_deltanet_from_hf(hf)
    x = torch.randn(2, T, 32, generator=torch.Generator().manual_seed(T))
    with torch.no_grad():
        torch.testing.assert_close(ours(x), hf(x), rtol=2e-4, atol=2e-5)


def test_gated_deltanet_decodes_token_by_token_like_the_full_forward():
    torch.manual_seed(1)
    layer = GatedDeltaNet(24, 4, 6, 5, n_k_heads=2, chunk_size=8).double()
    x = torch.randn(2, 19, 24, dtype=torch.float64)
    with torch.no_grad():
        full = layer(x)
        y, state = layer(x[:, :7], return_state=True)
        outs = [y]
        for t in range(7, 19):
            y, state = layer(x[:, t:t + 1], state=state, return_state=True)
            outs.append(y)
    torch.testing.assert_close(torch.cat(outs, 1), full, rtol=1e-10, atol=1e-10)
    # the state is the same size after 19 tokens as after 7: no cache that grows with T
    assert state.nbytes() == layer.new_state(2, dtype=torch.float64).nbytes()


def test_gated_deltanet_bad_input():
    with pytest.raises(ValueError, match=r"n_v_heads=6 must be a multiple of n_k_heads=4"):
        GatedDeltaNet(16, 6, 4, n_k_heads=4)
    layer = GatedDeltaNet(16, 2, 4)
    with pytest.raises(ValueError, match=r"GatedDeltaNet was built for d_model=16, but x has shape \(1, 3, 8\) \(width 8\); x must be \(B, T, C\) with C = 16"):
        layer(torch.randn(1, 3, 8))
    with pytest.raises(TypeError, match=r"GatedDeltaNet got x of dtype torch.float64"):
        layer(torch.randn(1, 3, 16, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"state.conv has shape"):
        layer(torch.randn(2, 3, 16), state=layer.new_state(1))
    from llmviz.hf.layers import gated_deltanet_from_hf
    with pytest.raises(TypeError, match=r"expects a Qwen3NextGatedDeltaNet layer"):
        gated_deltanet_from_hf(torch.nn.Linear(2, 2))
